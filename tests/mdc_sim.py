"""A discrete-event M/D/c queue that answers specbench's own planned requests, for known-answer tests of the
open-loop statistics and the capacity rule without a server, a network or the machine's load.

The queue: c slots, FIFO; a request waits for the earliest free slot and holds it `service_s` seconds; its
first token comes `first_token_s` after its service starts (first_token_s = service_s is the stand-in server's
--slots/--service-ms queue: the output streams when the service ends). TTFT = wait + first_token_s.
`steady_capacity` is the answer: the rate at which the long-run p-th percentile of TTFT crosses the threshold,
from the queue simulated on 60,000 Poisson arrivals of its own (none of specbench's code).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.config import RunConfig
from specbench.metrics.openloop import capacity_table, open_loop_table
from specbench.metrics.slo import parse_slos
from specbench.plan import PlannedRequest, Sweep, window_requests
from specbench.records import RequestRecord
from specbench.rundir import records_frame
from specbench.runner.search import pending


@dataclass(frozen=True)
class Queue:
    slots: int
    service_s: float
    first_token_s: float

    def ttft(self, arrivals: Sequence[float]) -> np.ndarray:
        """TTFT of each arrival (sorted offsets, s): FIFO wait for the earliest free slot + first_token_s."""
        free = [0.0] * self.slots
        out = np.empty(len(arrivals))
        for i, t in enumerate(arrivals):
            start = max(t, heapq.heappop(free))
            heapq.heappush(free, start + self.service_s)
            out[i] = start - t + self.first_token_s
        return out


def answer(queue: Queue, planned: Sequence[PlannedRequest], t0: float) -> list[RequestRecord]:
    """The records of one window: every planned request (warmup included) sent on time, answered by the queue."""
    order = sorted(planned, key=lambda p: p.at_s or 0.0)
    ttft = queue.ttft([p.at_s or 0.0 for p in order])
    tail = queue.service_s - queue.first_token_s
    out = []
    for p, t in zip(order, ttft):
        n = p.spec.max_tokens
        out.append(RequestRecord(**p.fields, t_send=t0 + (p.at_s or 0.0), scheduled_s=p.at_s, send_lag_s=0.0,
                                 ttft_s=float(t), e2e_s=float(t) + tail, chunk_offsets_s=[float(t) + tail],
                                 chunk_tokens=[n], output_tokens=n))
    return out


def run_open_loop(cfg: RunConfig, sweep: Sweep, queues: dict[str, Queue],
                  launches: int = 1) -> tuple[pd.DataFrame, pd.DataFrame, list[RequestRecord]]:
    """specbench's open loop against the queues: each variant's configured rates, then its capacity search
    (runner.search.pending, from the records alone) in launch 1; later launches the rates launch 1 measured.
    Returns open_loop.csv, capacity.csv (as the runner derives them) and the records."""
    records: dict[str, list[RequestRecord]] = {}
    t0 = 1.0e9
    for variant, queue in queues.items():
        todo = [p for p in sweep.points]
        while todo:
            for point in todo:
                planned = window_requests(cfg, sweep, point, variant, repeat=1)
                recs = answer(queue, planned, t0)
                records[recs[0].window_id] = recs
                t0 += 10_000.0
            todo = pending(cfg, variant, sweep.points, set(records), records)
        rates = sorted({r.rate for rs in records.values() for r in rs if r.variant == variant and r.rate})
        for launch in range(2, launches + 1):
            for rate in rates:
                recs = answer(queue, window_requests(cfg, sweep, sweep.points[0].at_rate(rate), variant, 1, launch), t0)
                records[recs[0].window_id] = recs
                t0 += 10_000.0
    flat = [r for rs in records.values() for r in rs]
    frame, windows = records_frame(flat), pd.DataFrame({"window_id": sorted(records)})
    slos = parse_slos(cfg.slo)
    points = open_loop_table(frame, windows, slos)
    by_launch = open_loop_table(frame, windows, slos, by_launch=True) if launches > 1 else None
    return points, capacity_table(points, slos, cfg.baseline.name, by_launch), flat


def steady_percentile(queue: Queue, rate: float, q: float, n: int = 60_000, seed: int = 12345) -> float:
    """The long-run q-th percentile of TTFT at `rate` (the first 10% of arrivals discarded)."""
    arrivals = np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate, n))
    return float(np.percentile(queue.ttft(list(arrivals))[n // 10:], q))


def steady_capacity(queue: Queue, threshold_s: float, q: float = 90) -> float:
    """The rate (req/s) where the long-run percentile crosses the threshold (bisection to 0.1%)."""
    lo, hi = 1e-3, queue.slots / queue.service_s
    while hi - lo > 1e-3 * lo:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if steady_percentile(queue, mid, q) <= threshold_s else (lo, mid)
    return lo

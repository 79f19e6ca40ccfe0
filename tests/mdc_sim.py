"""specbench's open loop against a discrete-event M/D/c queue (benchmarks/mdc.py): the queue answers the
planned requests, so the open-loop statistics, the capacity rule and the capacity search are tested on known
answers without a server, a network or the machine's load."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from benchmarks.mdc import Queue, steady_capacity, steady_percentile
from specbench.config import RunConfig
from specbench.metrics.openloop import capacity_table, open_loop_table
from specbench.metrics.slo import parse_slos
from specbench.plan.windows import PlannedRequest, Sweep, window_requests
from specbench.records.rundir import records_frame
from specbench.runner.rate_search import pending
from specbench.shared.schema import RequestRecord


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
    (runner.rate_search.pending, from the records alone) in launch 1; later launches the rates launch 1 measured.
    Returns open_loop.csv, capacity.csv (as the runner derives them) and the records."""
    records: dict[str, list[RequestRecord]] = {}
    t0 = 1.0e9
    for variant, queue in queues.items():
        todo = [p for p in sweep.points]
        while todo:
            for point in todo:
                planned = window_requests(cfg.sweep, sweep, point, variant, repeat=1)
                recs = answer(queue, planned, t0)
                records[recs[0].window_id] = recs
                t0 += 10_000.0
            todo = pending(cfg, variant, sweep.points, set(records), records)
        rates = sorted({r.rate for rs in records.values() for r in rs if r.variant == variant and r.rate})
        for launch in range(2, launches + 1):
            for rate in rates:
                planned = window_requests(cfg.sweep, sweep, sweep.points[0].at_rate(rate), variant, 1, launch)
                recs = answer(queue, planned, t0)
                records[recs[0].window_id] = recs
                t0 += 10_000.0
    flat = [r for rs in records.values() for r in rs]
    frame, windows = records_frame(flat), pd.DataFrame({"window_id": sorted(records)})
    slos = parse_slos(cfg.slo)
    points = open_loop_table(frame, windows, slos)
    by_launch = open_loop_table(frame, windows, slos, by_launch=True) if launches > 1 else None
    return points, capacity_table(points, slos, cfg.baseline.name, by_launch), flat


__all__ = ["Queue", "answer", "run_open_loop", "steady_capacity", "steady_percentile"]

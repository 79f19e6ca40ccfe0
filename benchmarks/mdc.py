"""An M/D/c queue as a discrete-event simulation, and its long-run percentiles: the known answer of the
open-loop statistics (tests/report/test_openloop_section_known_answer.py, benchmarks/slo_coverage.py).

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

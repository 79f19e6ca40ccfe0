"""A closed-loop window's makespan from its requests' times, and the speedup the time model predicts for a
window whose requests' acceptance spreads (docs/metrics.md, "Speedup surface", "Window tail").

The closed loop sends a window's requests over C slots in order: a slot takes the next request when its
current one ends (client.stream.run_closed_loop), and the window ends with its last request. Forced
acceptance gives every request the same time, so its window has no tail beyond the last wave; a real head's
requests differ, and the slowest ones keep the window open while slots idle.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence

from specbench.metrics.common import NAN
from specbench.metrics.surface import TimeModel


def makespan(times: Sequence[float], slots: int) -> float:
    """The time from the window's start until its last request ends, the requests (in order, each taking
    `times[i]` seconds) sent over `slots` slots, each slot taking the next request as soon as it is free."""
    if not times or slots < 1:
        return NAN
    free = [0.0] * min(slots, len(times))
    for t in times:
        heapq.heappush(free, heapq.heappop(free) + t)
    return max(free)


def window_speedup(model: TimeModel, acceptance: Sequence[float], n_requests: int, slots: int, seed: int = 0,
                   draws: int = 200) -> float:
    """The time model's speedup of a window of `n_requests` over `slots` slots whose requests' acceptance
    lengths are drawn (with replacement, seeded) from `acceptance` (one per request of a reference run):
    each request takes `p + q / a_i` baseline-request times (the time model's terms, metrics.surface),
    the baseline's each take 1, and the speedup is the baseline's makespan over the drafter's (both windows
    emit the same tokens, so throughput scales with 1 / makespan). Mean over `draws` windows; NaN without
    acceptances."""
    pool = [a for a in acceptance if a > 0]
    if not pool or n_requests < 1:
        return NAN
    rng = random.Random(seed)
    base = makespan([1.0] * n_requests, slots)
    p, q = model.prefill, model.decode
    out = [base / makespan([p + q / rng.choice(pool) for _ in range(n_requests)], slots)
           for _ in range(draws)]
    return sum(out) / len(out)

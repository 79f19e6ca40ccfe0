"""A closed-loop window's makespan from its requests' times, and the speedup the time model predicts for a
window whose requests' acceptance spreads (docs/metrics.md, "Speedup surface", "Window tail").

The closed loop sends a window's requests over C slots in order: a slot takes the next request when its
current one ends (client.stream.run_closed_loop), and the window ends with its last request. Forced
acceptance gives every request the same time, so its window has no tail beyond the last wave; a real head's
requests differ, and the slowest ones keep the window open while slots idle.

A time model read from a real head's run (metrics.timemodel.model_from_terms) holds that head's own tail in
its prefill term p; `untailed` takes it out, so that a prediction adds only the predicted head's tail.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Sequence
from typing import NamedTuple

import pandas as pd
from scipy.optimize import brentq

from specbench.metrics.common import NAN
from specbench.metrics.forced_surface import TimeModel, fit


class Spread(NamedTuple):
    """A cell's acceptance over its requests (request_acceptance): what the window's tail and the prompts'
    sampling are simulated and estimated from."""

    acceptance: list[float]  # per request, (O - 1) / (target steps - 1)
    per_window: float  # the median requests per window; NaN: unknown
    prompt_se: float = NAN  # SE of the mean acceptance over the cell's prompts; NaN with fewer than 2 prompts
    prompts: int = 0  # distinct prompts behind prompt_se


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
    each request takes `p + q / a_i` baseline-request times (the time model's terms, metrics.forced_surface),
    the baseline's each take 1, and the speedup is the baseline's makespan over the drafter's (both windows
    emit the same tokens, so throughput scales with 1 / makespan). A window measured over its steady interval
    (`has_steady_interval`: the windows planned since issue 49) has no tail: its speedup is the inverse of the
    drawn requests' mean time. Mean over `draws` windows; NaN without acceptances."""
    pool = [a for a in acceptance if a > 0]
    if not pool or n_requests < 1:
        return NAN
    rng = random.Random(seed)
    p, q = model.prefill, model.decode
    if has_steady_interval(n_requests, slots):
        # measured over its steady interval (metrics.steady): C slots busy throughout, no ramp or drain, so
        # throughput is C x tokens / the mean request time, and the speedup the mean time's inverse
        out = [n_requests / sum(p + q / rng.choice(pool) for _ in range(n_requests)) for _ in range(draws)]
        return sum(out) / len(out)
    base = makespan([1.0] * n_requests, slots)
    out = [base / makespan([p + q / rng.choice(pool) for _ in range(n_requests)], slots)
           for _ in range(draws)]
    return sum(out) / len(out)


def has_steady_interval(n_requests: int, slots: int) -> bool:
    """Whether a closed-loop window of `n_requests` over `slots` slots is measured over its steady interval
    (metrics.steady: some request runs between the first completion and the last send, which needs more than
    the C of the ramp and the C of the drain) rather than whole, first send to last finish. C=1 has neither."""
    return slots > 1 and n_requests > 2 * slots


def request_acceptance(acceptance: pd.DataFrame, variant: str, point_id: str) -> Spread:
    """One cell's Spread from acceptance.csv: its requests' acceptance in decode steps, (O - 1) / (target steps
    - 1), as the decomposition counts them; the median requests per window; and the standard error of the
    mean acceptance over its prompts (each prompt's requests averaged first: a prompt sent in every launch is
    one sample of the traffic, not one per launch), SD of the prompts' means / sqrt(prompts). Empty without
    rows."""
    if not len(acceptance) or not point_id:
        return Spread([], NAN)
    rows = acceptance[(acceptance["variant"] == variant) & (acceptance["point_id"] == point_id)]
    ok = [(str(pid), (float(n) - 1) / (float(k) - 1))
          for pid, n, k in zip(rows.get("prompt_id", pd.Series([""] * len(rows), index=rows.index)),
                               rows["output_tokens"], rows["verify_steps"])
          if math.isfinite(float(n)) and math.isfinite(float(k)) and k > 1 and n > 1]
    sizes = sorted(rows.groupby("window_id").size().tolist())
    per_prompt = pd.DataFrame(ok, columns=["prompt", "a"]).groupby("prompt")["a"].mean()
    se = float(per_prompt.std(ddof=1)) / math.sqrt(len(per_prompt)) if len(per_prompt) > 1 else NAN
    return Spread([a for _, a in ok], float(sizes[len(sizes) // 2]) if sizes else NAN, se, len(per_prompt))


def untailed(model: TimeModel, speedup: float, spread: Spread, slots: int, seed: int = 0) -> TimeModel:
    """The model of a measured cell (its speedup `speedup`, its requests' acceptance `spread`) with the cell's
    own window tail taken out of p: the p' whose window, simulated as `window_speedup` does with the same
    requests, gives the measured speedup (q kept). `model` itself where it cannot be solved (no spread, an
    undefined term, no p' in reach)."""
    pool, n_req = [a for a in spread.acceptance if a > 0], spread.per_window
    p, q = model.prefill, model.decode
    if not pool or not all(math.isfinite(x) for x in (p, q, speedup)) or q <= 0 or speedup <= 0:
        return model
    n = int(n_req) if math.isfinite(n_req) and n_req >= 1 else slots

    def gap(x: float) -> float:
        return window_speedup(TimeModel(x, q), pool, n, slots, seed) - speedup

    floor = -q / max(pool) * (1 - 1e-6)  # every request's time stays positive above it
    lo, hi = max(floor, p - 1.0), p + 1.0
    if not gap(lo) > 0 > gap(hi):
        return model
    return TimeModel(float(brentq(gap, lo, hi, xtol=1e-9, rtol=1e-9)), q)


def tail_factor(model: TimeModel, spread: Spread, slots: int, seed: int = 0) -> float:
    """What its own window tail costs a cell whose requests' acceptance is `spread`, under `model`: the
    simulated window's speedup (`window_speedup`, the cell's requests and requests per window) over the speedup
    of a window whose requests all took their mean time, `mean_i (p + q / a_i)`; 1 without a spread, below 1
    where one slow request holds the window open. NaN for an undefined model or no requests (unknown)."""
    pool, n_req = [a for a in spread.acceptance if a > 0], spread.per_window
    p, q = model.prefill, model.decode
    if not (pool and math.isfinite(p) and math.isfinite(q)):
        return NAN
    if len(set(pool)) < 2:
        return 1.0
    mean_time = sum(p + q / a for a in pool) / len(pool)
    if mean_time <= 0:
        return NAN
    n = int(n_req) if math.isfinite(n_req) and n_req >= 1 else slots
    return window_speedup(model, pool, n, slots, seed) * mean_time


def untailed_fit(al: Sequence[float], speedup: Sequence[float], spreads: Sequence[Spread], slots: int,
                 rounds: int = 8) -> tuple[TimeModel, list[float]]:
    """Per forced point of one group (acceptance lengths `al`, measured speedups, each point's requests'
    `spreads`, at `slots` = C), the tail factor (`tail_factor`) under the time model fitted on the points with
    their tails taken out (speedup / factor): a fixed point, refitted until no factor moves by 1e-6 (`rounds`
    at most; the factors are within a few percent of 1, so two or three rounds settle it). A point whose
    requests do not spread (a whole-number length) gets 1; one without requests (unknown: NaN) is fitted as
    measured, as is every point of a model that cannot be fitted. Returns the model the factors were taken
    under, and the factors."""
    factors, raw = [1.0] * len(al), [NAN] * len(al)
    model = fit(al, speedup)
    for _ in range(rounds):
        model = fit(al, [s / f for s, f in zip(speedup, factors)])
        raw = [tail_factor(model, sp, slots) for sp in spreads]
        new = [f if math.isfinite(f) and f > 0 else 1.0 for f in raw]
        if max((abs(a - b) for a, b in zip(new, factors)), default=0.0) < 1e-6:
            break
        factors = new
    return model, raw

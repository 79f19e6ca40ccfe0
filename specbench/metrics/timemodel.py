"""The time model's terms from a real run's decomposition, and the prediction interval's combination
(docs/metrics.md, "Speedup surface": "Prediction from the model").

A decomposition.csv row gives, for one drafter cell, its speedup S, r (the step-cost ratio), AL and the
baseline's prefill share pi_b (sum TTFT / sum e2e). With the baseline's request time
T_base = prefill_b + (O - 1) step_b, (O - 1) step_b = (1 - pi_b) T_base, so in units of T_base

    q = (O - 1) step_s / T_base = r (1 - pi_b),      p = 1 / S - q / AL,

p being whatever the drafter's request takes besides its decode steps (its prefill, and the tail and queueing
the decomposition's residual holds), taken as independent of AL. The tail of its requests' acceptance spread
is the head's own, not the configuration's: surface.reference takes it out (metrics.makespan.untailed) when
it has the requests' acceptance. The model reproduces the cell's speedup at
its own AL by construction; where the model is exact (no tail, no queueing: residual = (1 - pi_s) / (1 - pi_b))
p is the drafter's prefill over T_base, pi_s / (1 - pi_s) x q / AL.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from specbench.metrics.forced_surface import NAN, TimeModel


def model_from_terms(speedup: float, r: float, al: float, baseline_prefill_share: float) -> TimeModel:
    """The time model of one decomposed cell (see the module's formulas); NaN terms when one is undefined."""
    vals = (speedup, r, al, baseline_prefill_share)
    if not all(math.isfinite(x) for x in vals) or al <= 0 or speedup <= 0:
        return TimeModel(NAN, NAN)
    q = r * (1.0 - baseline_prefill_share)
    return TimeModel(1.0 / speedup - q / al, q)


def log_half_width(*widths: float) -> float:
    """Relative half-widths in log space (each ln(point / end), >= 0) combined in quadrature: the prediction's
    sources of error (step cost, acceptance, the model's own) are independent; a NaN width counts as 0."""
    return math.sqrt(sum(w * w for w in widths if math.isfinite(w)))


def log_width(point: float, end: float) -> float:
    """|ln(point / end)|; NaN when either is not a positive number."""
    if not (math.isfinite(point) and math.isfinite(end) and point > 0 and end > 0):
        return NAN
    return abs(math.log(point / end))


def model_error_width(errors: Iterable[float]) -> float:
    """The model's own error as a log half-width: the largest |ln(1 + e)| over the held-out errors (and
    past predictions' errors) given; NaN without any."""
    ws = [abs(math.log1p(e)) for e in errors if math.isfinite(e) and e > -1]
    return max(ws) if ws else NAN

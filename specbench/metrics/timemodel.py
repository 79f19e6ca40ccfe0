"""The time model's terms from a real run's decomposition, and the prediction interval's combination
(docs/metrics.md, "Speedup surface": "Time model", "Prediction from the model").

A decomposition.csv row gives, for one drafter cell, r (the step-cost ratio), AL, and each side's prefill share
(sum TTFT / sum e2e). With the baseline's request time T_base = prefill_b + (O - 1) step_b and the drafter's
T_s = prefill_s + (O - 1) / AL x step_s, those shares fix the model's terms in units of T_base:

    q = (O - 1) step_s / T_base = r (1 - pi_b),      p = prefill_s / T_base = pi_s / (1 - pi_s) x q / AL,

so 1 / (p + q / AL) = AL / r x (1 - pi_s) / (1 - pi_b): the cell's speedup, where the model is exact (its
residual is then (1 - pi_s) / (1 - pi_b): the prefill share, no tail and no queueing).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from specbench.metrics.surface import NAN, TimeModel


def model_from_terms(r: float, al: float, prefill_share: float, baseline_prefill_share: float) -> TimeModel:
    """The time model of one decomposed cell (see the module's formulas); NaN terms when one is undefined."""
    vals = (r, al, prefill_share, baseline_prefill_share)
    if not all(math.isfinite(x) for x in vals) or al <= 0 or not 0 <= prefill_share < 1:
        return TimeModel(NAN, NAN)
    q = r * (1.0 - baseline_prefill_share)
    return TimeModel(prefill_share / (1.0 - prefill_share) * q / al, q)


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

"""The runner's adaptive-repeats stopping rule over a cell's window throughputs."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import stats
from .common import MIN_REPEATS_FOR_INTERVAL


def adaptive_done(
    window_throughputs: Sequence[float],
    target_rel_half_width: float,
    *,
    confidence: float = 0.95,
) -> bool:
    """True when the t interval of the mean window throughput is narrow enough:
    (ci_high - ci_low) / 2 / mean <= target. Needs MIN_REPEATS_FOR_INTERVAL finite windows."""
    xs = [x for x in window_throughputs if x is not None and math.isfinite(x)]
    if len(xs) < MIN_REPEATS_FOR_INTERVAL:
        return False
    lo, hi = stats.mean_ci(xs, confidence).bounds
    m = float(np.mean(xs))
    if lo is None or hi is None or m <= 0:
        return False
    return (hi - lo) / 2 / m <= target_rel_half_width

"""The runner's adaptive-repeats stopping rule over a cell's window throughputs."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specbench.decide import stats

# No stop before 7 windows: stopping at the first narrow interval stops where s is small by chance, and
# the interval of the windows kept then covers less than 95% (0.92-0.93 with 3-5 windows at a 3-5% CV,
# target 3%, cap 10; an upper confidence bound of s in the test does no better). From 7 windows s is
# steady enough: coverage >= 0.93 (benchmarks/interval_coverage.py, the adaptive row).
ADAPTIVE_MIN_REPEATS = 7


def adaptive_done(
    window_throughputs: Sequence[float],
    target_rel_half_width: float,
    *,
    confidence: float = 0.95,
) -> bool:
    """True when the t interval of the mean window throughput is narrow enough:
    (ci_high - ci_low) / 2 / mean <= target. Needs ADAPTIVE_MIN_REPEATS finite windows."""
    xs = [x for x in window_throughputs if x is not None and math.isfinite(x)]
    if len(xs) < ADAPTIVE_MIN_REPEATS:
        return False
    lo, hi = stats.mean_ci(xs, confidence).bounds
    m = float(np.mean(xs))
    if lo is None or hi is None or m <= 0:
        return False
    return (hi - lo) / 2 / m <= target_rel_half_width

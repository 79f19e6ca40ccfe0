"""Is a speedup's change from one run to another established? Pure functions (docs/metrics.md, "Comparing
runs"): the change test of one cell and Holm's step-down correction over a family of cells.

A run's speedup interval is `exp(ln s +- t_df(0.975) se)`, so its standard error on the log scale is
`se = ln(high / low) / (2 t_df(0.975))`. Between run A and run B, `D = ln s_B - ln s_A` has
`se_D = sqrt(se_A^2 + se_B^2)`, and `T = D / se_D` is referred to Student's t with the Welch-Satterthwaite
df `(se_A^2 + se_B^2)^2 / (se_A^4 / df_A + se_B^4 / df_B)`; when both intervals take their launch variance
from a variance history (one estimate, likely the same one on one machine), the pair adds no df: df =
min(df_A, df_B).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import scipy.stats

from specbench.decide.decision import t_quantile

GATE_ALPHA = 0.05  # family-wise, per direction: P(any cell called regressed | no cell changed) <= 5%


@dataclass(frozen=True)
class Side:
    """One run's speedup at a cell: the estimate, its 95% interval and the interval's df."""

    value: float
    low: float
    high: float
    df: float
    history: bool = False  # the interval's launch variance comes from a variance history


@dataclass(frozen=True)
class ChangeTest:
    log_change: float  # ln(s_B / s_A)
    se: float  # its standard error
    df: float
    p_drop: float  # one-sided p of H0: s_B >= s_A
    p_gain: float  # one-sided p of H0: s_B <= s_A


def log_se(side: Side) -> float:
    """The standard error of ln s read off its 95% interval; NaN when there is no usable interval."""
    if not (side.low > 0 and side.high > side.low and side.df > 0):
        return math.nan
    return math.log(side.high / side.low) / (2 * t_quantile(side.df))


def change_test(a: Side, b: Side) -> ChangeTest | None:
    """The t test of ln s_B - ln s_A against its combined standard error; None without both intervals."""
    se_a, se_b = log_se(a), log_se(b)
    if not (a.value > 0 and b.value > 0 and math.isfinite(se_a) and math.isfinite(se_b)):
        return None
    var = se_a ** 2 + se_b ** 2
    d = math.log(b.value / a.value)
    if a.history and b.history:
        df = min(a.df, b.df)
    else:
        df = var ** 2 / (se_a ** 4 / a.df + se_b ** 4 / b.df)
    t = d / math.sqrt(var)
    return ChangeTest(d, math.sqrt(var), df, float(scipy.stats.t.cdf(t, df)), float(scipy.stats.t.sf(t, df)))


def holm(p: Sequence[float], alpha: float = GATE_ALPHA) -> list[bool]:
    """Holm's step-down rejections: sort the m p-values, reject the k-th smallest (k = 0..) while
    p <= alpha / (m - k). The family-wise error is at most alpha whatever the dependence between cells
    (cells of one launch share its launch effect)."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    rejected = [False] * len(p)
    for k, i in enumerate(order):
        if not p[i] <= alpha / (len(p) - k):
            break
        rejected[i] = True
    return rejected

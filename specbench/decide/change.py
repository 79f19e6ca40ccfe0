"""Is a speedup's change from one run to another established? Pure functions (docs/metrics.md, "Comparing
runs"): the change test of one cell and Holm's step-down correction over a family of cells.

A run's speedup interval is `exp(ln s +- t_df(0.975) se)`, so its standard error on the log scale is
`se = ln(high / low) / (2 t_df(0.975))`. Between run A and run B, `D = ln s_B - ln s_A` has
`se_D = sqrt(se_A^2 + se_B^2)`, and `T = D / se_D` is referred to Student's t with the Welch-Satterthwaite
df `(se_A^2 + se_B^2)^2 / (se_A^4 / df_A + se_B^4 / df_B)`; when both intervals take their launch variance
from a variance history (one estimate, likely the same one on one machine), the pair adds no df: df =
min(df_A, df_B).

The gate tests the change against the threshold t, not against 0 (issue 41): a cell regressed when its drop
is established beyond t, i.e. the one-sided test of H0: ln(s_B / s_A) >= ln(1 - t) rejects (`beyond`); and it
says "no regression" only where it could have seen one: its power against a true drop of one threshold
beyond that line, s_B / s_A = (1 - t)^2 (`required_drop`: 9.75% at t = 5%; at a drop of exactly t the
test's null holds, so no test has power there), at the level the cell is tested at (alpha / m, the first
step of Holm over m cells, which lower-bounds Holm's power in every cell) is at least POWER. The drop it
could have detected (`detectable_drop`) is `1 - (1 - t) exp(-(t_df(1 - alpha / m) + t_df(POWER)) se_D)` (the
shifted-t approximation of the power of a one-sided t test).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import scipy.stats

from specbench.decide.decision import Components, Design, log_ratio_variance, t_quantile

GATE_ALPHA = 0.05  # family-wise, per direction: P(any cell called regressed | no cell changed) <= 5%
POWER = 0.80  # "no regression" needs at least this power against required_drop in every compared cell
PLAN_ASSURANCE = 0.90  # gate_launches: the share of pairs of such runs whose estimated power passes


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


def beyond(test: ChangeTest, threshold: float) -> tuple[float, float]:
    """One-sided p-values of the change against the threshold: (H0: s_B / s_A >= 1 - threshold, a drop
    beyond it; H0: s_B / s_A <= 1 + threshold, a gain beyond it)."""
    t_drop = (test.log_change - math.log(1 - threshold)) / test.se
    t_gain = (test.log_change - math.log(1 + threshold)) / test.se
    return float(scipy.stats.t.cdf(t_drop, test.df)), float(scipy.stats.t.sf(t_gain, test.df))


def required_drop(threshold: float) -> float:
    """The true drop the gate must see with POWER before it says "no regression": one threshold beyond the
    threshold's line, 1 - (1 - threshold)^2."""
    return 1 - (1 - threshold) ** 2


def detectable_drop(se: float, df: float, threshold: float, alpha: float, power: float = POWER) -> float:
    """The smallest true drop 1 - s_B / s_A that the one-sided test against ln(1 - threshold) at level
    `alpha` detects with probability `power`, for a log change of standard error `se` on `df` (module
    docstring); NaN without a standard error."""
    if not (se > 0 and df > 0):
        return math.nan
    return 1 - (1 - threshold) * math.exp(-(t_quantile(df, alpha) + t_quantile(df, 1 - power)) * se)


def gate_launches(comps: Components, repeats: int, threshold: float, cells: int,
                  max_launches: int = 30) -> int | None:
    """The fewest launches per variant (each of `repeats` repeats, in both runs) with which the gate has POWER
    against required_drop in each of `cells` compared cells (tested at GATE_ALPHA / cells): the design under
    which `specbench compare` can say "no regression" (exit 0). The log change's variance is twice one run's
    var(ln speedup) (decision.log_ratio_variance); its df, 2 x 2(n - 1) (each run's own launch means). The
    gate checks the power on the standard errors the runs estimate, not on the true one: the design is sized
    so that the estimate passes in PLAN_ASSURANCE of pairs, the true se scaled by sqrt(df / chi2_df(1 -
    PLAN_ASSURANCE)) (the estimate's upper quantile). None when no design within max_launches has it."""
    need = required_drop(threshold)
    for n in range(2, max_launches + 1):
        d, df = Design(n, repeats), 4.0 * (n - 1)
        se = math.sqrt(2 * log_ratio_variance(comps, d, d) * df / scipy.stats.chi2.ppf(1 - PLAN_ASSURANCE, df))
        if detectable_drop(se, df, threshold, GATE_ALPHA / max(1, cells)) <= need:
            return n
    return None

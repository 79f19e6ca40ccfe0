"""The secondary claims: a drafter's per-point outcomes (category x length x concurrency), Holm-controlled
within the drafter (docs/metrics.md, "Secondary claims"). Pure functions, numbers in and numbers out.

A drafter's secondary family is every point of it that has an interval. Each outcome is one hypothesis per
point, tested by its one-sided p-value read from the point's own 95% interval and df (the ones cells.csv
holds; the interval is t-based and log-symmetric, so its centre and standard error are known):

    adopt   H0: speedup <= m      p = P(T_df >= (c - ln m) / se)
    slower  H0: speedup >= 1      p = P(T_df >= -c / se)
    same    H0: speedup outside [1/m, m]   p = max of the two TOST sides' p-values

with c the log centre and se = half-width / t_df(0.975). Holm's step-down (Holm 1979) runs over the
family's points for each outcome at ALPHA = 2.5%, so the chance that any of a drafter's points is wrongly
called adopt (or slower, or same) is at most 2.5%, however the points depend on each other. A family of one
point gives exactly `decision.classify` of its interval.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import pandas as pd
import scipy.special

from specbench.decide.decision import ALPHA, Outcome, t_quantile
from specbench.decide.family import FamilyLevel
from specbench.decide.primary import family_outcome

Interval = tuple[float, float, float]  # (low, high, df) of a 95% speedup interval; df NaN: the normal's


def _upper_tail(stat: float, df: float) -> float:
    """P(T_df >= stat); df not finite (inf, or NaN for a cell written without its df): the normal's."""
    return float(scipy.special.stdtr(df, -stat) if math.isfinite(df) else scipy.special.ndtr(-stat))


def one_sided_p(interval: Interval, min_speedup: float) -> tuple[float, float, float] | None:
    """(p adopt, p same, p slower) of one point from its 95% interval; None without a usable interval."""
    low, high, df = interval
    if not (math.isfinite(low) and math.isfinite(high) and low > 0 and high >= low):
        return None
    dfq = df if math.isfinite(df) and df > 0 else math.inf
    c = (math.log(low) + math.log(high)) / 2
    se = (math.log(high) - math.log(low)) / 2 / t_quantile(dfq)
    lm = math.log(min_speedup)
    if se <= 0:  # a zero-width interval: its centre decides every test outright
        return (0.0 if c > lm else 1.0, 0.0 if -lm < c < lm else 1.0, 0.0 if c < 0 else 1.0)
    p_same = max(_upper_tail((c + lm) / se, dfq), _upper_tail((lm - c) / se, dfq))
    return _upper_tail((c - lm) / se, dfq), p_same, _upper_tail(-c / se, dfq)


def holm(pvalues: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down at family-wise level alpha: sorted ascending, the j-th smallest (from 0) is rejected
    while p <= alpha / (k - j), stopping at the first that is not. NaN: not a hypothesis of the family."""
    ranked = sorted((p, i) for i, p in enumerate(pvalues) if math.isfinite(p))
    out = [False] * len(pvalues)
    for j, (p, i) in enumerate(ranked):
        if p > alpha / (len(ranked) - j):
            break
        out[i] = True
    return out


def secondary_outcomes(intervals: Sequence[Interval], min_speedup: float, alpha: float = ALPHA) -> list[Outcome]:
    """The outcome of every point of one drafter's secondary family, Holm-adjusted per outcome at `alpha`;
    in `decision.classify`'s order (same, then slower, then adopt). A point without an interval: undecided."""
    ps = [one_sided_p(iv, min_speedup) for iv in intervals]
    cols = [[math.nan if p is None else p[k] for p in ps] for k in range(3)]
    adopt, same, slower = (holm(col, alpha) for col in cols)
    return [Outcome.NO_DIFFERENCE if s else Outcome.SLOWER if w else Outcome.ADOPT if a else Outcome.UNDECIDED
            for a, s, w in zip(adopt, same, slower)]


def secondary_family(mine: pd.DataFrame, min_speedup: float, alpha: float = ALPHA,
                     level: FamilyLevel | None = None) -> dict[Hashable, Outcome]:
    """One drafter's valid cells (as cells.csv has them) -> the outcome of each cell with an interval, by the
    frame's index: its secondary family, decided at the family's simultaneous `level` (max-t from how its
    points co-vary, decide.family) when it has one, else by Holm. df from `speedup_ci_df` (a cells.csv
    written before that column: the normal's quantile)."""
    has = mine[mine["speedup_ci_low"].notna() & mine["speedup_ci_high"].notna()]
    dfs = has["speedup_ci_df"] if "speedup_ci_df" in has else pd.Series(math.nan, index=has.index)
    ivs = [(float(lo), float(hi), float(df)) for lo, hi, df in zip(has["speedup_ci_low"], has["speedup_ci_high"], dfs)]
    if level is not None and math.isfinite(level.one):
        outs = [family_outcome(lo, hi, df if df > 0 else 1e6, level, min_speedup) for lo, hi, df in ivs]
    else:
        outs = secondary_outcomes(ivs, min_speedup, alpha)
    return dict(zip(has.index, outs))

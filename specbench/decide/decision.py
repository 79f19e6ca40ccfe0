"""From a speedup interval to a decision, and what it costs to reach one (docs/metrics.md, "Verdict").

Pure functions, numbers in and numbers out. One interval serves every outcome: the two-sided
1 - 2*alpha interval of the speedup (alpha = 0.025 per side: the report's 95% interval). Each outcome is
then a one-sided test at level alpha:

    adopt                    low > m          H0: speedup <= m rejected
    no practical difference  1/m <= low and high <= m   TOST (two one-sided tests, each at alpha),
                                              which is exactly "the 1 - 2*alpha interval lies in [1/m, m]"
    slower                   high < 1         H0: speedup >= 1 rejected
    undecided                anything else

so each decision's error rate is at most alpha = 2.5%, the same for all three. m = verdict.min_speedup.
An interval inside [1/m, m] that also lies below 1 says "no practical difference": the drafter is
measurably but not practically slower, and the action (don't bother) is the same.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

import scipy.special
import scipy.stats

ALPHA = 0.025  # per side: the 95% two-sided interval


class Outcome(Enum):
    ADOPT = "adopt"
    NO_DIFFERENCE = "no practical difference"
    SLOWER = "slower"
    UNDECIDED = "undecided"


# The word for a table cell (one per outcome), and the order in which outcomes are listed.
WORD: dict[Outcome, str] = {Outcome.ADOPT: "adopt", Outcome.NO_DIFFERENCE: "same", Outcome.SLOWER: "slower",
                            Outcome.UNDECIDED: "undecided"}
RANK: dict[Outcome, int] = {Outcome.ADOPT: 0, Outcome.NO_DIFFERENCE: 1, Outcome.SLOWER: 2, Outcome.UNDECIDED: 3}
MIXED = "mixed"  # a table cell whose points (categories, output lengths) decided differently


def classify(low: float, high: float, min_speedup: float) -> Outcome:
    """The outcome of one speedup interval [low, high] with m = min_speedup (>= 1). No interval
    (NaN bound) decides nothing: undecided."""
    if not (math.isfinite(low) and math.isfinite(high)) or low <= 0:
        return Outcome.UNDECIDED
    if 1.0 / min_speedup <= low and high <= min_speedup:
        return Outcome.NO_DIFFERENCE
    if high < 1.0:
        return Outcome.SLOWER
    if low > min_speedup:
        return Outcome.ADOPT
    return Outcome.UNDECIDED


def summary_word(outcomes: Iterable[Outcome]) -> str:
    """One word for several points: their common outcome's word, "mixed" when decided ones differ, and
    "undecided" when any is undecided (nothing to report as a decision yet)."""
    seen = set(outcomes)
    if not seen or Outcome.UNDECIDED in seen:
        return WORD[Outcome.UNDECIDED]
    return WORD[seen.pop()] if len(seen) == 1 else MIXED


# ---------------------------------------------------------------------------------------------------
# How many units would decide an undecided point


def t_quantile(df: float, alpha: float = ALPHA) -> float:
    """The upper-alpha quantile of Student's t on df (the normal's for infinite df). scipy.special.stdtrit
    is scipy.stats.t.ppf without its argument checks (the same values, some 300 times faster: the
    sequential rule and its simulation ask for it at every point of every look)."""
    return float(scipy.special.stdtrit(df, 1 - alpha)) if math.isfinite(df) else float(scipy.stats.norm.ppf(1 - alpha))


def decisive_half_width(log_speedup: float, min_speedup: float) -> float:
    """The largest half-width (log scale) of an interval centred on log_speedup that decides it:
    max(d - ln m (adopt), -d (slower), ln m - |d| (no difference)); <= 0: no interval decides it."""
    lm = math.log(min_speedup)
    d = log_speedup
    return max(d - lm, -d, lm - abs(d))


@dataclass(frozen=True)
class MoreUnits:
    """How many independent units per variant (launches, or repeats when those are the units) would
    decide a point if its estimate and variance held; None: more than `cap` (or no interval decides it)."""

    units: int | None
    have: int


@dataclass(frozen=True)
class MeasuredInterval:
    """A speedup interval as measured: its bounds, its df and the units per variant it came from."""

    low: float
    high: float
    df: float
    n_units: int


ADVICE_POWER = 0.8  # the report's "N launches would decide": the chance the added units decide, stated


def units_to_decide(measured: MeasuredInterval, min_speedup: float, cap: int = 50,
                    alpha: float = ALPHA, power: float = 0.5) -> MoreUnits:
    """From a measured interval (n_units units per variant, df, drawn at one-sided `alpha`): its standard
    error on the log scale is ln(high/low) / (2 t_df(1 - alpha)); with n' units per variant it becomes
    se * sqrt(n/n') and df grows by 2 per unit added (one per side), as Welch's df do with equal
    variances. The centre is the interval's (log) midpoint. The smallest n' with
    (t_df'(1 - alpha) + t_df'(power)) se' < the decisive half-width: if the estimate and variance held, an
    interval with n' units decides with probability about `power` (0.5: the centred interval itself
    decides, a coin toss; the report states 80%, ADVICE_POWER)."""
    low, high, df, n_units = measured.low, measured.high, measured.df, measured.n_units
    if not (low > 0 and high > 0 and df > 0 and n_units >= 1):
        return MoreUnits(None, n_units)
    se = math.log(high / low) / (2 * t_quantile(df, alpha))
    need = decisive_half_width((math.log(low) + math.log(high)) / 2, min_speedup)
    if need <= 0:
        return MoreUnits(None, n_units)
    for n in range(n_units, cap + 1):
        dfn = df + 2 * (n - n_units)
        if (t_quantile(dfn, alpha) + t_quantile(dfn, 1 - power)) * se * math.sqrt(n_units / n) < need:
            return MoreUnits(n, n_units)
    return MoreUnits(None, n_units)


# ---------------------------------------------------------------------------------------------------
# Variance components: pooling, its consistency check, the interval they give, the cost-optimal design


@dataclass(frozen=True)
class Estimate:
    """A relative variance (CV^2) with its degrees of freedom."""

    var: float
    df: float


def pool(estimates: Sequence[Estimate]) -> Estimate | None:
    """Pooled variance sum(df_i s_i^2) / sum(df_i), with df sum(df_i); None without any df."""
    good = [e for e in estimates if e.df > 0 and math.isfinite(e.var) and e.var >= 0]
    df = sum(e.df for e in good)
    if not df > 0:
        return None
    return Estimate(sum(e.df * e.var for e in good) / df, df)


@dataclass(frozen=True)
class Consistency:
    ok: bool
    p: float  # two-sided p-value of the F test (NaN: not testable, then ok)


def consistent(new: Estimate, history: Estimate | None, alpha: float = 0.01) -> Consistency:
    """Two-sided F test of H0: the new estimate and the history estimate one variance.
    F = s_new^2 / s_hist^2 on (df_new, df_hist); p = 2 min(P(F' <= F), P(F' >= F)). A zero variance on
    either side (a Kalibera-Jones launch estimate truncated at 0) is not testable: it is pooled as it is."""
    if history is None or not (new.df > 0 and history.df > 0 and new.var > 0 and history.var > 0):
        return Consistency(True, math.nan)
    f = new.var / history.var
    cdf = float(scipy.stats.f.cdf(f, new.df, history.df))
    p = min(1.0, 2 * min(cdf, 1 - cdf))
    return Consistency(p >= alpha, p)


@dataclass(frozen=True)
class Components:
    """Relative variance components of a window's throughput: between launches and between repeats."""

    launch: Estimate
    repeat: Estimate


@dataclass(frozen=True)
class Design:
    launches: int  # per variant
    repeats: int  # windows per cell in each launch


def log_ratio_variance(comps: Components, variant: Design, baseline: Design) -> float:
    """var(ln speedup) for independent launches of the two variants: per variant
    sigma_L^2 / n + sigma_R^2 / (n r) (Kalibera & Jones 2013, two levels)."""
    return sum(comps.launch.var / d.launches + comps.repeat.var / (d.launches * d.repeats)
               for d in (variant, baseline))


def _satterthwaite(terms: Sequence[tuple[float, float]]) -> float:
    total = sum(v for v, _ in terms)
    denom = sum(v * v / d for v, d in terms if v > 0 and d > 0)
    return math.inf if denom == 0 else total * total / denom


def component_interval(speedup: float, comps: Components, variant: Design, baseline: Design,
                       alpha: float = ALPHA) -> tuple[float, float, float]:
    """(low, high, df) of the speedup from known components (a run too small to estimate its own
    variance): exp(ln s +- t_df sqrt(var)), df by Welch-Satterthwaite over the components' df."""
    if not speedup > 0:
        return math.nan, math.nan, math.nan
    terms = [(comps.launch.var / d.launches, comps.launch.df) for d in (variant, baseline)]
    terms += [(comps.repeat.var / (d.launches * d.repeats), comps.repeat.df) for d in (variant, baseline)]
    # the same estimate appears once per variant: merge its terms before counting df
    merged = [(terms[0][0] + terms[1][0], comps.launch.df), (terms[2][0] + terms[3][0], comps.repeat.df)]
    var = sum(v for v, _ in merged)
    if not var > 0:
        return math.nan, math.nan, math.nan
    df = _satterthwaite(merged)
    half = t_quantile(df, alpha) * math.sqrt(var)
    return speedup * math.exp(-half), speedup * math.exp(half), df


def optimal_repeats(launch_cost: float, repeat_cost: float, comps: Components, cap: int = 20) -> int:
    """Kalibera & Jones' cost-optimal repeats per launch: r* = sqrt((c_L / c_R) (sigma_R^2 / sigma_L^2)),
    rounded to the better neighbour, in [1, cap]. c_L: a launch's own cost (its startup), c_R: one
    repeat of the sweep."""
    if comps.launch.var <= 0:
        return cap
    if comps.repeat.var <= 0 or repeat_cost <= 0:
        return 1
    r = math.sqrt(launch_cost / repeat_cost * comps.repeat.var / comps.launch.var)
    return max(1, min(cap, round(r)))


def target_half_width(min_speedup: float) -> float:
    """ln(m) / 2: with a half-width at most this, an estimate decides unless it lies within a factor
    exp(h) of m itself (below it, [-h, ln m - h] is "no practical difference"; further down, slower)."""
    return math.log(min_speedup) / 2


@dataclass(frozen=True)
class Plan:
    design: Design
    cost: float  # per variant, in the unit of the costs given
    half_width: float  # expected half-width of ln speedup


def optimal_design(comps: Components, launch_cost: float, repeat_cost: float, min_speedup: float,
                   max_launches: int = 30, prior_df: float = 0.0) -> Plan | None:
    """The cheapest launches x repeats (per variant, the same for the baseline) whose expected
    half-width is at most target_half_width(m); None when no design within max_launches reaches it.
    Repeats are searched around Kalibera & Jones' r*; t uses the df the design itself would have:
    2(n - 1) of its own launch means, plus `prior_df` when a variance history is pooled into them
    (stats.pooled_ratio_ci, interval_unit launch+history)."""
    target = target_half_width(min_speedup)
    r_star = optimal_repeats(launch_cost, repeat_cost, comps)
    best: Plan | None = None
    for r in sorted({1, max(1, r_star - 1), r_star, r_star + 1}):
        for n in range(2, max_launches + 1):
            d = Design(n, r)
            var = log_ratio_variance(comps, d, d)
            df = prior_df + 2 * (n - 1)  # the run's own launch means (Welch, equal variances), and the history's
            half = t_quantile(df) * math.sqrt(var)
            if half <= target:
                cost = n * (launch_cost + r * repeat_cost)
                if best is None or cost < best.cost:
                    best = Plan(d, cost, half)
                break
    return best


# ---------------------------------------------------------------------------------------------------
# Sequential measurement: an always-valid rule


def look_alpha(max_looks: int, alpha: float = ALPHA) -> float:
    """Per-look, per-side alpha of a Bonferroni alpha spending over `max_looks` looks: alpha / K.
    By the union bound, the probability that any of the K looks' intervals misses (on a given side) is
    at most alpha, however the looks depend on each other, so stopping at the first decisive look keeps
    every outcome's error rate at most alpha."""
    return alpha / max(1, max_looks)


def widen(low: float, high: float, df: float, alpha: float) -> tuple[float, float]:
    """A log-symmetric 95% interval [low, high] on df, re-drawn at one-sided level `alpha`: the same centre,
    the half-width scaled by t_df(1 - alpha) / t_df(0.975). NaN in, NaN out."""
    if not (low > 0 and high > 0 and df > 0):
        return math.nan, math.nan
    centre, half = (math.log(low) + math.log(high)) / 2, (math.log(high) - math.log(low)) / 2
    half *= t_quantile(df, alpha) / t_quantile(df, ALPHA)
    return math.exp(centre - half), math.exp(centre + half)


# ---------------------------------------------------------------------------------------------------
# Using a variance history: the checks that refuse it (its components enter an interval as estimated, on
# their df: the interval is the exact small-sample t interval at the Satterthwaite df of the pooled variance)

SPEED_ALPHA = 0.01  # two-sided level of the speed test: an entry this unlike the run is not its setup


def shift_variance(launch: Estimate, repeat: Estimate | None, run: Design, history: Design) -> Estimate:
    """Variance (with Welch-Satterthwaite df) of ln(mean speed of the run / mean speed of the history) at
    one point when both measured one setup: s_L^2 (1/n + 1/n_h) + s_R^2 (1/(n r) + 1/(n_h r_h))."""
    terms = [(launch.var * (1 / run.launches + 1 / history.launches), launch.df)]
    if repeat is not None and repeat.df > 0 and math.isfinite(repeat.var):
        terms.append((repeat.var * (1 / (run.launches * run.repeats) + 1 / (history.launches * history.repeats)),
                      repeat.df))
    total = sum(v for v, _ in terms)
    denom = sum(v * v / d for v, d in terms if v > 0 and math.isfinite(d))
    return Estimate(total, math.inf if denom == 0 else total * total / denom)


def speed_consistent(log_ratio: float, shift: Estimate, alpha: float = SPEED_ALPHA) -> Consistency:
    """Two-sided t test of H0: a run and a history entry measured one setup, from the log ratio of their
    baseline speeds (averaged over the points both measured) and its variance under H0 (`shift_variance`,
    from the entry's own components on their df): T = log_ratio / sqrt(var) on its df; refused at p < alpha."""
    if not (shift.var > 0 and math.isfinite(log_ratio)):
        return Consistency(True, math.nan)
    t = abs(log_ratio) / math.sqrt(shift.var)
    dist = scipy.stats.norm if not math.isfinite(shift.df) else scipy.stats.t(shift.df)
    p = float(2 * dist.sf(t))
    return Consistency(p >= alpha, p)

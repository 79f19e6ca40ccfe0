"""The primary verdict: the speedup over the workload's mix, its interval, and the family of claims it
decides (docs/metrics.md, "Primary verdict"). Pure functions, numbers in and numbers out.

The mix speedup of a drafter at one concurrency is the geometric mean, with equal weights, of its speedups
at the points of that concurrency (categories x input and output lengths): S = exp(mean_p ln s_p). Its
interval follows the two-level model (Kalibera & Jones 2013): a launch's effect is shared by every point
of the launch, so the per-point log speedups of one launch are correlated through it and it does not
average out over the points; the windows (repeats) inside a launch are independent across points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specbench.decide import stats
from specbench.decide.decision import ALPHA, Outcome, classify, widen
from specbench.decide.intervals import LaunchVariance

Windows = Mapping[tuple[int, int], float]  # (launch, repeat) -> a window's throughput


@dataclass(frozen=True)
class MixInterval:
    """The mix speedup over `points` points and its 95% interval (NaN: none) with its df."""

    speedup: float
    low: float
    high: float
    df: float
    points: int


def _launch_units(by_point: Sequence[Windows]) -> list[float] | None:
    """Per launch measured at every point: y_l = mean_p ln(mean of launch l's windows at p); None with
    fewer than 2 such launches."""
    common = set.intersection(*({la for la, _ in w} for w in by_point))
    if len(common) < 2:
        return None
    units = []
    for la in sorted(common):
        logs = []
        for w in by_point:
            vals = [v for (lx, _), v in w.items() if lx == la and math.isfinite(v)]
            m = math.fsum(vals) / len(vals) if vals else math.nan
            if not m > 0:
                return None
            logs.append(math.log(m))
        units.append(math.fsum(logs) / len(logs))
    return units


@dataclass(frozen=True)
class _Side:
    components: list[stats.Component]  # the side's own (measured) components of var(ln S)
    single: bool  # one launch: the history's launch component is added (shared by every point)
    repeat_points: int  # points measured once: the history's repeat component stands in for theirs


def _side(by_point: Sequence[Windows]) -> _Side | None:
    """One side's (the drafter's or the baseline's) part of var(ln S) over P points: with 2+ launches at
    every point, s_y^2 / n over the launch units y_l on n - 1 df (the launch effect is in their spread); with
    one, sum_p s_p^2 / (n_p m_p^2) / P^2 over each point's windows, each on n_p - 1 df."""
    p = len(by_point)
    units = _launch_units(by_point)
    if units is not None:
        n = len(units)
        mean = math.fsum(units) / n
        var = math.fsum((u - mean) ** 2 for u in units) / (n - 1)
        return _Side([(var / n, float(n - 1))], single=False, repeat_points=0)
    comps, once = [], 0
    for w in by_point:
        vals = [v for v in w.values() if math.isfinite(v)]
        if not vals:
            return None
        if len(vals) == 1:
            once += 1
            continue
        m = math.fsum(vals) / len(vals)
        if not m > 0:
            return None
        var = math.fsum((v - m) ** 2 for v in vals) / (len(vals) - 1)
        comps.append((var / (len(vals) * m * m) / (p * p), float(len(vals) - 1)))
    return _Side(comps, single=True, repeat_points=once)


def mix_interval(points: Sequence[tuple[float, Windows, Windows]], calibration: LaunchVariance | None,
                 confidence: float = 0.95) -> MixInterval:
    """The mix speedup and its interval from (speedup, drafter windows, baseline windows) per point.

    var(ln S) = the drafter's side + the baseline's side (independent launches), each as `_side`; a side
    launched once adds the history's launch component s_L^2 once (not / P: every point shares it), a point
    measured once its repeat component s_R^2 / P^2; when both sides ran once the one estimate is counted
    once (2 s_L^2 on its df, as `intervals.launch_components` does). Bounds exp(ln S +- t_df sqrt(var)),
    df by Welch-Satterthwaite (`stats.log_components_ci`). No interval (NaN) without a variance for some
    side or point (one window and no history)."""
    p = len(points)
    nan = MixInterval(math.nan, math.nan, math.nan, math.nan, p)
    if not p or not all(s > 0 and math.isfinite(s) for s, _, _ in points):
        return nan
    center = math.fsum(math.log(s) for s, _, _ in points) / p
    out = MixInterval(math.exp(center), math.nan, math.nan, math.nan, p)
    sides = [_side([v for _, v, _ in points]), _side([b for _, _, b in points])]
    if any(s is None for s in sides):
        return out
    comps = [c for s in sides if s is not None for c in s.components]
    singles = sum(s.single for s in sides if s is not None)
    once = sum(s.repeat_points for s in sides if s is not None)
    cal = calibration
    if singles and cal is not None and cal.rel_var >= 0:
        comps.append((singles * cal.rel_var, cal.df))
    if once:
        if cal is None or not (cal.repeat_df > 0 and math.isfinite(cal.repeat_rel_var)):
            return out
        comps.append((once * cal.repeat_rel_var / (p * p), cal.repeat_df))
    ci = stats.log_components_ci(center, comps, confidence)
    if ci.low is None or ci.high is None or ci.df is None:
        return out
    return MixInterval(out.speedup, ci.low, ci.high, ci.df, p)


# ---------------------------------------------------------------------------------------------------
# The family: one primary claim per drafter and concurrency


def family_alpha(claims: int, looks: int = 1) -> float:
    """Per-claim, per-side level of a family of `claims` primary claims (each over `looks` sequential looks):
    ALPHA / (claims x looks), Bonferroni. By the union bound the chance that any claim of the family is wrong
    (adopt where the true mix speedup is at most m, slower where it is at least 1, same where it lies outside
    [1/m, m]) is at most ALPHA = 2.5% per outcome, however the claims depend on each other."""
    return ALPHA / max(1, claims * looks)


def primary_outcome(low: float, high: float, df: float, claims: int, min_speedup: float, looks: int = 1) -> Outcome:
    """The outcome of one primary claim: its 95% mix interval re-drawn at the family's level (`widen` at
    family_alpha), then classified as every interval is (decision.classify)."""
    lo, hi = widen(low, high, df, family_alpha(claims, looks))
    return classify(lo, hi, min_speedup)

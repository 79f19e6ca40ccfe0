"""The primary verdict: the speedup over the workload's mix, its interval, and the family of claims it
decides (docs/metrics.md, "Verdict": the primary verdict). Pure functions, numbers in and numbers out.

The mix speedup of a drafter at one concurrency is the workload's time ratio over the points of that
concurrency (categories x input and output lengths): S = sum_p T_p / sum_p (T_p / s_p), T_p the baseline's
time on point p's share of the workload (`workload_weights`), so a slow long-output point weighs as the time
it takes. Its interval follows the two-level model (Kalibera & Jones 2013): a launch's effect is shared by every point
of the launch, so the per-point log speedups of one launch are correlated through it and it does not
average out over the points; the windows (repeats) inside a launch are independent across points.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specbench.decide import stats
from specbench.decide.decision import ALPHA, Outcome, classify
from specbench.decide.family import FamilyLevel, bonferroni
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


def _launch_units(by_point: Sequence[Windows], a: Sequence[float]) -> list[float] | None:
    """Per launch measured at every point: y_l = sum_p a_p ln(mean of launch l's windows at p) (a: the
    points' weights in ln S, summing to 1); None with fewer than 2 such launches."""
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
        units.append(math.fsum(ap * lg for ap, lg in zip(a, logs)))
    return units


@dataclass(frozen=True)
class _Side:
    components: list[stats.Component]  # the side's own (measured) components of var(ln S)
    single: bool  # one launch: the history's launch component is added (shared by every point)
    repeat_points: float  # sum of a_p^2 over the points measured once: the history's repeat component
    # stands in for theirs


def _side(by_point: Sequence[Windows], a: Sequence[float]) -> _Side | None:
    """One side's (the drafter's or the baseline's) part of var(ln S) over P points weighing a_p: with 2+
    launches at every point, s_y^2 / n over the launch units y_l on n - 1 df (the launch effect is in their
    spread); with one, sum_p a_p^2 s_p^2 / (n_p m_p^2) over each point's windows, each on n_p - 1 df."""
    units = _launch_units(by_point, a)
    if units is not None:
        n = len(units)
        mean = math.fsum(units) / n
        var = math.fsum((u - mean) ** 2 for u in units) / (n - 1)
        return _Side([(var / n, float(n - 1))], single=False, repeat_points=0)
    comps, once = [], 0.0
    for w, ap in zip(by_point, a):
        vals = [v for v in w.values() if math.isfinite(v)]
        if not vals:
            return None
        if len(vals) == 1:
            once += ap * ap
            continue
        m = math.fsum(vals) / len(vals)
        if not m > 0:
            return None
        var = math.fsum((v - m) ** 2 for v in vals) / (len(vals) - 1)
        comps.append((var / (len(vals) * m * m) * ap * ap, float(len(vals) - 1)))
    return _Side(comps, single=True, repeat_points=once)


def workload_weights(tokens: Sequence[float], base_throughput: Sequence[float]) -> list[float] | None:
    """The workload's weight of each point: the baseline's time on it, T_p = tokens_p / throughput_p (the
    point's output tokens per request over the baseline's output throughput there; every point one equal
    share of the workload's requests, as the sweep sends them), normalised to sum 1. None when some T_p is not
    positive and finite (the equal-weight mean is then all that is defined)."""
    t = [n / tp if tp > 0 else math.nan for n, tp in zip(tokens, base_throughput)]
    if not t or not all(math.isfinite(x) and x > 0 for x in t):
        return None
    total = math.fsum(t)
    return [x / total for x in t]


def mix_interval(points: Sequence[tuple[float, Windows, Windows]], calibration: LaunchVariance | None,
                 confidence: float = 0.95, weights: Sequence[float] | None = None,
                 extra: Sequence[stats.Component] = ()) -> MixInterval:
    """The mix speedup and its interval from (speedup, drafter windows, baseline windows) per point.

    The speedup is the workload's time ratio S = 1 / sum_p (u_p / s_p), u_p = `weights` (the baseline's time
    shares, `workload_weights`; None: equal, u_p = 1/P). To first order ln S = sum_p a_p ln s_p with
    a_p = (u_p / s_p) S (sum 1; equal u and s give a_p = 1/P), so var(ln S) = the drafter's side + the
    baseline's side (independent launches), each as `_side` with those a_p; a side launched once adds the
    history's launch component s_L^2 once (sum_p a_p = 1: every point shares it), a point measured once its
    repeat component a_p^2 s_R^2; when both sides ran once the one estimate is counted once (2 s_L^2 on its
    df, as `intervals.launch_components` does). Bounds exp(ln S +- t_df sqrt(var)), df by Welch-Satterthwaite
    (`stats.log_components_ci`). The weights are taken as known (the baseline's time shares are estimated
    far more precisely than the speedups). No interval (NaN) without a variance for some side or point (one
    window and no history). `extra`: further components of var(ln S), the prompt subset's sampling variance
    (decide.sampling.subset_component) at a level measured on a subset."""
    p = len(points)
    nan = MixInterval(math.nan, math.nan, math.nan, math.nan, p)
    if not p or not all(s > 0 and math.isfinite(s) for s, _, _ in points):
        return nan
    u = [1.0 / p] * p if weights is None else list(weights)
    if len(u) != p or not all(w > 0 and math.isfinite(w) for w in u):
        raise ValueError(f"mix weights: {p} positive finite weights wanted, got {u}")
    inv = [w / s for w, (s, _, _) in zip(u, points)]
    speedup = math.fsum(u) / math.fsum(inv)
    a = [x * speedup / math.fsum(u) for x in inv]
    center = math.log(speedup)
    out = MixInterval(speedup, math.nan, math.nan, math.nan, p)
    sides = [_side([v for _, v, _ in points], a), _side([b for _, _, b in points], a)]
    if any(s is None for s in sides):
        return out
    comps = [c for s in sides if s is not None for c in s.components]
    singles = sum(s.single for s in sides if s is not None)
    once = math.fsum(s.repeat_points for s in sides if s is not None)
    cal = calibration
    if singles and cal is not None and cal.rel_var >= 0:
        comps.append((singles * cal.rel_var, cal.df))
    if once:
        if cal is None or not (cal.repeat_df > 0 and math.isfinite(cal.repeat_rel_var)):
            return out
        comps.append((once * cal.repeat_rel_var, cal.repeat_df))
    comps += list(extra)
    ci = stats.log_components_ci(center, comps, confidence)
    if ci.low is None or ci.high is None or ci.df is None:
        return out
    return MixInterval(out.speedup, ci.low, ci.high, ci.df, p)


# ---------------------------------------------------------------------------------------------------
# The family: one primary claim per drafter and concurrency


def family_alpha(claims: int, looks: int = 1) -> float:
    """Per-claim, per-side level of a family of `claims` primary claims (each over `looks` sequential looks)
    under Bonferroni: ALPHA / (claims x looks). By the union bound the chance that any claim of the family is
    wrong is at most ALPHA = 2.5% per outcome, however the claims depend on each other (the fallback of
    `decide.family.family_level`)."""
    return ALPHA / max(1, claims * looks)


def family_outcome(low: float, high: float, df: float, level: FamilyLevel, min_speedup: float) -> Outcome:
    """The outcome of one claim of a family: its 95% interval re-drawn at the family's level, adopt and slower
    from the one-sided critical value, same from the two-sided one (a family's wrong "same" claims may err on
    either side), each outcome then as `decision.classify` decides it."""
    lo2, hi2 = level.bounds(low, high, df, same=True)
    if classify(lo2, hi2, min_speedup) is Outcome.NO_DIFFERENCE:
        return Outcome.NO_DIFFERENCE
    lo, hi = level.bounds(low, high, df)
    got = classify(lo, hi, min_speedup)
    if got is Outcome.NO_DIFFERENCE:  # inside the margin at the one-sided level only: slower or nothing
        return Outcome.SLOWER if hi < 1.0 else Outcome.UNDECIDED
    return got


def primary_outcome(low: float, high: float, df: float, claims: int, min_speedup: float, looks: int = 1) -> Outcome:
    """The outcome of one primary claim under Bonferroni: its 95% mix interval re-drawn at family_alpha."""
    return family_outcome(low, high, df, bonferroni(claims, ALPHA / max(1, looks), "by count"), min_speedup)

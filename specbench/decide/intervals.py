"""Which measurements are independent units for an interval, and the interval of each cell figure.

Launches are the top level of variation (a relaunched engine can run 25% faster or slower; see
docs/metrics.md). When a variant was launched at least twice, each launch is one unit (the mean of its
windows); otherwise each window (repeat) is a unit, and the interval knows nothing about launches: the
verdict then says it is indicative only. A calibrated between-launch variance, when given, is added to
the variance of each estimate with its own degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from specbench.decide import stats

T = TypeVar("T")


@dataclass(frozen=True)
class LaunchVariance:
    """A between-launch variance of log throughput (relative variance, CV^2) with its degrees of freedom."""

    rel_var: float
    df: float
    source: str  # where it comes from: "measured" in this run, or the calibration's path
    repeat_rel_var: float = math.nan  # the history's between-repeat variance (CV^2), when it has one
    repeat_df: float = 0.0


def unit_key(launch: int, repeat: int, n_launches: int) -> Hashable:
    """The unit a window belongs to: its launch when there are several, else the window itself."""
    return launch if n_launches >= 2 else (launch, repeat)


def group_units(items: Sequence[T], key: Callable[[T], Hashable]) -> list[list[T]]:
    """Items grouped by unit, units in order of first appearance (callers only pool them)."""
    groups: dict[Hashable, list[T]] = {}
    for it in items:
        groups.setdefault(key(it), []).append(it)
    return list(groups.values())


def unit_means(windows: Mapping[tuple[int, int], float]) -> list[float]:
    """Per-unit mean of a per-window figure keyed by (launch, repeat), in (launch, repeat) order;
    non-finite windows dropped."""
    n_launches = len({la for la, _ in windows})
    by_unit: dict[Hashable, list[float]] = {}
    for (la, rep), v in sorted(windows.items()):
        if math.isfinite(v):
            by_unit.setdefault(unit_key(la, rep, n_launches), []).append(v)
    return [math.fsum(v) / len(v) for v in by_unit.values()]  # fsum: exact, and fast on a few values


def launch_components(calibration: LaunchVariance | None, n_variants: int = 1) -> list[stats.Component]:
    """The extra variance on the log scale that a calibrated launch effect adds when every variant ran in
    one launch: rel_var for the log of a mean, n_variants * rel_var for a log ratio of `n_variants` single
    launches (the same estimate counted once per launch, hence one component)."""
    if calibration is None or not calibration.rel_var >= 0:
        return []
    return [(n_variants * calibration.rel_var, calibration.df)]


def variance_levels(windows: dict[tuple[int, int], float], requests: Sequence[Sequence[float]]) -> dict[str, float]:
    """Coefficient of variation at each level (Kalibera & Jones 2013, two-level random-effects estimates):

    launch_cv   between launches: sqrt(max(0, S1^2 - S2^2 / n2)) / mean, S1^2 = variance of the launch
                means of the window throughputs, S2^2 = pooled variance of windows inside a launch, n2 =
                mean windows per launch (NaN with fewer than 2 launches);
    repeat_cv   between windows (repeats) inside a launch: sqrt(S2^2) / mean (NaN without 2 windows in
                some launch);
    request_cv  between requests inside a window: pooled within-window variance of the per-user speed
                over its mean (`requests`: per-user speeds grouped by window).
    """
    by_launch: dict[int, list[float]] = {}
    for (la, _), v in sorted(windows.items()):
        if math.isfinite(v):
            by_launch.setdefault(la, []).append(v)
    allv = [v for vs in by_launch.values() for v in vs]
    mean = float(np.mean(allv)) if allv else math.nan
    within = [(float(np.var(vs, ddof=1)), len(vs) - 1) for vs in by_launch.values() if len(vs) >= 2]
    s2 = sum(v * d for v, d in within) / sum(d for _, d in within) if within else math.nan
    out = {"launch_cv": math.nan, "repeat_cv": math.nan, "request_cv": math.nan}
    if mean > 0 and math.isfinite(s2):
        out["repeat_cv"] = math.sqrt(s2) / mean
    if mean > 0 and len(by_launch) >= 2:
        s1 = float(np.var([np.mean(vs) for vs in by_launch.values()], ddof=1))
        n2 = float(np.mean([len(vs) for vs in by_launch.values()]))
        out["launch_cv"] = math.sqrt(max(0.0, s1 - (s2 / n2 if math.isfinite(s2) else 0.0))) / mean
    groups = [[x for x in g if math.isfinite(x)] for g in requests]
    req_within = [(float(np.var(g, ddof=1)), len(g) - 1, float(np.mean(g))) for g in groups if len(g) >= 2]
    if req_within:
        pooled = sum(v * d for v, d, _ in req_within) / sum(d for _, d, _ in req_within)
        m = float(np.mean([x for g in groups for x in g]))
        out["request_cv"] = math.sqrt(pooled) / m if m > 0 else math.nan
    return out

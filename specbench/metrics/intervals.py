"""Which measurements are independent units for an interval, and the interval of each cell figure.

Launches are the top level of variation (a relaunched engine can run 25% faster or slower; see
docs/metrics.md). When a variant was launched at least twice, each launch is one unit (the mean of its
windows); otherwise each window (repeat) is a unit, and the interval knows nothing about launches: the
verdict then says it is indicative only. A calibrated between-launch variance, when given, is added to
the variance of each estimate with its own degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from .. import stats

T = TypeVar("T")


@dataclass(frozen=True)
class LaunchVariance:
    """A between-launch variance of log throughput (relative variance, CV^2) with its degrees of freedom."""

    rel_var: float
    df: float
    source: str  # where it comes from: "measured" in this run, or the calibration's path


def unit_key(launch: int, repeat: int, n_launches: int) -> Hashable:
    """The unit a window belongs to: its launch when there are several, else the window itself."""
    return launch if n_launches >= 2 else (launch, repeat)


def group_units(items: Sequence[T], key: Callable[[T], Hashable]) -> list[list[T]]:
    """Items grouped by unit, in unit order."""
    groups: dict[Hashable, list[T]] = {}
    for it in items:
        groups.setdefault(key(it), []).append(it)
    return [groups[k] for k in sorted(groups, key=repr)]


def unit_means(windows: dict[tuple[int, int], float]) -> list[float]:
    """Per-unit mean of a per-window figure keyed by (launch, repeat); non-finite windows dropped."""
    n_launches = len({la for la, _ in windows})
    by_unit: dict[Hashable, list[float]] = {}
    for (la, rep), v in sorted(windows.items()):
        if math.isfinite(v):
            by_unit.setdefault(unit_key(la, rep, n_launches), []).append(v)
    return [float(np.mean(v)) for _, v in sorted(by_unit.items(), key=lambda kv: repr(kv[0]))]


def launch_components(mean: float, calibration: LaunchVariance | None, n_variants: int = 1,
                      log: bool = False) -> list[stats.Component]:
    """The extra variance a calibrated launch effect adds when every variant ran in one launch.

    For a mean (log=False) the absolute variance mean^2 * rel_var; for a log ratio of `n_variants` single
    launches, n_variants * rel_var (the same estimate counted once per launch, hence one component)."""
    if calibration is None or not calibration.rel_var >= 0:
        return []
    scale = n_variants if log else mean * mean
    return [(scale * calibration.rel_var, calibration.df)]

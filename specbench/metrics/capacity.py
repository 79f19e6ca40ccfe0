"""Capacity under an SLO: the highest offered rate at which it holds, with an interval; the bisection step
that refines it; a drafter's capacity gain. Pure functions (docs/metrics.md, "Capacity").

At each measured rate r_k the SLO's percentile has an estimate p_k and a 95% interval [L_k, U_k]
(metrics.slo.quantile_ci). Scanning rates upwards, the SLO first fails at r_j (p_j > threshold, or the
point is saturated or has no valid measurement). The capacity is the crossing of the threshold by p between
r_{j-1} and r_j, interpolated linearly in rate (r_{j-1} itself when p does not rise towards r_j, e.g. a
failure by saturation). Its interval: the same crossing of U (the low end: where the SLO is still met with
95% confidence) and of L (the high end: beyond it the SLO is missed with 95% confidence).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .common import NAN

BELOW = "below_lowest_rate"  # the SLO fails at every measured rate
BEYOND = "beyond_highest_rate"  # it holds at every measured rate: the capacity is at least the highest
MEASURED = "measured"


@dataclass(frozen=True)
class RatePoint:
    """One measured rate for one SLO: the percentile's estimate and interval, and whether the point counts."""

    rate: float
    estimate: float
    low: float
    high: float
    saturated: bool = False
    valid: bool = True

    def fails(self, value: float, threshold: float) -> bool:
        return self.saturated or not self.valid or not value <= threshold  # NaN fails too


@dataclass(frozen=True)
class Capacity:
    value: float  # req/s; NaN below the lowest rate; the highest rate (a lower bound) beyond it
    low: float
    high: float  # NaN: not bounded by the measured rates
    status: str  # MEASURED | BELOW | BEYOND


def _crossing(points: Sequence[RatePoint], values: Sequence[float], threshold: float) -> tuple[float, str]:
    """(rate where `values` first crosses `threshold`, status), scanning the rates upwards."""
    for j, (p, v) in enumerate(zip(points, values)):
        if p.fails(v, threshold):
            if j == 0:
                return NAN, BELOW
            prev, pv = points[j - 1], values[j - 1]
            if math.isfinite(v) and v > pv and not p.saturated and p.valid:
                return prev.rate + (threshold - pv) / (v - pv) * (p.rate - prev.rate), MEASURED
            return prev.rate, MEASURED
    return points[-1].rate, BEYOND


def capacity(points: Sequence[RatePoint], threshold: float) -> Capacity:
    """The capacity under one SLO from its measured rates (any order); see the module docstring."""
    if not points:
        return Capacity(NAN, NAN, NAN, BELOW)
    ps = sorted(points, key=lambda p: p.rate)
    value, status = _crossing(ps, [p.estimate for p in ps], threshold)
    low, _ = _crossing(ps, [p.high for p in ps], threshold)
    high, high_status = _crossing(ps, [p.low for p in ps], threshold)
    if high_status == BEYOND:
        high = NAN  # nothing measured misses the SLO with confidence: no upper end
    return Capacity(value, low, high, status)


def bracket(points: Sequence[RatePoint], threshold: float) -> tuple[float, float] | None:
    """(highest rate meeting the SLO below the first failure, that first failing rate), or None when the SLO
    holds everywhere or nowhere (nothing to bisect inside the measured range)."""
    ps = sorted(points, key=lambda p: p.rate)
    for j, p in enumerate(ps):
        if p.fails(p.estimate, threshold):
            return (ps[j - 1].rate, p.rate) if j else None
    return None


def next_rate(points: Sequence[RatePoint], threshold: float, tolerance: float) -> float | None:
    """The bisection step of `capacity.search`: the midpoint of the bracket (rounded to 4 significant
    digits, so rates are stable ids), or None once the bracket is within `tolerance` (relative to its low
    end) or there is none."""
    b = bracket(points, threshold)
    if b is None:
        return None
    lo, hi = b
    if (hi - lo) <= tolerance * lo:
        return None
    mid = float(f"{(lo + hi) / 2:.4g}")
    return mid if lo < mid < hi else None


@dataclass(frozen=True)
class Gain:
    value: float
    low: float
    high: float


def capacity_gain(variant: Capacity, baseline: Capacity) -> Gain:
    """gain = capacity(variant) / capacity(baseline), interval [low_v / high_b, high_v / low_b] (the ends of
    both intervals combined, conservatively). NaN when either capacity is not measured inside the sweep."""
    if variant.status != MEASURED or baseline.status != MEASURED or not baseline.value > 0:
        return Gain(NAN, NAN, NAN)
    low = variant.low / baseline.high if baseline.high > 0 else NAN
    high = variant.high / baseline.low if baseline.low > 0 else NAN
    return Gain(variant.value / baseline.value, low, high)

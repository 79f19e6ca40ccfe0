"""Capacity under an SLO: a decision per measured rate, the capacity those decisions bound, the bisection
step that refines it, a drafter's capacity gain. Pure functions (docs/metrics.md, "Capacity").

Each measured rate k has the SLO percentile's estimate p_k and 95% interval [L_k, U_k] (metrics.slo.
batch_quantile_ci). As in the closed loop's verdict, a rate is decided only when the interval is on one
side of the threshold t: MET when U_k <= t, MISSED when L_k > t (or the point is saturated, or has no
successful request), else UNDECIDED. A point whose window halves disagree (no steady state) keeps only the
decision its trend cannot overturn: latency still rising cannot make a miss a met (a met becomes
undecided), falling latency the reverse. A point the send-lag gate excludes is not counted at all.

The capacity (in the realized offered rate, req/s) is the highest rate decided MET below the lowest rate
decided MISSED; that missed rate is its upper bound. Undecided rates between them are inside the bracket,
and are reported (`undecided`), never counted as either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.metrics.common import NAN
from specbench.metrics.slo import FALLING, RISING

BELOW = "below_lowest_rate"  # the lowest decided rate misses the SLO: the capacity is below it
BEYOND = "beyond_highest_rate"  # no rate decided missed: the capacity is at least the highest met rate
MEASURED = "measured"  # a met rate below a missed one
UNDECIDED = "undecided"  # no rate decided either way

MET, MISSED, OPEN, EXCLUDED = "met", "missed", "undecided", "excluded"


@dataclass(frozen=True)
class RatePoint:
    """One measured rate for one SLO: the percentile's estimate and interval, and whether the point counts."""

    rate: float  # the realized offered rate (req/s)
    estimate: float
    low: float
    high: float
    saturated: bool = False
    valid: bool = True  # at least one successful request
    trend: str = ""  # the steady-state check: "" | RISING | FALLING (or both, "+"-joined)
    counted: bool = True  # False: the send-lag gate excluded it
    nominal: float = NAN  # the configured (or searched) rate, what the search bisects; NaN: = rate

    @property
    def planned(self) -> float:
        return self.rate if math.isnan(self.nominal) else self.nominal


def decide(p: RatePoint, threshold: float) -> str:
    """MET, MISSED, OPEN (undecided) or EXCLUDED for one rate (module docstring)."""
    if not p.counted:
        return EXCLUDED
    if p.saturated or not p.valid or p.low > threshold:
        verdict = MISSED
    elif p.high <= threshold:
        verdict = MET
    else:
        return OPEN
    if p.saturated or not p.valid:
        return verdict  # a backlog or no answer: decided whatever the halves say
    if (verdict == MET and RISING in p.trend) or (verdict == MISSED and FALLING in p.trend):
        return OPEN
    return verdict


@dataclass(frozen=True)
class Capacity:
    value: float  # req/s: the highest rate met below the lowest missed; NaN when none
    low: float  # = value (the SLO is met there with 95% confidence)
    high: float  # the lowest missed rate (the capacity is below it); NaN: none
    status: str  # MEASURED | BELOW | BEYOND | UNDECIDED
    crossing: float = NAN  # the estimate: where the percentile estimates cross the threshold, inside [low, high]
    crossed: bool = False  # the estimates do cross inside the measured rates (else crossing is a bound)
    undecided: int = 0  # counted rates decided neither way
    excluded: int = 0  # rates the send-lag gate excluded
    # when the estimates do not cross inside the measured rates: AT_LEAST (every estimate meets the limit:
    # the crossing is above the highest rate, `bound_rate`) or AT_MOST (the lowest rate fails already: it is
    # below the lowest rate); "" when they cross (`crossing` is then the estimate) or no rate was counted
    bound: str = ""
    bound_rate: float = NAN

    @property
    def estimate(self) -> float:
        """The crossing when it is an estimate (the estimates cross inside the measured rates), else NaN."""
        return self.crossing if self.crossed else NAN


AT_LEAST, AT_MOST = "at_least", "at_most"  # Capacity.bound


def _crossing(ps: Sequence[RatePoint], threshold: float) -> tuple[float, bool]:
    """Where the point estimates first cross the threshold scanning the rates upwards, interpolated linearly in
    rate (the rate below when the failing point is saturated, has no answer or its estimate does not rise);
    NaN when the lowest rate fails already, the highest rate when none does; and whether it crossed."""
    for j, p in enumerate(ps):
        if p.saturated or not p.valid or not p.estimate <= threshold:
            if j == 0:
                return NAN, False
            a = ps[j - 1]
            if math.isfinite(p.estimate) and p.estimate > a.estimate and not p.saturated and p.valid:
                return a.rate + (threshold - a.estimate) / (p.estimate - a.estimate) * (p.rate - a.rate), True
            return a.rate, True
    return (ps[-1].rate if ps else NAN), False


def capacity(points: Sequence[RatePoint], threshold: float) -> Capacity:
    """The capacity under one SLO from its measured rates (any order); see the module docstring. `crossing`,
    the estimate, is kept inside the decided bracket [value, high] where there is one."""
    ps = sorted((p for p in points if p.counted), key=lambda p: p.rate)
    excluded = sum(1 for p in points if not p.counted)
    decisions = [decide(p, threshold) for p in ps]
    missed = [p.rate for p, d in zip(ps, decisions) if d == MISSED]
    top = min(missed) if missed else math.inf
    met = [p.rate for p, d in zip(ps, decisions) if d == MET and p.rate < top]
    open_ = sum(1 for p, d in zip(ps, decisions) if d == OPEN and p.rate < top)
    high = top if missed else NAN
    value = max(met) if met else NAN
    cross, crossed = _crossing(ps, threshold)
    cross = min(max(cross, value if met else -math.inf), top)
    status = (MEASURED if missed else BEYOND) if met else (BELOW if missed else UNDECIDED)
    crossed = crossed and math.isfinite(cross)
    bound, bound_rate = "", NAN
    if ps and not crossed:
        bound, bound_rate = (AT_MOST, ps[0].rate) if math.isnan(cross) else (AT_LEAST, cross)
    return Capacity(value, value, high, status, cross, crossed, open_, excluded, bound, bound_rate)


def next_rate(points: Sequence[RatePoint], threshold: float, tolerance: float) -> float | None:
    """The bisection step of `capacity.search`, in the planned (nominal) rates: the midpoint (4 significant
    digits, so rates are stable ids) of the widest gap, relative to its low end and wider than `tolerance`,
    among (highest met, next measured rate above it), (last measured rate below the lowest missed, that missed
    rate) and the estimates' bracket (last rate whose estimate meets, first that fails): the first moves the
    capacity up through the undecided rates, the second its upper bound down, the third the estimate. A
    midpoint measured already (a point the send-lag gate excluded) is not proposed again; None when no gap is
    left."""
    ps = sorted((p for p in points if p.counted), key=lambda p: p.planned)
    if not ps:
        return None
    d = [decide(p, threshold) for p in ps]
    miss = next((i for i, x in enumerate(d) if x == MISSED), None)
    met = [i for i, x in enumerate(d) if x == MET and (miss is None or i < miss)]
    est = next((i for i, p in enumerate(ps) if p.saturated or not p.valid or not p.estimate <= threshold), None)
    gaps = {(ps[i - 1].planned, ps[i].planned) for i in (met[-1] + 1 if met else None, miss, est)
            if i is not None and 1 <= i < len(ps)}
    taken = {p.planned for p in points}
    for lo, hi in sorted(gaps, key=lambda g: ((g[0] - g[1]) / g[0], g[0])):  # widest first, then lowest
        mid = float(f"{(lo + hi) / 2:.4g}")
        if (hi - lo) > tolerance * lo and lo < mid < hi and mid not in taken:
            return mid
    return None


@dataclass(frozen=True)
class Gain:
    value: float
    low: float
    high: float


def capacity_gain(variant: Capacity, baseline: Capacity) -> Gain:
    """gain = crossing(variant) / crossing(baseline) (the point estimates); interval [cap_v / upper_b,
    upper_v / cap_b], cap = the highest met rate, upper = the lowest missed one: the range the two brackets
    allow. Its low end above 1 says the variant meets the SLO at a rate the baseline misses. The value is NaN
    unless both estimates cross inside the measured rates; an end
    is NaN when a bracket end that sets it is missing."""
    low = variant.value / baseline.high if variant.value > 0 and baseline.high > 0 else NAN
    high = variant.high / baseline.value if variant.high > 0 and baseline.value > 0 else NAN
    both = variant.crossed and baseline.crossed and baseline.crossing > 0
    return Gain(variant.crossing / baseline.crossing if both else NAN, low, high)

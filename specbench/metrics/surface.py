"""The speedup surface S(C, AL) under forced acceptance, break-even acceptance, and predictions from it.

Pure functions (docs/metrics.md, "Speedup surface"): a surface curve is the speedup at one concurrency
measured at a few forced acceptance lengths, each with its 95% interval. Between measured lengths ln S is
linear in AL; outside them the nearest segment is extended (and the result says it was extrapolated).
Intervals are carried as envelopes: the curve through the points' low ends and the curve through their
high ends, so a break-even or a prediction is bounded by what the points' intervals allow.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.metrics.common import geometric_mean

NAN = float("nan")


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


@dataclass(frozen=True)
class Curve:
    """S(AL) at one concurrency: forced acceptance lengths (ascending) with speedup and its 95% interval."""

    al: tuple[float, ...]
    speedup: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]

    @staticmethod
    def of(al: Sequence[float], speedup: Sequence[float], low: Sequence[float | None] | None = None,
           high: Sequence[float | None] | None = None) -> Curve:
        """Points with a finite positive speedup, sorted by AL; a missing interval end becomes the point."""
        n = len(al)
        lo_in: list[float | None] = list(low) if low is not None else [None] * n
        hi_in: list[float | None] = list(high) if high is not None else [None] * n

        def end(x: float | None, s: float) -> float:
            return float(x) if x is not None and math.isfinite(x) and x > 0 else float(s)

        pts = sorted((float(a), float(s), end(lo, s), end(hi, s))
                     for a, s, lo, hi in zip(al, speedup, lo_in, hi_in) if _finite(s) and s > 0 and _finite(a))
        return Curve(tuple(p[0] for p in pts), tuple(p[1] for p in pts), tuple(p[2] for p in pts),
                     tuple(p[3] for p in pts))

    def __len__(self) -> int:
        return len(self.al)

    def at(self, al: float, which: str = "speedup") -> float:
        """The curve (`speedup`, `low` or `high`) at `al`: ln S linear in AL between the two nearest points."""
        return interpolate(self.al, getattr(self, which), al)

    def extrapolated(self, al: float) -> bool:
        return bool(self.al) and not self.al[0] - 1e-9 <= al <= self.al[-1] + 1e-9


def interpolate(al: Sequence[float], values: Sequence[float], x: float) -> float:
    """ln(value) linear in AL through the points (AL ascending, values > 0); the end segments are extended
    beyond the points; one point: that value everywhere; none: NaN."""
    n = len(al)
    if n == 0 or not math.isfinite(x):
        return NAN
    if n == 1:
        return float(values[0])
    i = 1
    while i < n - 1 and x > al[i]:
        i += 1
    a0, a1 = al[i - 1], al[i]
    y0, y1 = math.log(values[i - 1]), math.log(values[i])
    if a1 == a0:
        return math.exp((y0 + y1) / 2)
    return math.exp(y0 + (x - a0) * (y1 - y0) / (a1 - a0))


def crossing(al: Sequence[float], values: Sequence[float]) -> float:
    """The smallest AL at which the interpolated curve reaches 1.0: the first point >= 1 when the curve
    starts there (AL = that point's: pays from the lowest AL measured, or any AL below it is not known),
    the crossing within the first segment that goes from below 1 to >= 1, else +inf (never within the
    measured range)."""
    if not al:
        return NAN
    if values[0] >= 1.0:
        return float(al[0])
    for i in range(1, len(al)):
        if values[i] >= 1.0:
            y0, y1 = math.log(values[i - 1]), math.log(values[i])
            return al[i - 1] + (0.0 - y0) * (al[i] - al[i - 1]) / (y1 - y0)
    return math.inf


def extended_crossing(al: Sequence[float], values: Sequence[float]) -> float:
    """Where the last segment, extended beyond the highest forced length, reaches 1.0 (an extrapolation, for a
    curve that does not reach 1.0 within its points); +inf when that segment does not rise; NaN with < 2 points."""
    if len(al) < 2:
        return NAN
    inside = crossing(al, values)
    if math.isfinite(inside):
        return inside
    y0, y1 = math.log(values[-2]), math.log(values[-1])
    if y1 <= y0:
        return math.inf
    return al[-1] + (0.0 - y1) * (al[-1] - al[-2]) / (y1 - y0)


@dataclass(frozen=True)
class BreakEvenAL:
    """The acceptance length a drafter needs at one concurrency to pay (speedup >= 1), with its 95%
    interval: `low` from the curve through the points' high ends, `high` from the curve through their low
    ends (NaN when the points have no interval). +inf: not reached within the forced lengths measured.
    `at_most`: the curve pays at its lowest forced length already, so the break-even is that length or below."""

    value: float
    low: float
    high: float
    at_most: bool = False


def break_even_acceptance(curve: Curve) -> BreakEvenAL:
    """The envelopes run through the points that have an interval only: a point without one (a single launch
    and no variance history) is left out of them rather than counted as an interval of width zero, which
    pinned both envelopes to its speedup. The interval always holds the break-even itself; none when no
    point has an interval."""
    value = crossing(curve.al, curve.speedup)
    at_most = bool(len(curve)) and curve.speedup[0] >= 1.0
    with_ci = [i for i in range(len(curve)) if not curve.low[i] == curve.speedup[i] == curve.high[i]]
    if not with_ci:  # no point has an interval: neither has the break-even
        return BreakEvenAL(value, NAN, NAN, at_most)
    al = [curve.al[i] for i in with_ci]
    low = crossing(al, [curve.high[i] for i in with_ci])
    high = crossing(al, [curve.low[i] for i in with_ci])
    return BreakEvenAL(value, min(low, value), max(high, value), at_most)


@dataclass(frozen=True)
class Prediction:
    """A speedup predicted from an acceptance length: point and 95% interval, and whether the acceptance
    lies outside the forced lengths measured (the end segment was extended)."""

    speedup: float
    low: float
    high: float
    extrapolated: bool


def predict(curve: Curve, al: float, al_low: float | None = None, al_high: float | None = None) -> Prediction:
    """S(AL) for a measured acceptance `al` with its interval [al_low, al_high]: the interval is the lowest
    low-envelope value and the highest high-envelope value over AL in {al_low, al, al_high}, so it carries
    both the surface's and the acceptance's uncertainty (the envelope is monotone between points, so the
    ends of the AL interval bound it)."""
    if not len(curve) or not _finite(al):
        return Prediction(NAN, NAN, NAN, False)
    xs = [x for x in (al_low, al, al_high) if x is not None and math.isfinite(x)]
    return Prediction(curve.at(al), min(curve.at(x, "low") for x in xs), max(curve.at(x, "high") for x in xs),
                      any(curve.extrapolated(x) for x in xs))


def _log_half_widths(p: Prediction) -> tuple[float, float]:
    """ln(point / low) and ln(high / point); 0 for a missing or zero-width end."""
    if not (_finite(p.speedup) and p.speedup > 0):
        return NAN, NAN
    below = math.log(p.speedup / p.low) if _finite(p.low) and 0 < p.low < p.speedup else 0.0
    above = math.log(p.high / p.speedup) if _finite(p.high) and p.high > p.speedup else 0.0
    return below, above


def anchored(at_c: Prediction, at_ref: Prediction, measured_ref: Prediction) -> Prediction:
    """The surface's shape, the run's own level: `S_meas(ref) x S(C, a) / S(ref, a)`.

    The surface predicts how the speedup falls from the reference concurrency to C; the run's speedup
    measured at the reference (which a C=1 run of the head has anyway) sets where the curve starts. A launch
    that runs fast or slow at every concurrency moves S(ref, a) and S(C, a) alike and cancels from the ratio,
    and so does a level error of the surface itself (a drafter whose forced launch differs from its plain one).
    Interval: on each side the three relative half-widths in log space combine in quadrature (the run and the
    surface are independent launches; the surface's two points share theirs, whose common part quadrature
    counts twice, so the interval errs wide). A side with no interval anywhere stays at the point."""
    if not all(_finite(p.speedup) and p.speedup > 0 for p in (at_c, at_ref, measured_ref)):
        return Prediction(NAN, NAN, NAN, at_c.extrapolated or at_ref.extrapolated)
    point = measured_ref.speedup * at_c.speedup / at_ref.speedup
    (m_lo, m_hi), (c_lo, c_hi), (r_lo, r_hi) = (_log_half_widths(p) for p in (measured_ref, at_c, at_ref))
    below = math.sqrt(m_lo ** 2 + c_lo ** 2 + r_hi ** 2)  # the reference point divides: its high end lowers
    above = math.sqrt(m_hi ** 2 + c_hi ** 2 + r_lo ** 2)
    return Prediction(point, point * math.exp(-below), point * math.exp(above),
                      at_c.extrapolated or at_ref.extrapolated)


def geomean(xs: Sequence[float]) -> float:
    """The geometric mean over the finite positive values (metrics.common.geometric_mean, the one rule)."""
    return geometric_mean(xs).value


def pooled(predictions: Sequence[Prediction]) -> Prediction:
    """The geometric mean of several predictions (e.g. one per prompt category) and of their interval ends:
    the ends move together, as they come from the same surface (a conservative bound, not an average of
    independent errors)."""
    return Prediction(geomean([p.speedup for p in predictions]), geomean([p.low for p in predictions]),
                      geomean([p.high for p in predictions]), any(p.extrapolated for p in predictions))


def break_even_level(levels: Sequence[int], speedup: Sequence[float]) -> int:
    """Index of the first sweep level whose speedup is below 1.0 (len(levels): pays at every level).
    Two curves' break-even concurrencies are "within one level" when these indices differ by at most 1."""
    for i, (_c, s) in enumerate(sorted(zip(levels, speedup))):
        if _finite(s) and s < 1.0:
            return i
    return len(levels)


def has_interval(p: Prediction) -> bool:
    return _finite(p.low) and _finite(p.high) and p.low < p.high


def decided(p: Prediction, min_speedup: float) -> str:
    """What a prediction decides before measuring: `pays` (interval above min_speedup), `slower` (interval
    below 1.0), else `undecided` (measure this point). A prediction without an interval (low = point = high:
    neither the surface nor the acceptance had one) decides nothing."""
    if not has_interval(p):
        return "undecided"
    if _finite(p.low) and p.low > min_speedup:
        return "pays"
    if _finite(p.high) and p.high < 1.0:
        return "slower"
    return "undecided"

"""The speedup surface S(C, AL) under forced acceptance as a check of a time model, break-even acceptance,
and what a prediction from it decides (surface.model_predict computes the prediction).

Pure functions (docs/metrics.md, "Speedup surface"). A request's time is its prefill plus its decode steps,
(O - 1) / a of them at acceptance length a, each costing step(C, k): the step's cost depends on the
concurrency and the drafter configuration, not on how many drafts are accepted (a forced engine drafts and
verifies as usual). Over the baseline's time T_base = prefill_b + (O - 1) step_b,

    1 / S(a) = T_spec(a) / T_base = p + q / a,   p = prefill_s / T_base,  q = (O - 1) step_s / T_base,

so S is hyperbolic (concave) in a and 1/S is linear in 1/a: `fit` is a least-squares line through the forced
points in (1/a, 1/S). Intervals are carried as envelopes: the model fitted through the points' low ends and
the one through their high ends.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from specbench.metrics.common import geometric_mean

NAN = float("nan")


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


@dataclass(frozen=True)
class TimeModel:
    """1/S(a) = prefill + decode / a (both in units of the baseline request's time, dimensionless)."""

    prefill: float  # p: the forced side's prefill time over the baseline request's time
    decode: float  # q: the forced side's decode time at a = 1, (O - 1) step_s, over the baseline request's time

    def at(self, a: float) -> float:
        """S(a); NaN for a <= 0 or an undefined model."""
        if not (_finite(a) and a > 0 and _finite(self.prefill) and _finite(self.decode)):
            return NAN
        t = self.prefill + self.decode / a
        return 1.0 / t if t > 0 else math.inf

    def break_even(self) -> float:
        """a* with S(a*) = 1: q / (1 - p); +inf when the prefill alone takes the baseline's time (p >= 1)."""
        if not (_finite(self.prefill) and _finite(self.decode)):
            return NAN
        return self.decode / (1.0 - self.prefill) if self.prefill < 1.0 else math.inf


def fit(al: Sequence[float], speedup: Sequence[float]) -> TimeModel:
    """The time model through forced points (a_i, S_i): least squares of 1/S on 1/a. One point (or one
    distinct length): no prefill, p = 0, q = mean(a / S). Neither term is negative (a time): a negative p is
    refitted through the origin, a negative q (S falling with a) leaves p = mean(1/S), q = 0."""
    pts = [(1.0 / a, 1.0 / s) for a, s in zip(al, speedup) if _finite(a) and a > 0 and _finite(s) and s > 0]
    if not pts:
        return TimeModel(NAN, NAN)
    n = len(pts)
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx <= 1e-15:
        return TimeModel(0.0, sum(y / x for x, y in pts) / n)
    q = sum((x - mx) * (y - my) for x, y in pts) / sxx
    p = my - q * mx
    if q < 0:
        return TimeModel(my, 0.0)
    if p < 0:
        return TimeModel(0.0, sum(x * y for x, y in pts) / sum(x * x for x, _ in pts))
    return TimeModel(p, q)


@dataclass(frozen=True)
class HeldOut:
    """The model's check on its shape: fitted without one forced length, its speedup there against the measured."""

    al: float
    predicted: float
    measured: float

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted / self.measured - 1 if self.measured > 0 and _finite(self.predicted) else NAN


MIN_SHAPE_POINTS = 3  # two forced lengths determine the model; a third tests it


def held_out(al: Sequence[float], speedup: Sequence[float], index: int | None = None) -> HeldOut | None:
    """Hold out the point `index` of the points sorted by AL (default the middle one, len // 2), fit the
    model on the others, predict the held-out speedup; None with fewer than MIN_SHAPE_POINTS points."""
    pts = sorted((float(a), float(s)) for a, s in zip(al, speedup) if _finite(a) and _finite(s) and s > 0)
    if len(pts) < MIN_SHAPE_POINTS:
        return None
    i = len(pts) // 2 if index is None else index
    rest = pts[:i] + pts[i + 1:]
    a, s = pts[i]
    return HeldOut(a, fit([x for x, _ in rest], [y for _, y in rest]).at(a), s)


@dataclass(frozen=True)
class Curve:
    """S(AL) at one concurrency: forced acceptance lengths (ascending) with speedup and its 95% interval,
    and the time model fitted through them (one per end)."""

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

    @cached_property
    def models(self) -> dict[str, TimeModel]:
        return {w: fit(self.al, getattr(self, w)) for w in ("speedup", "low", "high")}

    def at(self, al: float, which: str = "speedup") -> float:
        """The model (`speedup`, or the envelope `low` or `high`) at `al`."""
        return self.models[which].at(al) if len(self) else NAN


@dataclass(frozen=True)
class BreakEvenAL:
    """The acceptance length a drafter needs at one concurrency to pay (speedup >= 1), from the time model,
    with its 95% interval: `low` from the model through the points' high ends, `high` from the model through
    their low ends (NaN when the points have no interval). `model`: a* wherever it lies. Censored ends:
    `beyond` (value +inf) when a* > `top` (k + 1: no acceptance pays at this concurrency); `at_most` (value the
    lowest forced length) when the model pays there already; interval ends past `top` are +inf, ends below the
    lowest forced length are that length."""

    value: float
    low: float
    high: float
    at_most: bool = False
    model: float = NAN
    beyond: bool = False


def break_even_acceptance(curve: Curve, top: float | None = None) -> BreakEvenAL:
    """`top`: the highest acceptance a step can reach (k + 1; default the highest forced length). The
    envelopes are fitted through the points that have an interval only: a point without one (a single launch
    and no variance history) is left out of them rather than counted as an interval of width zero. The
    interval always holds the break-even itself; none when fewer than two points have one."""
    if not len(curve):
        return BreakEvenAL(NAN, NAN, NAN)
    bound = top if top is not None and math.isfinite(top) else curve.al[-1]
    a_star = fit(curve.al, curve.speedup).break_even()

    def censor(x: float) -> float:  # past k + 1: beyond; below the lowest forced length: at most that length
        return math.inf if x > bound + 1e-9 else max(x, curve.al[0])

    at_most = _finite(a_star) and a_star <= curve.al[0]
    value = curve.al[0] if at_most else censor(a_star)
    with_ci = [i for i in range(len(curve)) if not curve.low[i] == curve.speedup[i] == curve.high[i]]
    if len(with_ci) < 2:  # no interval on the points: none on the break-even
        return BreakEvenAL(value, NAN, NAN, at_most, a_star, value == math.inf)
    al = [curve.al[i] for i in with_ci]
    low = censor(fit(al, [curve.high[i] for i in with_ci]).break_even())
    high = censor(fit(al, [curve.low[i] for i in with_ci]).break_even())
    return BreakEvenAL(value, min(low, value), max(high, value), at_most, a_star, value == math.inf)


@dataclass(frozen=True)
class Prediction:
    """A speedup predicted from an acceptance length: point and 95% interval, and whether the acceptance
    lies outside the forced lengths measured (the model extrapolated)."""

    speedup: float
    low: float
    high: float
    extrapolated: bool


def geomean(xs: Sequence[float]) -> float:
    """The geometric mean over the finite positive values (metrics.common.geometric_mean, the one rule)."""
    return geometric_mean(xs).value


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


def apart(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    """Two (low, point, high) estimates whose intervals do not overlap; a missing end is the point, and two
    estimates without any interval are not judged (False)."""
    def ends(x: tuple[float, float, float]) -> tuple[float, float, bool]:
        lo, pt, hi = x
        has = math.isfinite(lo) and math.isfinite(hi) and lo < hi  # a zero-width interval is no interval
        return (lo if math.isfinite(lo) else pt), (hi if math.isfinite(hi) else pt), has

    (alo, ahi, ahas), (blo, bhi, bhas) = ends(a), ends(b)
    if not (ahas or bhas) or not all(math.isfinite(x) for x in (alo, ahi, blo, bhi)):
        return False
    return alo > bhi or ahi < blo

"""Shared by the metrics modules: NaN conversions of record fields, the safe ratio, interval bounds, the
geometric mean of speedups."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, NamedTuple

NAN = math.nan
MIN_REPEATS_FOR_INTERVAL = 3  # fewer repeats give a very wide t interval (few_repeats)


def interval_or_nan(interval: tuple[float | None, float | None]) -> tuple[float, float]:
    lo, hi = interval
    return (NAN if lo is None else lo), (NAN if hi is None else hi)


def as_float(x: Any) -> float:
    """A record field as float; None/NaN -> NaN."""
    if x is None:
        return NAN
    try:
        v = float(x)
    except (TypeError, ValueError):
        return NAN
    return v


def safe_ratio(num: float, den: float) -> float:
    return num / den if math.isfinite(num) and math.isfinite(den) and den > 0 else NAN


def as_list(x: Any) -> list[Any]:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return []
    return list(x)


def opt_list(x: Any) -> list[Any] | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return list(x)


def opt_str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def key_nan(x: Any) -> Any:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


class GeoMean(NamedTuple):
    value: float  # NaN when no value was usable
    used: int
    left_out: int  # missing, NaN, infinite or non-positive values


def geometric_mean(values: Iterable[Any]) -> GeoMean:
    """exp(mean(log x)) over the finite positive values; the others are left out and counted
    (docs/metrics.md, "Geometric-mean speedup")."""
    xs = [as_float(v) for v in values]
    ok = [x for x in xs if math.isfinite(x) and x > 0]
    value = math.exp(sum(math.log(x) for x in ok) / len(ok)) if ok else NAN
    return GeoMean(value, len(ok), len(xs) - len(ok))

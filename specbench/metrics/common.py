"""Shared by the metrics modules: NaN conversions of record fields, the safe ratio, bootstrap settings."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

NAN = math.nan
MIN_REPEATS_FOR_INTERVAL = 3  # run-to-run intervals need at least this many repeats


@dataclass(frozen=True)
class BootstrapSettings:
    n_resamples: int = 2000
    confidence: float = 0.95
    seed: int = 0


def _bs(bs: BootstrapSettings) -> dict[str, Any]:
    return {"n_resamples": bs.n_resamples, "confidence": bs.confidence, "seed": bs.seed}


def _ci(interval: tuple[float | None, float | None]) -> tuple[float, float]:
    lo, hi = interval
    return (NAN if lo is None else lo), (NAN if hi is None else hi)


def _num(x: Any) -> float:
    """A record field as float; None/NaN -> NaN."""
    if x is None:
        return NAN
    try:
        v = float(x)
    except (TypeError, ValueError):
        return NAN
    return v


def _safe_ratio(num: float, den: float) -> float:
    return num / den if math.isfinite(num) and math.isfinite(den) and den > 0 else NAN


def _as_list(x: Any) -> list[Any]:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return []
    return list(x)


def _opt_list(x: Any) -> list[Any] | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return list(x)


def _opt_str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def _key_nan(x: Any) -> Any:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x

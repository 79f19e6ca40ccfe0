"""A surface run's cells -> surface.csv (S per variant x forced length x concurrency) and break_even_al.csv.

A surface point pools the run's cells at one concurrency (all categories, output lengths, input lengths and
temperatures the surface's sweep measured): the geometric mean of their speedups, and of their interval
ends (the ends move together: cells of one launch share its speed, so this bounds the pooled interval
instead of shrinking it as if the cells were independent). The acceptance the engine reported (its
counters, the same figure as a run's acceptance_length) is read back next to the forced length.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from specbench.metrics.surface import Curve, break_even_acceptance, extended_crossing, geomean
from specbench.surface.derive import split_name

SURFACE_FILE = "surface.csv"
BREAK_EVEN_FILE = "break_even_al.csv"
READBACK_TOLERANCE = 0.10  # relative: forced 2.0 must read back within [1.8, 2.2]
SURFACE_COLUMNS = ["variant", "forced_acceptance", "concurrency", "speedup", "speedup_ci_low", "speedup_ci_high",
                   "measured_acceptance", "measured_acceptance_low", "measured_acceptance_high", "readback", "cells"]
BREAK_EVEN_COLUMNS = ["variant", "concurrency", "break_even_acceptance", "break_even_acceptance_low",
                      "break_even_acceptance_high", "break_even_acceptance_at_most",
                      "break_even_acceptance_extrapolated"]


def _mean(xs: pd.Series) -> float:
    vals = [float(x) for x in xs if math.isfinite(float(x))]
    return sum(vals) / len(vals) if vals else math.nan


def _pooled_end(ends: pd.Series) -> float:
    """The geometric mean of the cells' interval ends, or NaN (`none`) when a cell has no interval: the ends of
    the cells that have one do not bound the pooled point."""
    vals = [float(x) for x in ends]
    return geomean(vals) if vals and all(math.isfinite(x) and x > 0 for x in vals) else math.nan


def readback(forced: float, measured: float) -> str:
    """`ok` when the engine's acceptance is within READBACK_TOLERANCE of the forced length, `mismatch`
    otherwise, `unknown` without a measured acceptance."""
    if not math.isfinite(measured):
        return "unknown"
    return "ok" if abs(measured - forced) <= READBACK_TOLERANCE * forced else "mismatch"


def surface_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per source variant x forced length x concurrency from a surface run's (normalized) cells."""
    rows = []
    closed = cells[cells["rate"].isna()] if "rate" in cells else cells
    for name, g in closed[closed["valid"]].groupby("variant"):
        parsed = split_name(str(name))
        if parsed is None:
            continue
        base, forced = parsed
        for c, gc in g.groupby("concurrency"):
            measured = _mean(gc["acceptance_length"])
            rows.append(dict(variant=base, forced_acceptance=forced, concurrency=int(float(c)),  # type: ignore[arg-type]
                             speedup=geomean(gc["speedup"].tolist()),
                             speedup_ci_low=_pooled_end(gc["speedup_ci_low"]),
                             speedup_ci_high=_pooled_end(gc["speedup_ci_high"]), measured_acceptance=measured,
                             measured_acceptance_low=_mean(gc["acceptance_length_ci_low"]),
                             measured_acceptance_high=_mean(gc["acceptance_length_ci_high"]),
                             readback=readback(forced, measured), cells=len(gc)))
    out = pd.DataFrame(rows, columns=SURFACE_COLUMNS)
    return out.sort_values(["variant", "concurrency", "forced_acceptance"]).reset_index(drop=True)


def curves(surface: pd.DataFrame, variant: str) -> dict[int, Curve]:
    """Per concurrency, the variant's S(AL) curve (points without a speedup are left out)."""
    out = {}
    for c, g in surface[surface["variant"] == variant].groupby("concurrency"):
        out[int(float(c))] = Curve.of(g["forced_acceptance"].tolist(), g["speedup"].tolist(),  # type: ignore[arg-type]
                               g["speedup_ci_low"].tolist(), g["speedup_ci_high"].tolist())
    return out


def break_even_table(surface: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for v in sorted(surface["variant"].unique()):
        for c, curve in sorted(curves(surface, v).items()):
            be = break_even_acceptance(curve)
            rows.append(dict(variant=v, concurrency=c, break_even_acceptance=be.value,
                             break_even_acceptance_low=be.low, break_even_acceptance_high=be.high,
                             break_even_acceptance_at_most=be.at_most,
                             break_even_acceptance_extrapolated=extended_crossing(curve.al, curve.speedup)))
    return pd.DataFrame(rows, columns=BREAK_EVEN_COLUMNS)


def load_surface(path: Path) -> pd.DataFrame:
    """surface.csv of a surface directory (or the file itself)."""
    from specbench.shared.errors import UsageError

    f = path / SURFACE_FILE if path.is_dir() else path
    if not f.exists():
        raise UsageError(f"surface: {f} not found (a `specbench surface` run directory has {SURFACE_FILE})")
    df = pd.read_csv(f)
    missing = [c for c in SURFACE_COLUMNS if c not in df]
    if missing:
        raise UsageError(f"surface: {f} lacks the column(s) {', '.join(missing)}")
    return df

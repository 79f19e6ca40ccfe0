"""A head's own per-position acceptance profile from a finished run, for `specbench surface --profile-from RUN`:
its `acceptance_per_position` at the run's lowest concurrency (docs/surface.md, "A head's own profile").

Pooled over that variant's cells at that concurrency by draft counts (the cells' windows summed as one cell by
`cell_acceptance`, vLLM's definition: accepted at position i / drafts) when the windows carry the engine's
per-position counters; else the mean over those cells of their `acceptance_per_position` (per-request
histograms: each cell weighs the same).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.metrics.acceptance import cell_acceptance
from specbench.records.rundir import RunDir, records_frame

DIGITS = 4  # the rates as written into the derived variant (rounding keeps them in [0, 1] and non-increasing)


@dataclass(frozen=True)
class HeadProfile:
    rates: list[float]  # per draft position, unconditional
    concurrency: int  # the run's lowest (closed loop) for the variant
    how: str  # `pooled over the draft counts of N window(s)` or `mean over N cells`


def head_profile(run: Path, variant: str) -> HeadProfile | None:
    """`variant`'s per-position acceptance in run directory `run` at its lowest concurrency, or None when the
    run has no valid closed-loop cell of it with a per-position figure."""
    from specbench.report.derived import normalize_cells

    rd = RunDir(run)
    cells = normalize_cells(pd.read_csv(rd.cells))
    mine = cells[(cells["variant"] == variant) & cells["valid"] & cells["rate"].isna()]
    if mine.empty:
        return None
    c0 = float(mine["concurrency"].min())
    mine = mine[mine["concurrency"] == c0]
    windows = records_frame([w for w in rd.window_records() if w.variant == variant
                             and w.point_id in set(mine["point_id"])])
    pooled = cell_acceptance([], windows, False, 1)["acceptance_per_position"] if len(windows) else None
    if pooled:
        return HeadProfile(_rounded(pooled), int(c0), f"pooled over the draft counts of {len(windows)} window(s)")
    lists = [p for p in (_positions(t) for t in mine["acceptance_per_position"]) if p]
    if not lists or len({len(p) for p in lists}) != 1:
        return None
    return HeadProfile(_rounded(list(np.mean(lists, axis=0))), int(c0), f"mean over {len(lists)} cells")


def _positions(text: str) -> list[float] | None:
    """A cells.csv per-position list (JSON), or None when empty or not finite."""
    try:
        vals = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(vals, list) or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in vals):
        return None
    return [float(v) for v in vals]


def _rounded(rates: list[float]) -> list[float]:
    return [round(float(r), DIGITS) for r in rates]

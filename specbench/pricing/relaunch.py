"""What one more launch of a variant costs, from what its launches so far took: the one estimate behind the
sequential rule's budget check (`runner/sequential.py`) and the report's price of deciding the undecided
levels (`report/opening.py`). Pure: run.json's seconds and cells.csv's columns in, seconds out.

A launch that measures only some points costs the engine's startup plus the share of a launch's measuring
time those points take: launch_seconds = startup_s + max(0, wall_s / launches - startup_s) x share.
"""

from __future__ import annotations

import math
from collections.abc import Collection

import pandas as pd

TIME_COLUMNS = ("point_id", "n_requests", "launches", "client_e2e_mean_s", "concurrency")


def launch_seconds(startup_s: float | None, wall_s: float | None, launches: int, share: float = 1.0) -> float:
    """Seconds of one more launch of a variant that measures `share` (0-1) of its sweep's measuring time:
    its last startup plus its measuring time per launch so far (wall_s over its `launches`, the startup taken
    off) times the share. Unknown seconds (None) count as 0."""
    startup = startup_s or 0.0
    per_launch = (wall_s or 0.0) / max(1, launches)
    return startup + max(0.0, per_launch - startup) * min(1.0, max(0.0, share))


def cell_seconds(cells: pd.DataFrame) -> pd.Series:
    """Each cell's measuring time in one launch, as a closed loop spends it: (its requests per launch / C) x
    the mean end-to-end latency of a request (C requests in flight, each lasting one latency), the planner's
    (requests / C) x output_len / per-request speed measured instead of assumed. NaN where a column lacks."""
    if not len(cells) or not all(c in cells for c in TIME_COLUMNS):
        return pd.Series(math.nan, index=cells.index, dtype=float)
    n = pd.to_numeric(cells["n_requests"], errors="coerce")
    la = pd.to_numeric(cells["launches"], errors="coerce").clip(lower=1).fillna(1)
    e2e = pd.to_numeric(cells["client_e2e_mean_s"], errors="coerce")
    c = pd.to_numeric(cells["concurrency"], errors="coerce")
    return (n / la * e2e / c).astype(float)


def measuring_share(cells: pd.DataFrame, variant: str, points: Collection[str]) -> float:
    """The share of a launch of `variant`'s measuring time its `points` (point ids) take: by each cell's
    measured time (`cell_seconds`) where every cell of the variant has one, else by their count (a C=1 window
    of 64 requests lasts longer than a C=32 one: the count is the fallback, not the estimate)."""
    mine = cells[cells["variant"] == variant] if len(cells) and "variant" in cells else cells.iloc[0:0]
    if not len(mine):
        return 0.0
    ids = mine["point_id"].astype(str) if "point_id" in mine else pd.Series("", index=mine.index)
    chosen = ids.isin({str(p) for p in points})
    secs = cell_seconds(mine)
    if secs.notna().all() and float(secs.sum()) > 0:
        return float(secs[chosen].sum() / secs.sum())
    return float(chosen.sum()) / len(mine)


__all__ = ["cell_seconds", "launch_seconds", "measuring_share"]

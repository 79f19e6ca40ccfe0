"""The primary family of a run's cells: its claims' shapes and the level they are decided at
(decide.family.family_level), from the columns cells.csv holds (mix_*, launches, repeats, launch_sharing)
and the variance history the intervals used."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from specbench.decide.decision import ALPHA
from specbench.decide.family import ClaimShape, FamilyLevel, HistoryShape, Sharing, bonferroni, family_level
from specbench.metrics.mix import mix_key

Claim = tuple[float, float, float, bool]  # a claim's 95% mix interval (low, high, df) and whether a gate fired


def _effective_points(g: pd.DataFrame) -> float:
    """1 / sum a_p^2, a_p = (u_p / s_p) / sum_q (u_q / s_q): the weights of the points in ln S (decide.mix)."""
    u = g["mix_weight"].astype(float) if "mix_weight" in g else pd.Series(1.0, index=g.index)
    inv = u / g["speedup"].astype(float)
    a = inv / inv.sum()
    total = float((a * a).sum())
    return 1.0 / total if total > 0 and math.isfinite(total) else float(len(g))


def claim_shapes(cells: pd.DataFrame, drafters: Sequence[str], baseline: str) -> tuple[int, list[ClaimShape] | None]:
    """The number of primary claims (drafter x mix group) of the cells, and one ClaimShape per claim (None when
    some claim's shape is not in the cells: no baseline cells, launches or repeats)."""
    ok = cells["valid"].astype(bool)
    mine = cells[cells["variant"].isin(drafters) & ok & cells["mix_points"].notna()]
    groups = list(mine.groupby(mine.apply(mix_key, axis=1), sort=False)) if len(mine) else []
    if not {"point_id", "launches", "repeats", "speedup"} <= set(cells.columns):
        return len(groups), None
    base = cells[(cells["variant"] == baseline) & ok].set_index("point_id")
    out = []
    for key, g in groups:
        b = base.loc[base.index.intersection(g["point_id"])]
        if not len(b) or g[["launches", "repeats"]].isna().any().any():
            return len(groups), None
        out.append(ClaimShape(
            drafter=str(key[0]), group=tuple(key[1:]), points=_effective_points(g),
            launches=int(g["launches"].min()), base_launches=int(b["launches"].min()),
            repeats=int(g["repeats"].min() // max(1, g["launches"].min())),
            base_repeats=int(b["repeats"].min() // max(1, b["launches"].min()))))
    return len(groups), out


def history_shape(history: Mapping[str, Any] | None) -> HistoryShape | None:
    """The variance history as the intervals used it (variance_history.json's "used"), None without one."""
    if not history or history.get("rel_var") is None:
        return None

    def num(k: str, missing: float = math.nan) -> float:
        v = history.get(k)
        return float(v) if v is not None else missing

    return HistoryShape(num("rel_var"), num("df"), num("repeat_rel_var"), num("repeat_df", 0.0))


def sharing_of(cells: pd.DataFrame) -> Sharing | None:
    """The run's launch sharing (cells.csv's launch_sharing, launch_sharing_df), None where not measured."""
    if "launch_sharing" not in cells or not cells["launch_sharing"].notna().any():
        return None
    row = cells[cells["launch_sharing"].notna()].iloc[0]
    return Sharing(float(row["launch_sharing"]), float(row["launch_sharing_df"]))


def primary_level(cells: pd.DataFrame, drafters: Sequence[str], baseline: str,
                  history: Mapping[str, Any] | None, looks: int = 1) -> FamilyLevel:
    """The level the run's primary claims are decided at: family-wise ALPHA per outcome over every claim and
    `looks` sequential looks (ALPHA / looks per look, the union bound over looks)."""
    alpha = ALPHA / max(1, looks)
    k, shapes = claim_shapes(cells, drafters, baseline)
    if shapes is None:
        return bonferroni(k, alpha, "the claims' launches are not in the cells")
    return family_level(shapes, alpha, sharing_of(cells), history_shape(history))

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

POINTS_STEP = 0.5  # a claim's effective points enter rounded down to this (the level is then one of few, cached)


def _effective_points(group: list[dict[str, Any]]) -> float:
    """1 / sum a_p^2, a_p = (u_p / s_p) / sum_q (u_q / s_q): the weights of the points in ln S (decide.primary),
    rounded down to POINTS_STEP (fewer points: less correlation, a larger level)."""
    inv = [float(r.get("mix_weight", 1.0)) / float(r["speedup"]) for r in group]
    total = sum(inv)
    a2 = sum((x / total) ** 2 for x in inv) if total > 0 else math.nan
    p = 1.0 / a2 if a2 > 0 and math.isfinite(a2) else float(len(group))
    return max(1.0, math.floor(p / POINTS_STEP) * POINTS_STEP)


def claim_shapes(cells: pd.DataFrame, drafters: Sequence[str], baseline: str) -> tuple[int, list[ClaimShape] | None]:
    """The number of primary claims (drafter x mix group) of the cells, and one ClaimShape per claim (None when
    some claim's shape is not in the cells: no baseline cells, launches or repeats)."""
    rows: list[dict[str, Any]] = [{str(k): v for k, v in r.items()} for r in cells.to_dict("records")]
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        if r["variant"] in drafters and bool(r["valid"]) and not pd.isna(r.get("mix_points")):
            groups.setdefault(mix_key(r), []).append(r)
    if not {"point_id", "launches", "repeats", "speedup"} <= set(cells.columns):
        return len(groups), None
    base = {r["point_id"]: r for r in rows if r["variant"] == baseline and bool(r["valid"])}
    out = []
    for key, g in groups.items():
        b = [base[r["point_id"]] for r in g if r["point_id"] in base]
        if not b or any(pd.isna(r[c]) for r in g + b for c in ("launches", "repeats")):
            return len(groups), None
        n, nb = min(int(r["launches"]) for r in g), min(int(r["launches"]) for r in b)
        out.append(ClaimShape(
            drafter=str(key[0]), group=tuple(key[1:]), points=_effective_points(g), launches=n, base_launches=nb,
            repeats=min(int(r["repeats"]) for r in g) // max(1, n),
            base_repeats=min(int(r["repeats"]) for r in b) // max(1, nb)))
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


SECONDARY_UNITS = {"launch", "repeat+calibration", "history"}  # intervals the model's T is the statistic of


def secondary_level(cells: pd.DataFrame, drafter: str, baseline: str, history: Mapping[str, Any] | None) -> FamilyLevel:
    """The level of one drafter's secondary family (its valid points with an interval, each one claim of one
    point): max-t as for the primary family where every point's interval is one the model simulates (Welch on
    launch units, or one launch with the history's components); otherwise Bonferroni's level, which tells the
    caller to use Holm (decide.secondary)."""
    need = {"point_id", "launches", "repeats", "speedup_ci_low", "interval_unit"}
    if not need <= set(cells.columns):
        return bonferroni(0, ALPHA, "the points' launches are not in the cells")
    ok = cells["valid"].astype(bool)
    mine = cells[(cells["variant"] == drafter) & ok & cells["speedup_ci_low"].notna()]
    base = cells[(cells["variant"] == baseline) & ok].set_index("point_id")
    shapes = []
    for r in mine.to_dict("records"):
        if r["point_id"] not in base.index or r["interval_unit"] not in SECONDARY_UNITS:
            return bonferroni(len(mine), ALPHA, f"interval unit {r['interval_unit']} at {r['point_id']}")
        b = base.loc[r["point_id"]]
        n, nb = int(r["launches"]), int(b["launches"])
        shapes.append(ClaimShape(drafter, r["point_id"], 1.0, n, nb, int(r["repeats"]) // max(1, n),
                                 int(b["repeats"]) // max(1, nb)))
    return family_level(shapes, ALPHA, sharing_of(cells), history_shape(history))

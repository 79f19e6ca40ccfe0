"""Sequential measurement (`sweep.until: decided`) on the cells table: which points are still undecided,
and the always-valid intervals the verdict reads.

The run looks at its cells after `launches` launches and after every launch it adds, up to
`max_launches`: K = max_launches - launches + 1 looks, fixed before any data. At every look each speedup
interval is drawn at one-sided level alpha / K (decision.look_alpha, a Bonferroni alpha spending), so by
the union bound the chance that any look's interval misses, on either side, stays at most alpha: stopping
at the first look where a point is decided keeps every outcome's error rate at most 2.5%. The price is a
wider interval at each look (t at 1 - 0.025 / K instead of 0.975); benchmarks/decision_cost.py simulates
that it holds, and what it saves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd

from specbench.config import SweepConfig
from specbench.decide.decision import (
    MeasuredInterval,
    Outcome,
    classify,
    look_alpha,
    t_quantile,
    units_to_decide,
    widen,
)


def looks(sweep: SweepConfig) -> int:
    return sweep.max_launches - sweep.launches + 1


def always_valid(cells: pd.DataFrame, sweep: SweepConfig) -> pd.DataFrame:
    """cells with the speedup intervals re-drawn at the per-look level (until: decided), else unchanged."""
    if sweep.until != "decided" or not len(cells):
        return cells
    out = cells.copy()
    alpha = look_alpha(looks(sweep))
    bounds = [widen(lo, hi, df, alpha) for lo, hi, df in
              zip(out["speedup_ci_low"], out["speedup_ci_high"], out["speedup_ci_df"])]
    drafter = ~out["is_baseline"].astype(bool)
    out.loc[drafter, "speedup_ci_low"] = [b[0] for b, d in zip(bounds, drafter) if d]
    out.loc[drafter, "speedup_ci_high"] = [b[1] for b, d in zip(bounds, drafter) if d]
    return out


def within_reach(measured: MeasuredInterval, min_speedup: float, max_launches: int, alpha: float) -> bool:
    """Whether more launches could decide the point: within max_launches (decision.units_to_decide at the
    per-look alpha) at its estimate or at one standard error either side of it. An estimate from 2 or 3
    launches is itself uncertain: projected at the estimate alone, a point whose true speedup lies well
    inside a decision (a truth of 1.02 read as 1.07, next to m) was dropped after 2 launches about half
    the time (benchmarks/decision_cost.py)."""
    lo, hi, df = measured.low, measured.high, measured.df
    if not (lo > 0 and hi > 0 and df > 0):
        return False
    se = math.log(hi / lo) / (2 * t_quantile(df, alpha))
    for shift in (0.0, -se, se):
        moved = replace(measured, low=lo * math.exp(shift), high=hi * math.exp(shift))
        if units_to_decide(moved, min_speedup, cap=max_launches, alpha=alpha).units is not None:
            return True
    return False


def undecided_points(cells: pd.DataFrame, sweep: SweepConfig, min_speedup: float) -> dict[str, set[str]]:
    """Per drafter, the point ids worth another launch: valid cells whose (always-valid) interval decides
    nothing yet, but would within max_launches if their estimate and variance held (decision.units_to_decide
    at the per-look alpha). A point that cannot be decided so (an estimate at m itself) is not chased."""
    out: dict[str, set[str]] = {}
    mine = cells[~cells["is_baseline"].astype(bool) & cells["valid"].astype(bool)]
    alpha = look_alpha(looks(sweep))
    for variant, point, lo, hi, df, launches in zip(mine["variant"], mine["point_id"], mine["speedup_ci_low"],
                                                    mine["speedup_ci_high"], mine["speedup_ci_df"], mine["launches"]):
        lo, hi, df = float(lo), float(hi), float(df)
        if classify(lo, hi, min_speedup) is not Outcome.UNDECIDED:
            continue
        if within_reach(MeasuredInterval(lo, hi, df, int(launches)), min_speedup, sweep.max_launches, alpha):
            out.setdefault(str(variant), set()).add(str(point))
    return out


@dataclass(frozen=True)
class Round:
    """The next round of a sequential run: (variant, point ids) to launch, in launch order, the baseline
    first; empty when the run stops, then `reason` says why."""

    todo: list[tuple[str, frozenset[str]]]
    reason: str = ""


def next_round(cells: pd.DataFrame, sweep: SweepConfig, min_speedup: float, baseline: str, launched: int,
               status: Mapping[str, str]) -> Round:
    """After `launched` launches: the baseline on every point still undecided for some drafter, then each
    such drafter on its own undecided points (docs/metrics.md, "Sequential measurement"). `cells`: the
    run's cells as derive_cells gives them, already always-valid (widening them again here would chase
    points the report calls decided). `status`: each variant's run status in launch order (only "done"
    variants are launched again). The runner and benchmarks/decision_cost.py both decide by this function."""
    open_points = undecided_points(cells, sweep, min_speedup)
    live = {v: pts for v, pts in open_points.items() if status.get(v) == "done"}
    if not live:
        return Round([], f"every point decided (or out of reach of max_launches) after {launched} launches")
    if launched >= sweep.max_launches:
        k = sum(map(len, live.values()))
        return Round([], f"{k} point{'s' if k != 1 else ''} still undecided at max_launches {launched}")
    if status.get(baseline) != "done":
        return Round([], "the baseline failed; no more launches")
    todo = {baseline: frozenset().union(*live.values()), **{v: frozenset(p) for v, p in live.items()}}
    return Round([(v, todo[v]) for v in status if v in todo])

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

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from ..config import SweepConfig
from .decision import MeasuredInterval, Outcome, classify, look_alpha, units_to_decide, widen


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


def undecided_points(cells: pd.DataFrame, sweep: SweepConfig, min_speedup: float) -> dict[str, set[str]]:
    """Per drafter, the point ids worth another launch: valid cells whose (always-valid) interval decides
    nothing yet, but would within max_launches if their estimate and variance held (decision.units_to_decide
    at the per-look alpha). A point that cannot be decided so (an estimate at m itself) is not chased."""
    out: dict[str, set[str]] = {}
    mine = cells[~cells["is_baseline"].astype(bool) & cells["valid"].astype(bool)]
    alpha = look_alpha(looks(sweep))
    for _, r in mine.iterrows():
        lo, hi, df = float(r["speedup_ci_low"]), float(r["speedup_ci_high"]), float(r["speedup_ci_df"])
        if classify(lo, hi, min_speedup) is not Outcome.UNDECIDED:
            continue
        more = units_to_decide(MeasuredInterval(lo, hi, df, int(r["launches"])), min_speedup,
                               cap=sweep.max_launches, alpha=alpha)
        if more.units is not None:
            out.setdefault(str(r["variant"]), set()).add(str(r["point_id"]))
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
    such drafter on its own undecided points (docs/metrics.md, "Sequential measurement"). `status`: each
    variant's run status in launch order (only "done" variants are launched again). The runner and
    benchmarks/decision_cost.py both decide by this function."""
    open_points = undecided_points(always_valid(cells, sweep), sweep, min_speedup)
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

"""The break-even table: per non-baseline variant and point (all but concurrency), where the speedup
crosses 1.0 as concurrency grows. Its words ("never pays", "pays everywhere") are claims about every level of
a curve, so they are read from the intervals re-drawn at the drafter's secondary family's level
(decide.family: max-t over the drafter's points, or Bonferroni over them), family-wise at 2.5% per side."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from specbench.decide import crossing
from specbench.decide.family import FamilyLevel
from specbench.metrics.common import NAN

BREAK_EVEN_GROUP = ["variant", "category", "input_len", "output_len", "temperature"]
BREAK_EVEN_COLUMNS = BREAK_EVEN_GROUP + [
    "break_even_concurrency",
    "status",
    "verdict",
    "uncertain_from",
    "last_confident",
]


def break_even_table(cells: pd.DataFrame, baseline: str | None = None,
                     caps: Mapping[str, int] | None = None,
                     levels: Mapping[str, FamilyLevel] | None = None) -> pd.DataFrame:
    """One row per non-baseline variant x category x input_len x output_len x temperature: where the
    speedup crosses 1.0 as concurrency grows (stats.break_even). Invalid cells count as missing. `caps`:
    variant -> max_concurrency for the variants not measured above it (their verdict says so). `levels`:
    variant -> its secondary family's level, at which its points' 95% intervals are re-drawn first (a variant
    without one: the per-point 95% intervals, and the verdict says "per point")."""
    if cells.empty:
        return pd.DataFrame(columns=BREAK_EVEN_COLUMNS)
    is_base = cells["variant"] == baseline if baseline is not None else cells["is_baseline"].astype(bool)
    rows = []
    for key, g in cells[~is_base].groupby(BREAK_EVEN_GROUP, dropna=False, sort=True):
        g = g.sort_values("concurrency")
        lows, highs = g["speedup_ci_low"].astype(float).tolist(), g["speedup_ci_high"].astype(float).tolist()
        level = (levels or {}).get(str(key[0]))
        if level is not None:
            dfs = g["speedup_ci_df"].astype(float).tolist() if "speedup_ci_df" in g else [math.nan] * len(g)
            redrawn = [level.bounds(lo, hi, df if df > 0 else 1e6) for lo, hi, df in zip(lows, highs, dfs)]
            lows, highs = [b[0] for b in redrawn], [b[1] for b in redrawn]
        be = crossing.break_even(g["concurrency"].astype(int).tolist(), g["speedup"].astype(float).tolist(),
                                  lows, highs)
        verdict = be.verdict if level is not None or not any(math.isfinite(x) for x in lows) else \
            f"{be.verdict} (per point: 95% intervals, not family-wise)"
        rows.append(
            dict(
                zip(BREAK_EVEN_GROUP, key),
                break_even_concurrency=NAN if be.break_even_concurrency is None else be.break_even_concurrency,
                status=be.status,
                verdict=capped_verdict(be.status, verdict, (caps or {}).get(str(key[0]))),
                uncertain_from=NAN if be.uncertain_from is None else be.uncertain_from,
                last_confident=NAN if be.last_confident is None else be.last_confident,
            )
        )
    return pd.DataFrame(rows, columns=BREAK_EVEN_COLUMNS)


def capped_verdict(status: str, verdict: str, cap: int | None) -> str:
    """A break-even verdict for a variant measured only up to its max_concurrency `cap` (None: unchanged):
    "pays everywhere" then means up to the cap, not beyond the sweep."""
    if cap is None:
        return verdict
    if status == "pays_everywhere":
        return verdict.replace("(beyond the sweep; ", f"(up to C={cap}, its max_concurrency: not measured above; ")
    return f"{verdict}; not measured above C={cap} (max_concurrency)"

"""The break-even table: per non-baseline variant and point (all but concurrency), where the speedup
crosses 1.0 as concurrency grows."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from specbench.decide import crossing
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
                     caps: Mapping[str, int] | None = None) -> pd.DataFrame:
    """One row per non-baseline variant x category x input_len x output_len x temperature: where the
    speedup crosses 1.0 as concurrency grows (stats.break_even). Invalid cells count as missing. `caps`:
    variant -> max_concurrency for the variants not measured above it (their verdict says so)."""
    if cells.empty:
        return pd.DataFrame(columns=BREAK_EVEN_COLUMNS)
    is_base = cells["variant"] == baseline if baseline is not None else cells["is_baseline"].astype(bool)
    rows = []
    for key, g in cells[~is_base].groupby(BREAK_EVEN_GROUP, dropna=False, sort=True):
        g = g.sort_values("concurrency")
        be = crossing.break_even(
            g["concurrency"].astype(int).tolist(),
            g["speedup"].astype(float).tolist(),
            g["speedup_ci_low"].astype(float).tolist(),
            g["speedup_ci_high"].astype(float).tolist(),
        )
        rows.append(
            dict(
                zip(BREAK_EVEN_GROUP, key),
                break_even_concurrency=NAN if be.break_even_concurrency is None else be.break_even_concurrency,
                status=be.status,
                verdict=capped_verdict(be.status, be.verdict, (caps or {}).get(str(key[0]))),
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

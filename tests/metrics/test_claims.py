"""The primary family's level read from cells.csv (issue 50 item 1): metrics/claims.py, and the table and
legend the report builds from it."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from specbench.decide.decision import t_quantile
from specbench.metrics.claims import claim_shapes, primary_level
from specbench.report.decisions import family_text, verdict_table
from specbench.report.derived import RunData

HISTORY = {"rel_var": 0.042**2, "df": 2.0, "repeat_rel_var": 0.01**2, "repeat_df": 4.0}
POINTS = [("code", 64), ("code", 256), ("chat", 64), ("chat", 256)]


def _cells(low: float, high: float, df: float = 2.0) -> pd.DataFrame:
    """The demo's shape after one calibration: 2 drafters x 3 concurrencies x 4 points, one launch x 1 window
    per variant, every mix interval (low, high) on df."""
    rows = []
    for variant in ("base", "ngram", "draft"):
        for c in (1, 4, 16):
            for cat, out in POINTS:
                row = {"variant": variant, "category": cat, "input_len": math.nan, "output_len": out,
                       "concurrency": c, "temperature": 0.0, "rate": math.nan, "point_id": f"{cat}|{out}|c{c}",
                       "valid": True, "launches": 1, "repeats": 1, "interval_unit": "history", "speedup": 1.0,
                       "speedup_ci_low": math.nan, "speedup_ci_high": math.nan, "mix_points": math.nan}
                if variant != "base":
                    row |= {"speedup": math.sqrt(low * high), "speedup_ci_low": low, "speedup_ci_high": high,
                            "speedup_ci_df": df, "mix_speedup": math.sqrt(low * high), "mix_speedup_ci_low": low,
                            "mix_speedup_ci_high": high, "mix_speedup_ci_df": df, "mix_points": 4,
                            "mix_weight": 0.25}
                rows.append(row)
    return pd.DataFrame(rows)


def _data(cells: pd.DataFrame) -> RunData:
    return RunData(path=Path("."), meta={"baseline": "base", "variants": {}}, environment={}, config={},
                   fairness=None, cells=cells, break_even=pd.DataFrame(), history=HISTORY)


def test_the_demo_table_after_one_calibration_is_read_at_the_max_t_level() -> None:
    cells = _cells(1.10, 1.50)
    k, shapes = claim_shapes(cells, ["ngram", "draft"], "base")
    assert k == 6 and shapes is not None and {s.points for s in shapes} == {4.0}
    level = primary_level(cells, ["ngram", "draft"], "base", HISTORY)
    assert level.method.startswith("max-t") and level.one < t_quantile(2.0, 0.025 / 6)
    assert primary_level(cells, ["ngram", "draft"], "base", None).method.startswith("Bonferroni")
    text = family_text(_data(cells))
    assert f"t = {level.one:.2f} for adopt and slower" in text and "Bonferroni" not in text


def test_a_claim_bonferroni_wastes_is_decided_at_the_familys_level() -> None:
    """A 95% interval on 2 df whose low end, re-drawn at Bonferroni's t_2(2.5%/6) = 10.9, reaches below 1.05
    but at the family's max-t level (about 5) clears it: adopt."""
    centre, se = math.log(1.3), 0.03  # on the log scale; the 95% half-width is t_2(2.5%) se = 4.30 se
    half = t_quantile(2.0) * se
    cells = _cells(math.exp(centre - half), math.exp(centre + half))
    assert math.exp(centre - t_quantile(2.0, 0.025 / 6) * se) < 1.05 < math.exp(centre - 6.0 * se)
    table = verdict_table(_data(cells))
    assert table is not None and table.rows == [["ngram", "adopt", "adopt", "adopt"], ["draft", "adopt", "adopt",
                                                                                      "adopt"]]

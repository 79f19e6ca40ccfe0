"""The sequential rule's pure pieces (decide/stopping.py): the next round, and which points are chased."""

from __future__ import annotations

import math

import pandas as pd

from specbench.config import SweepConfig
from specbench.decide.decision import MeasuredInterval, look_alpha, units_to_decide
from specbench.decide.stopping import always_valid, next_round, within_reach

SWEEP = SweepConfig(output_lens=[64], concurrency=[1], launches=2, until="decided", max_launches=10)
STATUS = {"base": "done", "d": "done"}


def _cells(low: float, high: float, df: float = 10.0) -> pd.DataFrame:
    return pd.DataFrame([{"variant": "d", "point_id": "p", "is_baseline": False, "valid": True, "launches": 2,
                          "speedup_ci_low": low, "speedup_ci_high": high, "speedup_ci_df": df}])


def test_a_point_the_report_decides_is_not_chased() -> None:
    """next_round reads the always-valid cells as derive_cells gives them, without widening them again
    (the runner used to: a point the report called adopt was launched again)."""
    valid = always_valid(_cells(1.15, 1.4), SWEEP)
    assert valid["speedup_ci_low"].iloc[0] > 1.05  # decided (adopt) as the report reads it
    nxt = next_round(valid, SWEEP, 1.05, "base", 2, STATUS)
    assert nxt.todo == [] and "every point decided" in nxt.reason


def test_an_undecided_point_launches_the_baseline_then_the_drafter() -> None:
    nxt = next_round(_cells(0.98, 1.2), SWEEP, 1.05, "base", 2, STATUS)
    assert nxt.todo == [("base", frozenset({"p"})), ("d", frozenset({"p"}))]
    assert next_round(_cells(0.98, 1.2), SWEEP, 1.05, "base", 10, STATUS).todo == []  # max_launches reached
    assert next_round(_cells(0.98, 1.2), SWEEP, 1.05, "base", 2, {"base": "failed", "d": "done"}).todo == []


def test_a_point_estimated_near_m_is_chased_while_one_se_away_would_decide() -> None:
    """Projected at its estimate alone (1.07, next to m = 1.05) 10 launches do not decide it; one standard
    error away they would: it is chased. An estimate at m itself is not (it is out of reach either way)."""
    alpha = look_alpha(9)
    near = MeasuredInterval(1.07 * math.exp(-0.08), 1.07 * math.exp(0.08), 10.0, 2)
    assert units_to_decide(near, 1.05, cap=10, alpha=alpha).units is None
    assert within_reach(near, 1.05, 10, alpha)
    at_m = MeasuredInterval(1.05 * math.exp(-0.08), 1.05 * math.exp(0.08), 10.0, 2)
    assert not within_reach(at_m, 1.05, 10, alpha)

"""The verdict's first lines: one word per drafter and concurrency, from intervals whose outcome is known by
construction; and the undecided points' "how many more launches" sentence."""

from __future__ import annotations

import math

from specbench.metrics.warnings import WarningCode
from specbench.report.decisions import undecided_advice, verdict_table
from tests.report.test_verdict import curve_rows, gate, run_data

WIN, SAME, LOSE, OPEN = (1.3, 1.2, 1.4), (1.0, 0.98, 1.02), (0.7, 0.6, 0.8), (1.05, 0.98, 1.12)


def table_rows(rows: list[dict]) -> list[list[str]]:
    t = verdict_table(run_data(rows))
    assert t is not None and t.columns == ["drafter", "C=1", "C=2", "C=4", "C=8"]
    return t.rows


def test_one_word_per_cell() -> None:
    assert table_rows(curve_rows((WIN, SAME, LOSE, OPEN))) == [["spec", "adopt", "same", "slower", "undecided"]]


def test_points_of_one_concurrency_combine() -> None:
    rows = curve_rows((WIN, WIN, SAME, OPEN)) + curve_rows((WIN, LOSE, SAME, WIN), output_len=256)
    assert table_rows(rows) == [["spec", "adopt", "mixed", "same", "undecided"]]


def test_a_cell_whose_categories_decide_differently_names_them() -> None:
    """Issue 30 item 13: the table said "undecided" where the sentence said "adopt ... on rewrite"."""
    rows = curve_rows((WIN, WIN, OPEN, LOSE), category="rewrite") + \
        curve_rows((OPEN, LOSE, OPEN, LOSE), category="creative")
    assert table_rows(rows) == [["spec", "adopt: rewrite", "adopt: rewrite; slower: creative", "undecided",
                                 "slower"]]


def test_a_gate_blocks_the_word_adopt_and_nothing_else() -> None:
    rows = curve_rows((WIN, SAME, LOSE, WIN), warnings=gate(WarningCode.DRAFTER_INACTIVE))
    assert table_rows(rows) == [["spec", "blocked", "same", "slower", "blocked"]]
    rows = curve_rows((WIN, SAME, LOSE, WIN), warnings=gate(WarningCode.HIGH_VARIANCE))  # blocks nothing
    assert table_rows(rows) == [["spec", "adopt", "same", "slower", "adopt"]]


def test_without_launch_variance_nothing_is_decided() -> None:
    rows = curve_rows((WIN, SAME, LOSE, OPEN), interval_unit="repeat", launches=1, launch_cv=math.nan)
    assert table_rows(rows) == [["spec", "undecided", "undecided", "undecided", "undecided"]]


def test_undecided_advice_counts_the_launches_that_would_decide() -> None:
    # OPEN: centre ln 1.05 -> no interval decides it. (1.02, 1.41) on 4 df, 3 launches: centre 0.1817,
    # se = ln(1.41 / 1.02) / (2 t_4 = 5.553) = 0.0583, need 0.1817 - ln 1.05 = 0.1329; at 80% power
    # n = 6: (t_10(0.975) 2.228 + t_10(0.8) 0.879) x 0.0583 x sqrt(3/6) = 0.128 < 0.1329 (n = 5: 0.144, not
    # yet; at 50% power, the centred interval alone, n = 4 would do: a coin toss, issue 33 item 6)
    rows = curve_rows((OPEN, (1.2, 1.02, 1.41)), levels=(1, 2), speedup_ci_df=4.0)
    assert undecided_advice(run_data(rows), "spec", 1.05) == (
        "2 points undecided: 6 launches per variant would decide 1 of them with 80% power if their estimates and "
        "variance held; 1 would need more than 50 (estimate too close to 1.05)")
    assert undecided_advice(run_data(curve_rows((WIN, WIN))), "spec", 1.05) == ""


def test_undecided_advice_names_launches_when_the_launch_variance_comes_from_the_history() -> None:
    """One launch, its launch component from the variance history: more repeats inside that launch would
    not shrink it, so the advice counts launches (one per variant now)."""
    rows = curve_rows(((1.2, 1.02, 1.41),), levels=(1,), speedup_ci_df=4.0, launches=1, repeats=1,
                      interval_unit="history")
    advice = undecided_advice(run_data(rows), "spec", 1.05)
    assert "launches per variant would decide 1 of them" in advice and "repeats" not in advice

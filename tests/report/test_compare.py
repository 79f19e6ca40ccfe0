"""compare(): the per-cell regression gate between two synthetic runs."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from specbench.report.compare import Estimate, classify, compare, gate, launch_variance_carried
from specbench.report.compare_markdown import comparison_markdown
from specbench.shared.errors import RunDirError
from tests.fixtures_report import make_run


@pytest.fixture
def before(tmp_path: Path) -> Path:
    return make_run(tmp_path / "a", run_id="run-a")


def test_identical_runs_regress_nothing(before: Path) -> None:
    cmp = compare(before, before)
    assert cmp.regressed == []
    n = cmp.counts()
    assert n["within_noise"] == 40 and n["regressed"] == n["improved"] == 0  # baseline cells are not compared
    assert "**0 regressed**" in comparison_markdown(cmp) and "No cell regressed" in comparison_markdown(cmp)


def test_worse_drafter_regresses_and_is_named(before: Path, tmp_path: Path) -> None:
    after = make_run(tmp_path / "b", ngram_scale=0.8, run_id="run-b")
    cmp = compare(before, after)
    names = {c.name for c in cmp.regressed}
    assert names and all(n.startswith("ngram ") for n in names)
    assert "ngram code|in-|out64|c1|t0" in names
    # every ngram cell dropped 20%; 18 of the 20 establish it beyond the 5% threshold (issue 41: the test is
    # against ln 0.95, not 0), the other two, with the widest intervals, stay within noise
    assert len(names) == 18
    assert all(c.speedup_change == pytest.approx(-0.2) for c in cmp.regressed)
    md = comparison_markdown(cmp)
    assert md.index("Regressed") < md.index("Within noise")
    assert "code\\|in-\\|out64\\|c1\\|t0" in md and "1.60 [1.55, 1.65]" in md and "-20.0%" in md
    assert "<b>" not in md  # the hostile category is escaped


def test_small_drop_is_within_noise(before: Path, tmp_path: Path) -> None:
    after = make_run(tmp_path / "b", ngram_scale=0.97)
    cmp = compare(before, after)
    assert cmp.regressed == []
    assert compare(after, before).counts()["improved"] == 0


def test_cells_only_in_one_run(before: Path, tmp_path: Path) -> None:
    after = make_run(tmp_path / "b")
    cells = pd.read_csv(after / "cells.csv")
    cells[cells["variant"] != "draft_model"].to_csv(after / "cells.csv", index=False)
    cmp = compare(before, after)
    assert cmp.counts()["only_a"] == 20 and cmp.regressed == []
    assert "Only in one run" in comparison_markdown(cmp)


def test_rule() -> None:
    def launches(v: float, lo: float, hi: float) -> Estimate:  # 3 launches a side: Welch df 4
        return Estimate(v, lo, hi, df=4, launch_variance=True)

    a = launches(1.5, 1.45, 1.55)
    assert classify(a, launches(1.2, 1.15, 1.25), 0.05)[0] == "regressed"
    assert classify(a, launches(1.2, 0.8, 1.8), 0.05)[0] == "within_noise"  # not established
    assert classify(a, launches(1.43, 1.42, 1.44), 0.05)[0] == "within_noise"  # established, but under 5%
    assert classify(a, launches(1.8, 1.75, 1.85), 0.05)[0] == "improved"
    # the same intervals without launch variance (one launch, no history): indicative, never regressed
    assert classify(Estimate(1.5, 1.45, 1.55, df=4), Estimate(1.2, 1.15, 1.25, df=4), 0.05)[0] == "indicative_drop"
    assert classify(Estimate(1.5), Estimate(1.3), 0.05)[0] == "indicative_drop"  # no intervals: threshold alone
    assert classify(Estimate(1.5), Estimate(1.8), 0.05)[0] == "indicative_gain"
    assert classify(Estimate(1.5), Estimate(1.45), 0.05)[0] == "within_noise"
    assert classify(Estimate(math.nan), Estimate(1.0), 0.05)[0] == "undefined"


def test_holm_corrects_over_the_cells() -> None:
    """One cell's drop beyond the threshold at p ~ 0.01 is established alone, not among 30 cells where the
    rest did not move."""
    a = Estimate(1.5, 1.40, 1.607, df=8, launch_variance=True)
    b = Estimate(1.26, 1.176, 1.350, df=8, launch_variance=True)
    alone = gate([(a, b)], 0.05)[0]
    assert alone[0] == "regressed" and "Holm over 1 cell" in alone[1]
    among = gate([(a, b)] + [(a, a)] * 29, 0.05)
    assert among[0][0] == "within_noise" and "Holm over 30 cells" in among[0][1]


def test_regressed_means_beyond_the_threshold_not_beyond_zero() -> None:
    """Issue 41: a true 3% drop under a 5% threshold, measured tightly enough that its t test against 0
    rejects, was called regressed. The test is against ln(1 - threshold): a drop established beyond 5%."""
    from specbench.decide.change import Side, beyond, change_test

    a = Estimate(1.5, 1.485, 1.515, df=18, launch_variance=True)
    b3 = Estimate(1.455, 1.44, 1.47, df=18, launch_variance=True)  # -3%: below 0 by far, not below -5%
    t = change_test(a.side, b3.side)
    assert t is not None and t.p_drop < 1e-3 and beyond(t, 0.05)[0] > 0.5
    status, reason = classify(a, b3, 0.05)
    assert status == "within_noise" and "not established beyond 5%" in reason
    b10 = Estimate(1.35, 1.336, 1.364, df=18, launch_variance=True)  # -10%: beyond -5%, established
    assert classify(a, b10, 0.05)[0] == "regressed"
    assert beyond(change_test(Side(1.0, 0.99, 1.01, 18), Side(0.95, 0.94, 0.96, 18)), 0.05)[0] == \
        pytest.approx(0.5, abs=0.01)  # a drop of exactly the threshold sits on the null


def test_no_regression_only_with_power_else_exit_3() -> None:
    """Exit 0 needs 80% power against a drop of 9.75% (one threshold beyond 5%) in every compared cell;
    otherwise exit 3, naming the drop the gate could have detected. A variance history that makes one-launch
    cells established (df 4, wide) no longer silences the gate (issue 41)."""
    from specbench.decide.change import detectable_drop, required_drop
    from specbench.report.compare import EXIT_OK, EXIT_UNDERPOWERED, CellChange, exit_code
    from specbench.report.compare_markdown import underpowered_text

    assert required_drop(0.05) == pytest.approx(0.0975)
    tight = Estimate(1.5, 1.485, 1.515, df=18, launch_variance=True)
    wide = Estimate(1.5, 1.35, 1.67, df=4, launch_variance=True, history=True)  # 1 launch + a df-4 history

    def code(pairs: list[tuple[Estimate, Estimate]]) -> tuple[int, list[CellChange]]:
        changes = [CellChange("ngram", f"p{i}", d.status, d.reason, a, b, detectable=d.detectable, powered=d.powered)
                   for i, ((a, b), d) in enumerate(zip(pairs, gate(pairs, 0.05)))]
        return exit_code(changes), changes

    assert code([(tight, tight)] * 30)[0] == EXIT_OK
    got, changes = code([(wide, wide)] * 30)
    assert got == EXIT_UNDERPOWERED and all(c.status == "within_noise" and c.underpowered for c in changes)
    assert changes[0].detectable > 0.3  # what it could have seen: a drop of over 30%
    assert "could have detected a drop of" in underpowered_text(changes, 0.05)
    got, changes = code([(tight, tight)] * 29 + [(wide, wide)])  # every compared cell must be powered
    assert got == EXIT_UNDERPOWERED and [c.name for c in changes if c.underpowered] == ["ngram p29"]
    # one launch without a history: no change can be established, so no power either
    assert code([(Estimate(1.5, 1.45, 1.55, df=4), Estimate(1.5, 1.45, 1.55, df=4))])[0] == EXIT_UNDERPOWERED
    # the formula at a known point: se 0.01 on infinite df, one cell, alpha 5%: 1 - 0.95 exp(-(1.645 + 0.842) 0.01)
    assert detectable_drop(0.01, math.inf, 0.05, 0.05) == pytest.approx(1 - 0.95 * math.exp(-0.024866), rel=1e-3)


def test_launch_variance_is_read_from_the_interval_units() -> None:
    assert launch_variance_carried({"interval_unit": "launch", "launches": 2}) == (True, False)
    assert launch_variance_carried({"interval_unit": "repeat+calibration", "launches": 1}) == (True, True)
    assert launch_variance_carried({"interval_unit": "history"}) == (True, True)
    assert launch_variance_carried({"interval_unit": "repeat", "launches": 1}) == (False, False)
    assert launch_variance_carried({"launches": 3}) == (True, False)  # a run from before interval_unit


def test_missing_cells_is_an_error(tmp_path: Path, before: Path) -> None:
    with pytest.raises(RunDirError):
        compare(before, tmp_path)


def test_cli_message_names_the_cell(before: Path, tmp_path: Path) -> None:
    cmp = compare(before, make_run(tmp_path / "b", ngram_scale=0.8))
    assert str(cmp.regressed[0]) == "ngram code|in-|out64|c1|t0 (1.60 [1.55, 1.65] -> 1.28 [1.23, 1.33], -20.0%)"

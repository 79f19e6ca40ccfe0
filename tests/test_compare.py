"""compare(): the per-cell regression gate between two synthetic runs."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from fixtures_report import make_run

from specbench.report.compare import Estimate, classify, compare, gate, launch_variance_carried
from specbench.shared.errors import RunDirError


@pytest.fixture
def before(tmp_path: Path) -> Path:
    return make_run(tmp_path / "a", run_id="run-a")


def test_identical_runs_regress_nothing(before: Path) -> None:
    cmp = compare(before, before)
    assert cmp.regressed == []
    n = cmp.counts()
    assert n["within_noise"] == 40 and n["regressed"] == n["improved"] == 0  # baseline cells are not compared
    assert "**0 regressed**" in cmp.to_markdown() and "No cell regressed" in cmp.to_markdown()


def test_worse_drafter_regresses_and_is_named(before: Path, tmp_path: Path) -> None:
    after = make_run(tmp_path / "b", ngram_scale=0.8, run_id="run-b")
    cmp = compare(before, after)
    names = {c.name for c in cmp.regressed}
    assert names and all(n.startswith("ngram ") for n in names)
    assert "ngram code|in-|out64|c1|t0" in names
    assert len(names) == 20  # every ngram cell dropped 20% with its interval clear of A's
    assert all(c.speedup_change == pytest.approx(-0.2) for c in cmp.regressed)
    md = cmp.to_markdown()
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
    assert "Only in one run" in cmp.to_markdown()


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
    """One cell's drop at p ~ 0.01 is established alone, not among 30 cells where the rest did not move."""
    a = Estimate(1.5, 1.40, 1.607, df=8, launch_variance=True)
    b = Estimate(1.35, 1.26, 1.446, df=8, launch_variance=True)
    alone = gate([(a, b)], 0.05)[0]
    assert alone[0] == "regressed" and "Holm over 1 cell" in alone[1]
    among = gate([(a, b)] + [(a, a)] * 29, 0.05)
    assert among[0][0] == "within_noise" and "Holm over 30 cells" in among[0][1]


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

"""compare(): the per-cell regression gate between two synthetic runs."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from fixtures_report import make_run

from specbench.errors import RunDirError
from specbench.report.compare import Estimate, classify, compare


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
    a = Estimate(1.5, 1.45, 1.55)
    assert classify(a, Estimate(1.2, 1.15, 1.25), 0.05)[0] == "regressed"
    assert classify(a, Estimate(1.2, 1.0, 1.5), 0.05)[0] == "within_noise"  # intervals overlap
    assert classify(a, Estimate(1.43, 1.42, 1.44), 0.05)[0] == "within_noise"  # clear, but under 5%
    assert classify(a, Estimate(1.8, 1.75, 1.85), 0.05)[0] == "improved"
    assert classify(Estimate(1.5), Estimate(1.3), 0.05)[0] == "regressed"  # no intervals: threshold alone
    assert classify(Estimate(1.5), Estimate(1.45), 0.05)[0] == "within_noise"
    assert classify(Estimate(math.nan), Estimate(1.0), 0.05)[0] == "undefined"


def test_missing_cells_is_an_error(tmp_path: Path, before: Path) -> None:
    with pytest.raises(RunDirError):
        compare(before, tmp_path)


def test_cli_message_names_the_cell(before: Path, tmp_path: Path) -> None:
    cmp = compare(before, make_run(tmp_path / "b", ngram_scale=0.8))
    assert str(cmp.regressed[0]) == "ngram code|in-|out64|c1|t0 (1.60 [1.55, 1.65] -> 1.28 [1.23, 1.33], -20.0%)"

"""What a drafter's stated error rate assumes and the run could not test: one launch (the history's launch
variance), one window a cell (its repeat variance too), a side reused from another run (no session shift in
any interval). Each is said in the drafter's opening sentence and once in the family's definition."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from specbench.report.assumptions import condition, unchecked
from specbench.report.decisions import family_text
from specbench.report.derived import RunData, normalize_cells
from specbench.report.opening import drafter_sentence, plain
from tests.report.test_opening import SECONDS, WIN, cell


def run(unit: str, launches: int, *, base: dict | None = None) -> RunData:
    rows = [cell(v, c, WIN if v == "spec" else None, launches=launches, unit=unit) for v in ("spec", "base")
            for c in (1, 4)]
    return RunData(path=Path("."), meta={"baseline": "base", "variants": {"base": base or SECONDS, "spec": SECONDS}},
                   environment={}, config={}, fairness=None, cells=normalize_cells(pd.DataFrame(rows)),
                   break_even=pd.DataFrame())


def test_a_run_with_launches_measured_assumes_nothing_untested() -> None:
    data = run("launch", 3)
    assert unchecked(data, "spec") == [] and condition(data, "spec") == ""
    assert "could not test" not in family_text(data)
    assert "if " not in plain(drafter_sentence(data, "spec"))


def test_one_window_a_cell_leaves_both_history_components_untested() -> None:
    data = run("history", 1)
    assert unchecked(data, "spec") == [
        "this run's launches, spec's too, vary as the baseline's in the variance history "
        "(untested: one launch a variant, one window a cell)"]
    assert condition(data, "spec").startswith(", if this run's launches")
    assert "if this run's launches, spec's too" in plain(drafter_sentence(data, "spec"))
    assert "which this run could not test" in family_text(data)


def test_repeats_in_a_launch_test_the_repeat_component_so_only_the_launch_one_is_said() -> None:
    said = unchecked(run("repeat+calibration", 1), "spec")
    assert len(said) == 1 and said[0].endswith("(untested: one launch a variant)")


def test_a_reused_baseline_says_its_session_even_with_launches_measured() -> None:
    data = run("launch", 3, base={**SECONDS, "status": "reused", "reused_from": "/runs/old-run"})
    assert unchecked(data, "spec") == ["base, reused from old-run, has not shifted since (untested: another session)"]
    assert plain(drafter_sentence(data, "spec")).endswith(
        "if base, reused from old-run, has not shifted since (untested: another session).")

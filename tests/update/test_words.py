"""update.words: the small EAGLE-3 head of the stored EPYC run as an update of its other head: its words per
level from the other head's step cost and its own acceptance at C=16, next to its full matrix's."""

from __future__ import annotations

import pandas as pd
import pytest

from specbench.report import render
from specbench.shared.errors import UsageError
from specbench.update.level import word_of
from specbench.update.words import UPDATE_COLUMNS, update_words, word_lines, write_update
from tests.fixtures_update import RUN, update_run


def _full_words(variant: str) -> dict[int, str]:
    """The full matrix's word per level (the same pooling over categories: geometric means)."""
    from specbench.update.level import measured_at

    cells = pd.read_csv(RUN / "cells.csv")
    return {c: word_of(*measured_at(cells, variant, c)[1:], 1.05) for c in (1, 4, 16)}


def test_the_decided_levels_carry_the_full_matrixs_words(tmp_path):
    words = update_words(RUN, update_run(tmp_path), "eagle3", "eagle3")
    assert list(words.columns) == UPDATE_COLUMNS
    assert words["concurrency"].tolist() == [1, 4, 16]
    full = _full_words("eagle3_small")
    decided = words[words["word"] != "undecided"]
    assert len(decided) >= 2 and (decided["source"] == "predicted").all()
    assert all(full[int(r["concurrency"])] == r["word"] for _, r in decided.iterrows())
    # C=1 is not in the update's run: undecided by the prediction, it is left to measure
    first = words.iloc[0]
    assert (first["word"], first["source"]) == ("undecided", "to measure")


def test_update_csv_is_in_the_report_with_each_words_source(tmp_path):
    new = update_run(tmp_path)
    write_update(new, update_words(RUN, new, "eagle3", "eagle3"))
    render(new, plots=False)
    text = (new / "report.md").read_text()
    assert "## Update: a new head decided from its acceptance" in text
    assert "| eagle3 | 4 | slower | predicted |" in text
    assert "2 of 3 words predicted" in text


def test_the_console_lines_say_predicted_or_measured(tmp_path):
    lines = word_lines(update_words(RUN, update_run(tmp_path), "eagle3", "eagle3"))
    assert lines[0] == "  eagle3 C=1: undecided (to measure, n/a)"
    assert lines[1].startswith("  eagle3 C=4: slower (predicted, ")


def test_a_run_without_a_step_cost_is_refused(tmp_path):
    new = update_run(tmp_path)
    with pytest.raises(UsageError, match="no cells.csv and decomposition.csv"):
        update_words(new, new, "eagle3", "eagle3")

"""The console opens like the report: after the run directory, one sentence per drafter (report/opening.py),
read from the derived files only."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from rich.console import Console

from specbench.report.derived import load_report_data
from specbench.report.opening import opening_lines, plain
from specbench.report.terminal import print_summary

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "demo-cpu-3launches"
DERIVED = ("cells.csv", "run.json", "config.yaml", "environment.json", "break_even.csv", "variance_history.json")


def test_the_console_prints_the_sentences_first(tmp_path: Path) -> None:
    for name in DERIVED:  # the derived files only: no requests.jsonl, no windows.jsonl
        shutil.copy(EXAMPLE / name, tmp_path / name)
    out = io.StringIO()
    print_summary(tmp_path, Console(file=out, width=400))
    lines = out.getvalue().splitlines()
    sentences = [plain(p) for p in opening_lines(load_report_data(tmp_path))]
    assert len(sentences) == 2 and sentences[0].startswith("ngram: ") and sentences[1].startswith("draft_model: ")
    assert lines[0].startswith("run directory: ") and lines[1:3] == sentences
    assert "would take 6-9 launches per variant" in lines[2]


def test_no_cells_no_sentences(tmp_path: Path) -> None:
    out = io.StringIO()
    print_summary(tmp_path, Console(file=out, width=200))
    assert out.getvalue().splitlines()[1:] == ["no completed cells"]

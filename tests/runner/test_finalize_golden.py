"""Reports of existing run directories are identical before and after a change to how the analysis reads
the raw records. The derived files committed next to the raw ones were written by the code before the
columnar store (docs/examples/demo-cpu-3launches and demo-cpu-probe: real CPU runs; tests/golden/synthetic-run:
a synthetic run with a warmup request, a superseded attempt and an unfinished window). Rendering a copy must give the
same bytes: first from requests.jsonl alone (the columnar store is rebuilt), then again from the store."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from specbench.records.rundir import RunDir
from specbench.runner import finalize

REPO = Path(__file__).resolve().parents[2]
RUNS = [REPO / "docs/examples/demo-cpu-3launches", REPO / "docs/examples/demo-cpu-probe",
        REPO / "tests/golden/synthetic-run"]
DERIVED = ("cells.csv", "break_even.csv", "acceptance.csv", "reconciliation.csv", "decomposition.csv", "report.md",
           "report.html")


@pytest.mark.parametrize("src", RUNS, ids=lambda p: p.name)
def test_report_identical_to_golden(src: Path, tmp_path: Path) -> None:
    run = tmp_path / src.name
    shutil.copytree(src, run)
    for name in DERIVED:
        (run / name).unlink()
    for attempt in ("from requests.jsonl", "from the columnar store"):
        finalize(RunDir(run))
        for name in DERIVED:
            assert (run / name).read_bytes() == (src / name).read_bytes(), f"{name} differs ({attempt})"

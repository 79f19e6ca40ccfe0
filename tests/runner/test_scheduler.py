"""Counterbalanced launch order (ABBA) and the drift check (issue 33, item 4).

A stand-in baseline whose launches slow down 10, 11, 12, 13 ms per token (a warming machine): the runner
launches A B B A A B B A, run.json says so (resume rebuilds the same order from it), launch_drift.csv holds
the baseline's launch speeds against time, and the report warns of the trend. The slope test itself on
known answers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.metrics.drift import trend
from specbench.records.rundir import RunDir
from specbench.runner import RunOptions, finalize, run_matrix
from specbench.runner.scheduler import launch_order
from specbench.runner.state import RunState
from specbench.shared.schema import WindowRecord
from tests.conftest import force_service_times, set_launch_faults, standin_config

MS = {"base": [10.0, 11.0, 12.0, 13.0], "ngram": [8.0, 8.0, 8.0, 8.0]}


def test_the_slope_test_on_known_answers() -> None:
    steady = trend([1.0, 1.02, 0.99, 1.01, 1.0])
    assert not steady.trending and steady.df == 3
    rising = trend([1.0, 1.011, 1.019, 1.031, 1.04])  # about 1% per launch, little scatter
    assert rising.trending and rising.slope == pytest.approx(math.log(1.04) / 4, rel=0.05)
    assert math.isnan(trend([1.0, 1.1]).p) and not trend([1.0, 1.1]).trending  # 2 launches: no test


def test_resume_keeps_the_order_the_run_started_with(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    state = RunState.new()
    state.launch_order = "abba"
    state.save(rd)
    assert RunState.load(rd).launch_order == "abba"
    old = json.loads(rd.meta.read_text())
    del old["launch_order"]  # a run directory from before the counterbalanced order
    rd.meta.write_text(json.dumps(old))
    assert RunState.load(rd).launch_order is None
    assert [(u.variant, u.launch) for u in launch_order(["a", "b"], 2, "interleaved")] == [
        ("a", 1), ("b", 1), ("a", 2), ("b", 2)]


def test_abba_order_and_a_drifting_baseline_is_reported(tmp_path: Path, model_dir: Path, port: int,
                                                         no_survivors) -> None:
    data = standin_config(model_dir, port, sweep={"concurrency": [1], "output_lens": [16], "launches": 4})
    for v, ms in MS.items():
        set_launch_faults(model_dir.parent, v, [["--ms-per-token", f"{m:g}", "--paced"] for m in ms])
    out = tmp_path / "run"
    result = run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True))
    no_survivors()
    assert set(result.status.values()) == {"done"}
    assert json.loads((out / "run.json").read_text())["launch_order"] == "abba"
    order = [(w.variant, w.launch) for w in sorted(RunDir(out).window_records(), key=lambda w: w.t_start)]
    assert list(dict.fromkeys(order)) == [("base", 1), ("ngram", 1), ("ngram", 2), ("base", 2),
                                          ("base", 3), ("ngram", 3), ("ngram", 4), ("base", 4)]

    def ms(w: WindowRecord) -> float:
        return MS[w.variant][w.launch - 1]

    force_service_times(out, ms)  # timings exactly as set: the launch speeds are known numbers
    finalize(RunDir(out))
    drift = pd.read_csv(out / "launch_drift.csv")
    assert list(drift["launch"]) == [1, 2, 3, 4] and (drift["variant"] == "base").all()
    speed = [1 / m for m in MS["base"]]
    mean = sum(speed) / 4  # one window per launch of the one cell: its mean over launches
    assert list(drift["effect"]) == pytest.approx([s / mean for s in speed], rel=1e-3)
    report = (out / "report.md").read_text()
    section = report.split("## Drift over the run")[1].split("\n## ")[0]
    assert "the baseline's launch speeds trend over the run" in section
    assert "counterbalanced (ABBA" in section

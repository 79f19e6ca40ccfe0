"""Adaptive repeats: a cell is repeated until its throughput interval is narrow enough, or a cap."""

from __future__ import annotations

from conftest import standin_config
from specbench.config import parse_config
from specbench.rundir import load_run
from specbench.runner import RunOptions, run_matrix


def repeats_per_cell(out) -> set[int]:
    return set(load_run(out).cells.repeats)


def test_stops_when_the_interval_is_narrow(tmp_path, model_dir, port, no_survivors):
    data = standin_config(model_dir, port, sweep={
        "concurrency": [1], "repeats": 1, "adaptive": {"target_rel_half_width": 0.5, "max_repeats": 6}})
    # A service time of 20 ms per token (8 tokens: 160 ms a request) makes the window throughput the
    # server's pace, not the shared machine's scheduling noise: repeats agree within a few percent, far
    # inside the +-50% target, so the interval is narrow as soon as it exists.
    data["engine"]["command"] += ["--ms-per-token", "20"]
    run_matrix(parse_config(data), RunOptions(out=tmp_path / "r", skip_preflight=True))
    assert repeats_per_cell(tmp_path / "r") == {3}  # the first point at which an interval exists
    no_survivors()


def test_goes_to_the_cap_when_it_never_narrows(tmp_path, model_dir, port, no_survivors):
    data = standin_config(model_dir, port, sweep={
        "concurrency": [1], "repeats": 1, "adaptive": {"target_rel_half_width": 1e-9, "max_repeats": 4}})
    run_matrix(parse_config(data), RunOptions(out=tmp_path / "r", skip_preflight=True))
    assert repeats_per_cell(tmp_path / "r") == {4}
    # a resume of the finished run has nothing left to measure
    again = run_matrix(parse_config(data), RunOptions(out=tmp_path / "r", resume=True, skip_preflight=True))
    assert set(again.status.values()) == {"done"}
    assert repeats_per_cell(tmp_path / "r") == {4}
    no_survivors()

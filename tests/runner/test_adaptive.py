"""Adaptive repeats: a cell is repeated until its throughput interval is narrow enough, or a cap."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import cycle

import pytest

from specbench.config import parse_config
from specbench.decide.adaptive import ADAPTIVE_MIN_REPEATS
from specbench.records.loaded_run import load_run
from specbench.runner import RunOptions, run_matrix, unit
from tests.conftest import standin_config


def repeats_per_cell(out) -> set[int]:
    return set(load_run(out).cells.repeats)


@pytest.fixture
def window_throughputs(monkeypatch) -> Callable[[list[float]], list[float]]:
    """The stopping rule's input, forced: each window's measured throughput (computed by specbench from
    its records, and required to be a real positive number) is replaced by the next of the given values,
    so the rule sees known numbers rather than the shared machine's scheduling noise. Returns the list
    of values the rule was given."""
    given: list[float] = []

    def force(values: list[float]) -> list[float]:
        it: Iterator[float] = cycle(values)
        real = unit.window_throughput

        def forced(records):
            measured = real(records)
            assert measured is not None and measured > 0
            given.append(next(it))
            return given[-1]

        monkeypatch.setattr(unit, "window_throughput", forced)
        return given

    return force


def test_stops_when_the_interval_is_narrow(tmp_path, model_dir, port, window_throughputs, no_survivors):
    data = standin_config(model_dir, port, sweep={
        "concurrency": [1], "repeats": 1, "adaptive": {"target_rel_half_width": 0.5, "max_repeats": 9}})
    # 100, 101, 99 tok/s: mean 100, t interval half-width about 1%, far inside the +-50% target, so the
    # rule stops as soon as it may look (ADAPTIVE_MIN_REPEATS windows)
    given = window_throughputs([100.0, 101.0, 99.0])
    run_matrix(parse_config(data), RunOptions(out=tmp_path / "r", skip_preflight=True))
    assert ADAPTIVE_MIN_REPEATS == 7
    assert repeats_per_cell(tmp_path / "r") == {7}
    assert len(given) == 14  # both variants' 7 windows, and no 8th
    no_survivors()


def test_goes_to_the_cap_when_it_never_narrows(tmp_path, model_dir, port, window_throughputs, no_survivors):
    data = standin_config(model_dir, port, sweep={
        "concurrency": [1], "repeats": 1, "adaptive": {"target_rel_half_width": 1e-9, "max_repeats": 4}})
    window_throughputs([100.0, 120.0, 80.0, 110.0])  # a half-width of 1e-9 of the mean is never reached
    run_matrix(parse_config(data), RunOptions(out=tmp_path / "r", skip_preflight=True))
    assert repeats_per_cell(tmp_path / "r") == {4}
    # a resume of the finished run has nothing left to measure
    again = run_matrix(parse_config(data), RunOptions(out=tmp_path / "r", resume=True, skip_preflight=True))
    assert set(again.status.values()) == {"done"}
    assert repeats_per_cell(tmp_path / "r") == {4}
    no_survivors()

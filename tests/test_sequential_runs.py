"""`sweep.until: decided` on stand-ins whose per-launch speeds are set: a drafter about 4x as fast is
decided at the first look and gets no more launches; one whose launches alternate 10 and 13 ms per token
stays undecided and gets launches (interleaved with the baseline's) up to max_launches; a budget that
another round would exceed stops the run after the configured launches. The margins are wide: windows
of 3 waves of 48 tokens, so a late wake-up of the machine (tens of ms) cannot move a decision."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from conftest import set_faults, set_launch_faults, standin_config
from specbench.config import parse_config
from specbench.errors import ConfigError
from specbench.runner import RunOptions, run_matrix
from specbench.rundir import RunDir

VARIANTS = [{"name": "base", "drafter": "autoregressive", "baseline": True},
            {"name": "fast", "drafter": "ngram", "params": {"num_tokens": 3}},
            {"name": "shaky", "drafter": "autoregressive"}]


class Log:
    """A Reporter that keeps the log lines (the progress calls are not this test's)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def start(self, total_requests: int) -> None: ...
    def phase(self, variant: str, text: str) -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def close(self) -> None: ...

    def log(self, message: str) -> None:
        self.lines.append(message)


def run(tmp_path: Path, model_dir: Path, port: int, **sweep: object) -> tuple[Path, list[str]]:
    data = standin_config(model_dir, port, variants=VARIANTS, sweep={
        "concurrency": [1], "output_lens": [48], "waves": 3, "launches": 3, "until": "decided", "max_launches": 4,
        **sweep})
    set_faults(model_dir.parent, "base", ["--ms-per-token", "12", "--paced"])
    set_faults(model_dir.parent, "fast", ["--ms-per-token", "4", "--paced", "--accept-rate", "0.4"])
    set_launch_faults(model_dir.parent, "shaky", [["--ms-per-token", m, "--paced"] for m in ("10", "13")])
    reporter = Log()
    out = tmp_path / "run"
    result = run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True, reporter=reporter))
    assert set(result.status.values()) == {"done"}
    return out, reporter.lines


def launches_of(out: Path) -> dict[str, set[int]]:
    w = pd.DataFrame([r.model_dump() for r in RunDir(out).window_records()])
    return {v: set(g["launch"]) for v, g in w.groupby("variant")}


def test_more_launches_only_where_undecided(tmp_path, model_dir, port, no_survivors) -> None:
    out, logs = run(tmp_path, model_dir, port)
    no_survivors()
    assert launches_of(out) == {"base": {1, 2, 3, 4}, "fast": {1, 2, 3}, "shaky": {1, 2, 3, 4}}
    assert "sequential: launch 4 of base, shaky for 1 undecided point" in logs
    assert "sequential: 1 point still undecided at max_launches 4" in logs
    cells = pd.read_csv(out / "cells.csv")
    fast = cells[cells["variant"] == "fast"]
    assert (fast["speedup_ci_low"] > 1.05).all()  # decided at the first look, on the always-valid interval


def test_a_budget_stops_before_a_round_it_cannot_afford(tmp_path, model_dir, port, no_survivors) -> None:
    out, logs = run(tmp_path, model_dir, port, budget_h=0.0001)
    no_survivors()
    assert launches_of(out) == {"base": {1, 2, 3}, "fast": {1, 2, 3}, "shaky": {1, 2, 3}}
    assert any("would exceed budget_h 0.0001" in m for m in logs)


def test_until_decided_needs_two_launches() -> None:
    data = standin_config(Path("/nonexistent"), 1, sweep={"until": "decided", "launches": 1})
    with pytest.raises(ConfigError, match="launches >= 2"):
        parse_config(data)

"""`sweep.until: decided`. On stand-ins whose per-launch speeds are set: a drafter about 4x as fast is
decided at the first look and gets no more launches; one whose launches alternate 10 and 13 ms per
token (a speedup near 1.05 with a launch CV near 15%) cannot be decided within max_launches and is not
chased (windows of 3 waves of 48 tokens: a late wake-up of the machine cannot move either). The loop
itself on given cells tables (no engine): launches added only for the reachable undecided points, in
the counterbalanced order (round n reversed when n is even: ABBA), each launch measuring only those points;
max_launches and budget_h stop it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.records.rundir import RunDir
from specbench.runner import RunOptions, run_matrix
from specbench.shared.errors import ConfigError
from tests.conftest import set_faults, set_launch_faults, standin_config

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


def test_decided_and_out_of_reach_points_get_no_more_launches(tmp_path, model_dir, port, no_survivors) -> None:
    out, logs = run(tmp_path, model_dir, port)
    no_survivors()
    assert launches_of(out) == {"base": {1, 2, 3}, "fast": {1, 2, 3}, "shaky": {1, 2, 3}}
    assert "sequential: every point decided (or out of reach of max_launches) after 3 launches" in logs
    cells = pd.read_csv(out / "cells.csv")
    fast = cells[cells["variant"] == "fast"]
    assert (fast["speedup_ci_low"] > 1.05).all()  # decided at the first look, on the always-valid interval
    assert "alpha spent over 2 looks" in (out / "report.md").read_text()


def _cells(rows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
    """(variant, point, low, high) rows of a cells table measured in 3 launches, df 30."""
    return pd.DataFrame([{"variant": v, "point_id": p, "is_baseline": v == "base", "valid": True,
                          "speedup_ci_low": lo, "speedup_ci_high": hi, "speedup_ci_df": 30.0, "launches": 3}
                         for v, p, lo, hi in rows])


OPEN, DONE, OUT_OF_REACH = (1.05, 1.25), (1.30, 1.60), (0.80, 1.35)  # at 3 looks: 5 launches would decide OPEN


def loop(tmp_path: Path, model_dir: Path, port: int, rounds: list[pd.DataFrame], **sweep: object):
    import asyncio
    import time

    from specbench.runner.prepare import prepare_plan
    from specbench.runner.sequential import Looks, until_decided
    from specbench.runner.state import RunState, VariantState
    from specbench.runner.unit import RunContext

    data = standin_config(model_dir, port, variants=VARIANTS, sweep={
        "concurrency": [1, 2], "output_lens": [8], "launches": 3, "until": "decided", "max_launches": 5, **sweep})
    plan = prepare_plan(parse_config(data))
    state = RunState.new()
    state.launch_order = "abba"  # as run_matrix sets it in a new run
    for v in ("base", "fast", "shaky"):
        state.variants[v] = VariantState(status="done", startup_s=1.0, wall_s=30.0)
    ctx = RunContext(plan=plan, rd=RunDir(tmp_path), sink=None, done=set(), throughput={},  # type: ignore[arg-type]
                     reporter=Log())
    ran: list[tuple[str, int]] = []

    async def execute(unit, vs):
        ran.append((unit.variant, unit.launch))
        return vs

    seen = iter(rounds)
    log = Log()
    asyncio.run(until_decided(ctx, state, "base", Looks(cells=lambda: next(seen), execute=execute,
                                                        started=time.monotonic(), log=log.log)))
    return ran, ctx.only, log.lines


def test_the_loop_adds_launches_only_where_reachable_and_undecided(tmp_path, model_dir, port) -> None:
    p1, p2 = "code|in-|out8|c1|t0", "code|in-|out8|c2|t0"
    first = _cells([("base", p1, 1, 1), ("base", p2, 1, 1), ("fast", p1, *OPEN), ("fast", p2, *DONE),
                    ("shaky", p1, *OUT_OF_REACH), ("shaky", p2, *DONE)])
    second = _cells([("base", p1, 1, 1), ("fast", p1, *DONE), ("shaky", p1, *OUT_OF_REACH)])
    ran, only, logs = loop(tmp_path, model_dir, port, [first, second])
    assert ran == [("fast", 4), ("base", 4)]  # round 4 reverses round 3 (ABBA): the drafter concerned, the baseline
    assert only == {("base", 4): frozenset({p1}), ("fast", 4): frozenset({p1})}
    assert logs[0] == "sequential: launch 4 of fast, base for 1 undecided point"
    # still undecided at max_launches: the loop stops there
    ran, _, logs = loop(tmp_path, model_dir, port, [first, first, first])
    assert ran == [("fast", 4), ("base", 4), ("base", 5), ("fast", 5)]
    assert logs[-1] == "sequential: 1 point still undecided at max_launches 5"


def test_a_budget_stops_before_a_round_it_cannot_afford(tmp_path, model_dir, port) -> None:
    p1 = "code|in-|out8|c1|t0"
    first = _cells([("base", p1, 1, 1), ("fast", p1, *OPEN)])
    ran, _, logs = loop(tmp_path, model_dir, port, [first], budget_h=0.001)  # 3.6 s: a round costs ~17 s
    assert ran == []
    assert logs[-1].startswith("sequential: stopping after 3 launches: another round") and "budget_h 0.001" in logs[-1]


def test_until_decided_needs_two_launches() -> None:
    data = standin_config(Path("/nonexistent"), 1, sweep={"until": "decided", "launches": 1})
    with pytest.raises(ConfigError, match="launches >= 2"):
        parse_config(data)

"""The runner's parts on their own: the typed run state, the repeat rule, the launch order, and the unit of
work run in another process from nothing but the run directory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from specbench.config import SweepConfig, parse_config
from specbench.records.rundir import RunDir
from specbench.runner import RunOptions, RunState, VariantState, run_matrix
from specbench.runner.repeats import RepeatRule, window_id
from specbench.runner.scheduler import launch_order
from tests.conftest import REPO, make_model_dir, needs_standin, set_faults, standin_config

OLD_RUN_JSON = {  # as the dict-based runner wrote it, plus a key this version does not know
    "run_id": "ab12", "created": "2026-11-30T10:00:00+00:00", "name": "demo", "baseline": "base",
    "config_hash": "f00", "interruptions": ["2026-11-30T10:05:00+00:00"], "future_key": {"kept": True},
    "variants": {"base": {"status": "done", "drafter": "autoregressive", "fingerprint": "x", "pid": 7,
                          "startup_s": 1.5, "wall_s": 3.0},
                 "ngram": {"status": "failed", "reason": "engine exited with code 1", "wall_s": 2.0}}}


def test_run_state_reads_and_writes_the_same_json(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps(OLD_RUN_JSON))
    state = RunState.load(RunDir(tmp_path))
    assert state.variants["ngram"].status == "failed"
    assert state.to_json() == OLD_RUN_JSON
    state.variants["ngram"].succeed()
    assert "reason" not in state.to_json()["variants"]["ngram"]


def test_run_state_refuses_an_unknown_status(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({**OLD_RUN_JSON, "variants": {"a": {"status": "finished"}}}))
    with pytest.raises(ValidationError):
        RunState.load(RunDir(tmp_path))
    with pytest.raises(ValidationError):
        VariantState().status = "finished"  # type: ignore[assignment]


def test_repeat_rule_fixed_and_adaptive():
    fixed = RepeatRule(SweepConfig(output_lens=[8], concurrency=[1], repeats=3))
    assert fixed.next_repeats("c", {window_id("c", 2)}, {}) == [1, 3]
    adaptive = RepeatRule(SweepConfig(output_lens=[8], concurrency=[1], repeats=1,
                                      adaptive={"target_rel_half_width": 0.05, "max_repeats": 9}))
    first = {window_id("c", r) for r in (1, 2, 3)}
    assert adaptive.next_repeats("c", first, {w: 100.0 for w in first}) == [4]  # no stop before 7 windows
    done = {window_id("c", r) for r in range(1, 8)}
    noisy = {window_id("c", r): v for r, v in zip(range(1, 8), (100.0, 150.0, 60.0, 120.0, 80.0, 140.0, 70.0))}
    steady = {window_id("c", r): 100.0 for r in range(1, 8)}
    assert adaptive.next_repeats("c", done, noisy) == [8]  # one more at a time while the interval is wide
    assert adaptive.next_repeats("c", done, steady) == []
    assert adaptive.next_repeats("c", done | {window_id("c", 8), window_id("c", 9)}, noisy) == []  # the cap


def test_launch_order_counterbalances_variants():
    assert [(u.variant, u.launch) for u in launch_order(["a", "b", "c"], 3)] == [
        ("a", 1), ("b", 1), ("c", 1), ("c", 2), ("b", 2), ("a", 2), ("a", 3), ("b", 3), ("c", 3)]
    assert [(u.variant, u.launch) for u in launch_order(["a", "b"])] == [("a", 1), ("b", 1)]


REMOTE = """import asyncio, json, sys
from specbench.runner import LaunchUnit, VariantState, measure_launch, open_context
ctx = open_context(sys.argv[1])
try:
    state = asyncio.run(measure_launch(ctx, LaunchUnit(sys.argv[2], launch=2), VariantState()))
finally:
    ctx.sink.close()
print(json.dumps(state.model_dump(mode="json", exclude_none=True)))
"""


@needs_standin
def test_a_unit_runs_in_another_process_from_the_run_directory(tmp_path, port, no_survivors):
    model = make_model_dir(tmp_path / "model")
    data = standin_config(model, port, faults={"ngram": ["--exit-during-startup", "3"]})
    out = tmp_path / "run"
    assert run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True)).status == \
        {"base": "done", "ngram": "failed"}
    set_faults(model.parent, "ngram", None)
    p = subprocess.run([sys.executable, "-c", REMOTE, str(out), "ngram"], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    state = json.loads(p.stdout.strip().splitlines()[-1])
    assert state["status"] == "done" and state["pid"]
    windows = RunDir(out).window_records()
    assert sorted(w.variant for w in windows) == ["base", "base", "ngram", "ngram"]
    assert {w.run_id for w in windows} == {RunState.load(RunDir(out)).run_id}
    no_survivors()

"""The engine's state per window (issue 38, item 2): what is sampled from /metrics while a window runs, its
summary in the WindowRecord, and the cells flagged for a server that admitted fewer than C requests or preempted."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench.metrics.engine_state import state_warnings, window_state
from specbench.metrics.warnings import WarningCode, decode_warnings
from specbench.server.engines.prometheus import parse_metrics, state_of
from specbench.server.engines.sglang import STATE as SGLANG_STATE
from tests.conftest import REPO, make_model_dir

FAKE_VLLM = REPO / "tests" / "standin" / "fake_vllm"


def test_the_summary_counts_running_only_while_the_client_kept_c_in_flight():
    samples = [(4, {"running": 3.0, "waiting": 1.0, "kv_usage": 0.2}), (4, {"running": 3.2, "waiting": 0.0}),
               (2, {"running": 2.0, "waiting": 0.0, "kv_usage": 0.1})]  # the tail: 2 left, not an admission figure
    before = {"preemptions": 5.0, "queue_time_sum_s": 1.0, "queue_time_count": 10.0}
    after = {"preemptions": 7.0, "queue_time_sum_s": 1.6, "queue_time_count": 13.0}
    s = window_state(before, samples, after, concurrency=4)
    assert s is not None
    assert s["running_at_c"] == pytest.approx(3.1) and s["samples_at_c"] == 2
    assert s["running_mean"] == pytest.approx(8.2 / 3) and s["waiting_max"] == 1.0 and s["kv_usage_max"] == 0.2
    assert s["preemptions"] == 2.0 and s["queue_time_mean_s"] == pytest.approx(0.2)
    # a counter that went back (an engine restart) gives no figure; an engine with nothing gives None
    assert window_state({"preemptions": 9.0}, [], {"preemptions": 1.0}, 4) is None
    assert window_state(None, [], None, 4) is None


def test_a_cell_whose_server_ran_fewer_than_c_or_preempted_is_flagged_with_the_figure():
    ok = {"concurrency": 4.0, "running_at_c": 3.9, "samples_at_c": 10.0, "preemptions": 0.0}
    short = {"concurrency": 4.0, "running_at_c": 3.0, "samples_at_c": 3.0, "waiting_max": 1.0, "preemptions": 0.0}
    shorter = {**short, "running_at_c": 3.25, "samples_at_c": 9.0, "preemptions": 2.0}
    windows = pd.DataFrame({"cell_id": ["a|p", "b|p", "b|p"], "engine_state": [ok, short, shorter]})
    flags = state_warnings(windows)
    assert "a|p" not in flags
    (under, preempted) = flags["b|p"]
    assert under.code == WarningCode.UNDER_ADMITTED  # samples pooled: (3 x 3.0 + 9 x 3.25) / 12 = 3.19
    assert under.detail.startswith("the server ran 3.2 requests on average at C=4")
    assert preempted.code == WarningCode.PREEMPTED and preempted.detail == "2 preemption(s) in 2 window(s)"
    assert state_warnings(pd.DataFrame({"cell_id": ["a|p"], "engine_state": [None]})) == {}


def test_a_shortfall_with_nothing_waiting_is_not_under_admission():
    """Measured on vLLM-CPU at C=1: the gauge read 0.9 running while nothing waited in the queue (a request's
    time outside the scheduler); only a shortfall with requests waiting in the server's queue is flagged."""
    c1 = {"concurrency": 1.0, "running_at_c": 0.86, "samples_at_c": 44.0, "waiting_max": 0.0, "preemptions": 0.0}
    assert state_warnings(pd.DataFrame({"cell_id": ["a|p"], "engine_state": [c1]})) == {}
    queued = {**c1, "waiting_max": 1.0}
    (under,) = state_warnings(pd.DataFrame({"cell_id": ["a|p"], "engine_state": [queued]}))["a|p"]
    assert under.code == WarningCode.UNDER_ADMITTED


def test_sglang_names_are_read_and_kv_usage_is_the_fullest_engine():
    text = "\n".join([
        "# TYPE sglang:num_running_reqs gauge", 'sglang:num_running_reqs{dp="0"} 3',
        'sglang:num_running_reqs{dp="1"} 2',
        "# TYPE sglang:num_queue_reqs gauge", 'sglang:num_queue_reqs{dp="0"} 1',
        "# TYPE sglang:token_usage gauge", 'sglang:token_usage{dp="0"} 0.4', 'sglang:token_usage{dp="1"} 0.7',
        "# TYPE sglang:num_retracted_requests counter", 'sglang:num_retracted_requests_total{dp="0"} 4']) + "\n"
    assert state_of(parse_metrics(text), SGLANG_STATE) == {"running": 5.0, "waiting": 1.0, "kv_usage": 0.7,
                                                           "preemptions": 4.0}


class ScriptedEngine:
    """read_state answers from a script; `enough` is set once the window has been sampled `n` times."""

    state_metrics = {"running": "x"}

    def __init__(self, script: list[dict[str, float] | Exception], n: int):
        self.script, self.reads, self.n = script, 0, n
        self.enough = asyncio.Event()

    async def read_state(self, http: Any, url: str) -> dict[str, float]:
        item = self.script[min(self.reads, len(self.script) - 1)]
        self.reads += 1
        if self.reads >= self.n + 1:  # the read before the window, then n during it
            self.enough.set()
        if isinstance(item, Exception):
            raise item
        return item


def test_the_sampler_polls_during_the_window_and_stops_on_its_event():
    import httpx

    from specbench.runner.enginestate import StateSampler

    async def go() -> tuple[dict[str, float] | None, int]:
        engine = ScriptedEngine([{"running": 0.0, "preemptions": 0.0}, {"running": 3.0},
                                 httpx.ConnectError("busy"), {"running": 4.0},
                                 {"running": 4.0, "preemptions": 1.0}], n=4)  # the last answer repeats
        sampler = StateSampler(engine, None, "http://x/metrics", concurrency=4, n_requests=8,  # type: ignore[arg-type]
                               interval_s=0.001)
        await sampler.start()
        await engine.enough.wait()
        summary = await sampler.stop()
        return summary, engine.reads

    summary, _ = asyncio.run(go())
    assert summary is not None and summary["samples"] >= 2  # the failed scrape is skipped, not fatal
    assert summary["running_max"] == 4.0 and 3.0 <= summary["running_at_c"] < 4.0 and summary["preemptions"] == 1.0


def test_the_standin_admitting_fewer_than_c_is_flagged(tmp_path: Path, port: int, no_survivors) -> None:
    from specbench.config import parse_config
    from specbench.records.rundir import RunDir
    from specbench.runner import RunOptions, run_matrix

    cfg = {"name": "state", "model": {"path": str(make_model_dir(tmp_path / "model")), "served_name": "standin"},
           "engine": {"kind": "vllm", "python": sys.executable, "version": "0.31.0", "port": port,
                      "startup_timeout_s": 20, "stop_timeout_s": 3,
                      "env": {"PYTHONPATH": f"{FAKE_VLLM}{os.pathsep}{REPO}", "STANDIN_MS_PER_TOKEN": "25"}},
           "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                        # three requests served at once at C=4, and a preemption every other request
                        {"name": "short", "drafter": "autoregressive",
                         "env": {"STANDIN_ARGS": "--slots 3 --preempt-every 2"}}],
           "sweep": {"prompts": [{"set": "seed", "categories": ["code"], "per_category": 8}], "output_lens": [64],
                     "concurrency": [4], "repeats": 1, "warmup_requests": 0, "request_timeout_s": 20},
           "output_dir": str(tmp_path / "runs")}
    out = tmp_path / "run"
    result = run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True))
    no_survivors()
    assert set(result.status.values()) == {"done"}, result.status
    windows = {w.variant: w for w in RunDir(out).window_records()}
    assert windows["base"].engine_state["running_at_c"] == pytest.approx(4.0, abs=0.3)
    assert windows["short"].engine_state["running_at_c"] == pytest.approx(3.0, abs=0.3)
    preempted = windows["short"].n_requests // 2  # one every other streamed request
    short = windows["short"].engine_state
    assert short["waiting_max"] >= 1 and short["preemptions"] == preempted
    cells = pd.read_csv(out / "cells.csv").set_index("variant")
    flags = {w["code"]: w["detail"] for w in decode_warnings(cells.loc["short", "warnings"])}
    assert flags["under_admitted"].startswith("the server ran 3.0 requests on average at C=4")
    assert flags["preempted"] == f"{preempted} preemption(s) in 1 window(s)"
    assert not {"under_admitted", "preempted"} & {w["code"] for w in decode_warnings(cells.loc["base", "warnings"])}
    assert json.loads((RunDir(out).windows).read_text().splitlines()[0])["engine_state"]["samples"] > 0

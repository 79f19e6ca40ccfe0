"""Faults injected through the stand-in server (tests/standin/server.py), one test each: the outcome is
checked, and so is that no process the test started survives (psutil descendants + the test's port)."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench.cli import main
from specbench.config import parse_config
from specbench.metrics import CellOptions, compute_cells
from specbench.records.rundir import RunDir, records_frame
from specbench.runner import RunOptions, RunResult, run_matrix
from specbench.shared.errors import EngineStartError
from tests.conftest import REPO, make_model_dir, needs_standin, set_faults, standin_config, write_config

pytestmark = needs_standin

BASE_ONLY = [{"name": "base", "drafter": "autoregressive", "baseline": True}]


def run(cfg: dict[str, Any], out: Path, **opts: Any) -> RunResult:
    return run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True, **opts))


def meta(out: Path) -> dict[str, Any]:
    return json.loads((out / "run.json").read_text())


def cells(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "cells.csv")


def requests(out: Path, superseded: bool = False):
    return RunDir(out).request_records(superseded=superseded)


# -- engine startup ---------------------------------------------------------------------------------------
def test_engine_exits_during_startup(tmp_path, port, no_survivors):
    """Exit code and log tail within seconds; the variant is failed with the reason; the others measured."""
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port, faults={"ngram": ["--exit-during-startup", "3", "--startup-error",
                                                        "RuntimeError: CUDA out of memory (simulated)"]})
    out = tmp_path / "run"
    res = run(cfg, out)
    assert res.status == {"base": "done", "ngram": "failed"}
    vm = meta(out)["variants"]["ngram"]
    assert "exited with code 3 during startup" in vm["reason"]
    assert vm["wall_s"] < 8, "a dead engine must be noticed within seconds, not at the startup timeout"
    assert "CUDA out of memory (simulated)" in (out / "variants" / "ngram" / "server.log").read_text()
    c = cells(out)
    assert set(c["variant"]) == {"base"} and c["valid"].all() and len(c) == 2
    no_survivors()


def test_engine_hangs_at_startup(tmp_path, port, no_survivors):
    """An engine that listens but never generates hits engine.startup_timeout_s; its tree is gone."""
    model = make_model_dir(tmp_path / "model")
    # 5 s: short, yet long enough for the healthy baseline's stand-in on a loaded 2-core machine
    cfg = standin_config(model, port, faults={"ngram": ["--hang-startup"]}, engine={"startup_timeout_s": 5})
    out = tmp_path / "run"
    res = run(cfg, out)
    assert res.status == {"base": "done", "ngram": "failed"}
    reason = meta(out)["variants"]["ngram"]["reason"]
    assert "not ready after 5s" in reason and "engine.startup_timeout_s" in reason
    # The hanging engine never becomes ready: the variant gave up at its timeout, not before, and not much
    # after (the 60 s bound is generous for a loaded machine: the timeout and a 3 s stop should be ~8 s).
    assert 5 <= meta(out)["variants"]["ngram"]["wall_s"] < 60
    assert "hangs: --hang-startup" in (out / "variants" / "ngram" / "server.log").read_text()
    no_survivors()


def test_engine_start_error_carries_exit_code_and_log_tail(tmp_path, port, no_survivors):
    """The EngineStartError itself (what the CLI prints) has the exit code and the last log lines."""
    import asyncio

    from specbench.server.engines.base import LaunchSpec
    from specbench.server.process import EngineProcess

    argv = [sys.executable, "-m", "tests.standin.server", "--port", str(port), "--exit-during-startup", "7",
            "--startup-error", "ValueError: bad --max-model-len (simulated)"]
    proc = EngineProcess("v", LaunchSpec(argv=argv, env={"PYTHONPATH": str(REPO)}), tmp_path / "server.log",
                         "127.0.0.1", port)
    proc.start()

    async def never() -> bool:
        return False

    t0 = time.monotonic()
    try:
        with pytest.raises(EngineStartError) as err:
            asyncio.run(proc.wait_ready(never, timeout_s=300))
    finally:
        proc.stop(grace_s=2)
    # The exit is an event: wait_ready returns when the process exits, not at its 300 s timeout
    # (60 s is a generous bound for a loaded machine; it takes about 1 s).
    assert time.monotonic() - t0 < 60
    msg = str(err.value)
    assert "exited with code 7 during startup" in msg
    assert "bad --max-model-len (simulated)" in msg.split("\n", 1)[1]  # the log tail follows the first line
    no_survivors()


# -- engine death in the middle of a sweep, then --resume -------------------------------------------------------
def test_engine_dies_mid_sweep_then_resume_fills_the_gap(tmp_path, port, no_survivors):
    model = make_model_dir(tmp_path / "model")
    # ngram: C=1 window = streams 1 and 2, C=2 window = streams 3 and 4 (both prompts in every window): the
    # server exits when stream 3 arrives
    cfg = standin_config(model, port, faults={"ngram": ["--die-after-requests", "2"]})
    out = tmp_path / "run"
    res = run(cfg, out)
    assert res.status == {"base": "done", "ngram": "failed"}
    reason = meta(out)["variants"]["ngram"]["reason"]
    assert "engine exited with code 1" in reason and "c2" in reason
    c = cells(out)
    assert len(c[c.variant == "base"]) == 2 and c[c.variant == "base"]["valid"].all()
    assert list(c[c.variant == "ngram"]["concurrency"]) == [1]  # measured before the crash, kept
    no_survivors()
    windows_before = {w.window_id: w.t_start for w in RunDir(out).window_records()}

    set_faults(model.parent, "ngram", None)  # the engine is healthy again; the config is unchanged
    res = run(cfg, out, resume=True)
    assert res.status == {"base": "done", "ngram": "done"}
    c = cells(out)
    assert len(c) == 4 and c["valid"].all() and c["output_throughput_tok_s"].notna().all()
    # the abandoned attempt's records do not count: 2 prompts, 1 pass at C=1 and 3 at C=2 (plan.category_passes)
    assert (c["n_requests"] == c["concurrency"].map({1: 2, 2: 6})).all()
    assert (c["n_errors"] == 0).all()
    after = {w.window_id: w.t_start for w in RunDir(out).window_records()}
    assert all(after[k] == t for k, t in windows_before.items())  # nothing finished was measured again
    assert len(after) == len(windows_before) + 1
    raw = requests(out, superseded=True)
    assert sum(r.error is not None for r in raw) >= 1  # the raw file still holds the failed attempt
    no_survivors()


# -- counter scrapes ---------------------------------------------------------------------------------------------
COUNTERS = {"acceptance_metric": "vllm:spec_decode_num_drafts_total"}  # counter windows: /metrics around each


def test_metrics_scrape_that_keeps_failing_fails_the_variant_not_the_run(tmp_path, port, no_survivors):
    """/metrics answering 500 every time: retried, then the variant is failed with a one-line reason and
    the next variant is measured (before: an httpx traceback ended the whole run)."""
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port, faults={"base": ["--metrics-errors", "-1"]}, engine=COUNTERS)
    out = tmp_path / "run"
    res = run(cfg, out)
    assert res.status == {"base": "failed", "ngram": "done"}
    reason = meta(out)["variants"]["base"]["reason"]
    assert "cannot read the engine's counters" in reason and "HTTPStatusError" in reason and "\n" not in reason
    assert meta(out)["variants"]["base"]["wall_s"] < 20, "a few short retries, not a long wait"
    c = cells(out)
    assert list(c[c.variant == "ngram"]["concurrency"]) == [1, 2]
    assert not RunDir(out).window_records() or {w.variant for w in RunDir(out).window_records()} == {"ngram"}
    no_survivors()


def test_metrics_scrape_that_fails_briefly_is_retried(tmp_path, port, no_survivors):
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port, faults={"base": ["--metrics-errors", "2"]}, engine=COUNTERS,
                         variants=BASE_ONLY)
    out = tmp_path / "run"
    assert run(cfg, out).status == {"base": "done"}
    windows = RunDir(out).window_records()
    assert len(windows) == 2 and all(w.counters is not None for w in windows)
    no_survivors()


# -- request-level faults -----------------------------------------------------------------------------------------
REQUEST_FAULTS = [
    ("http-5xx", ["--http-error-rate", "1.0"], {}, "HTTP 500"),
    ("malformed-sse", ["--malformed-sse-after", "2"], {}, "malformed SSE data"),
    ("truncated-stream", ["--truncate-after", "2"], {}, ""),
    ("stalled-stream", ["--stall-after", "2"], {"request_timeout_s": 1},
     "timed out after 1s (sweep.request_timeout_s)"),
]


@pytest.mark.parametrize("fault,flags,sweep,expected", REQUEST_FAULTS, ids=[f[0] for f in REQUEST_FAULTS])
def test_request_fault_is_recorded_and_cell_invalid(fault, flags, sweep, expected, tmp_path, port, no_survivors):
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port, variants=BASE_ONLY, faults={"base": flags}, sweep=sweep)
    out = tmp_path / "run"
    t0 = time.monotonic()
    res = run(cfg, out)
    assert res.status == {"base": "done"}  # request errors do not fail the variant: they fail the cell
    recs = requests(out)
    assert len(recs) == 8 and all(r.error for r in recs)  # both prompts: 1 pass at C=1, 3 at C=2
    for r in recs:
        if fault == "truncated-stream":  # a dropped connection or an end without [DONE]: either is an error
            assert "truncated" in r.error or "RemoteProtocolError" in r.error or "ReadError" in r.error, r.error
        else:
            assert expected in r.error, r.error
    c = cells(out)
    assert len(c) == 2
    assert not c["valid"].any()
    assert c["output_throughput_tok_s"].isna().all() and c["speedup"].isna().all()
    assert (c["error_rate"] == 1.0).all()
    if fault == "stalled-stream":
        # A stalled stream would hang for an hour (the stand-in sleeps 3600 s): each of the 4 requests gave up
        # at its 1 s timeout; 120 s is a generous bound for two launches on a loaded machine.
        assert time.monotonic() - t0 < 120
    no_survivors()


def test_error_rate_threshold_marks_cell_invalid(tmp_path, port, no_survivors):
    """Some requests fail: below sweep.max_error_rate the cell reports numbers, above it it is invalid."""
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port, variants=BASE_ONLY, faults={"base": ["--http-error-rate", "0.3", "--seed", "1"]},
                         sweep={"concurrency": [4], "waves": 3, "max_error_rate": 0.9})  # (3 + 2) x 4 = 20
    out = tmp_path / "run"
    run(cfg, out)
    recs = requests(out)
    n_err = sum(r.error is not None for r in recs)
    assert len(recs) == 20 and 0 < n_err < 20, n_err
    assert all(r.error.startswith("HTTP 500") for r in recs if r.error)
    c = cells(out)
    assert c["valid"].all() and c["output_throughput_tok_s"].notna().all()  # 0.9 tolerates them
    rate = n_err / 20
    rd = RunDir(out)
    req, win = records_frame(rd.request_records()), records_frame(rd.window_records())
    strict = compute_cells(req, win, CellOptions("base", max_error_rate=rate - 0.01))
    assert not strict["valid"].any() and strict["output_throughput_tok_s"].isna().all()
    assert math.isclose(strict["error_rate"].iloc[0], rate)
    loose = compute_cells(req, win, CellOptions("base", max_error_rate=rate))
    assert loose["valid"].all()
    no_survivors()


# -- the host: port taken, GPU busy ------------------------------------------------------------------------------
def fake_nvidia_smi(bin_dir: Path, lines: str) -> dict[str, str]:
    """A stand-in `nvidia-smi` on PATH that prints `lines` for the compute-apps query."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "nvidia-smi"
    exe.write_text(f"#!/bin/sh\ncat <<'EOF'\n{lines}EOF\n")
    exe.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_port_already_in_use_is_refused_naming_port_and_owner(tmp_path, port, monkeypatch, capsys, no_survivors):
    model = make_model_dir(tmp_path / "model")
    cfg = write_config(tmp_path / "c.yaml", standin_config(model, port))
    monkeypatch.setenv("PATH", fake_nvidia_smi(tmp_path / "bin", "")["PATH"])  # no GPU processes
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        code = main(["run", str(cfg), "--out", str(tmp_path / "run")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error:") and "Traceback" not in err[0]
    assert f"127.0.0.1:{port} is already in use" in err[0] and "engine.port" in err[0]
    assert f"PID {os.getpid()}" in err[0]  # the owner, when the OS shows it
    assert not (tmp_path / "run").exists()  # refused before the run directory was created
    no_survivors()


def test_port_taken_between_variants_fails_the_variant_not_the_run(tmp_path, port, no_survivors):
    """Preflight skipped (or the port taken later): each launch checks the port first and names the owner."""
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port)
    out = tmp_path / "run"
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        res = run(cfg, out)
    assert res.status == {"base": "failed", "ngram": "failed"}
    for vm in meta(out)["variants"].values():
        assert f"port {port} is already in use by PID {os.getpid()}" in vm["reason"]
    assert not (out / "variants" / "base" / "server.log").exists()  # nothing was launched
    no_survivors()


def test_gpu_already_busy_is_refused_naming_the_pid(tmp_path, port, no_survivors):
    """End to end through `specbench run` (a real process) with a stand-in nvidia-smi on PATH."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # holds-55-GB"])
    try:
        env = fake_nvidia_smi(tmp_path / "bin", f"{holder.pid}, python, 56320 MiB\n")
        model = make_model_dir(tmp_path / "model")
        cfg = write_config(tmp_path / "c.yaml", standin_config(model, port))
        r = subprocess.run([sys.executable, "-m", "specbench.cli", "run", str(cfg), "--out", str(tmp_path / "run")],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    finally:
        holder.kill()
        holder.wait()
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(err) == 1, r.stderr
    assert err[0].startswith("error:") and "GPU busy" in err[0]
    assert f"PID {holder.pid}" in err[0] and "holds-55-GB" in err[0] and "56320 MiB" in err[0]
    assert "engine.allow_busy_gpu" in err[0]
    assert not (tmp_path / "run").exists()
    no_survivors()

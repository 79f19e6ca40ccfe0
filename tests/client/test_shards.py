"""The closed loop sharded across client worker processes (client.processes, issue 21).

Records through 2 workers equal those of one process (timing excluded), every send time lies inside its
window (one clock), never more than C requests reach the server at once, and a worker that dies fails the
window with one line while nothing is left running."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import httpx
import psutil

from specbench.client.shards import resolve_processes, split
from specbench.config import parse_config
from specbench.records.rundir import RunDir
from specbench.runner import RunOptions, run_matrix
from tests.conftest import make_model_dir, needs_standin, standin_config
from tests.runner.test_client_paths import config, records

pytestmark = needs_standin


def test_split_and_auto():
    assert split(5, 2) == [3, 2] and split(4, 2) == [2, 2] and split(1, 2) == [1, 0] and sum(split(256, 3)) == 256
    assert resolve_processes(2, 64) == 2 and resolve_processes(4, 2) == 2  # never more workers than streams
    assert 1 <= resolve_processes("auto", 64) <= 8


def test_two_processes_write_the_records_of_one(tmp_path, port, no_survivors):
    runs = {}
    for n in (1, 2):
        cfg = config(tmp_path / f"p{n}", port)
        cfg["client"] = {"processes": n}
        cfg["engine"]["env"]["STANDIN_LEDGER"] = str(tmp_path / f"ledger{n}")
        (tmp_path / f"ledger{n}").mkdir()
        out = tmp_path / f"run{n}"
        res = run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True))
        assert set(res.status.values()) == {"done"}, res.status
        runs[n] = records(out)
        windows = {w.window_id: w for w in RunDir(out).window_records()}
        for r in RunDir(out).request_records():  # one clock: every send inside its window
            if not r.warmup:
                w = windows[r.window_id]
                assert w.t_start <= r.t_send <= w.t_end
        ledger = [json.loads(line) for f in (tmp_path / f"ledger{n}").iterdir() for line in f.read_text().splitlines()]
        assert ledger and max(e["in_flight"] for e in ledger) <= 3  # the largest C of the sweep
        if n == 2:
            assert all(w.extra["client"]["processes"] == 2 for w in windows.values())
    assert runs[1] == runs[2]
    no_survivors()


def _spawned_workers() -> list[psutil.Process]:
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if any("specbench.client.shards import worker_main" in a for a in p.cmdline()):
                out.append(p)
        except psutil.Error:
            pass
    return out


def test_a_worker_that_dies_fails_the_window_and_leaves_nothing_running(tmp_path, port, no_survivors):
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port, variants=[{"name": "base", "drafter": "autoregressive", "baseline": True}],
                         faults={"base": ["--stall-after", "1"]},  # streams hang: the window is in progress
                         sweep={"concurrency": [2], "request_timeout_s": 300})
    cfg["client"] = {"processes": 2}
    killed: list[int] = []

    def killer() -> None:  # once both streams reached the server, SIGKILL one worker
        deadline = time.monotonic() + 60  # only so a broken run cannot leave this thread polling forever
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/standin/stats", timeout=2).json()["streams"] >= 2:
                    break
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.05)
        else:
            return
        victim = _spawned_workers()[0]
        killed.append(victim.pid)
        os.kill(victim.pid, signal.SIGKILL)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    out = tmp_path / "run"
    t0 = time.monotonic()
    res = run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True))
    t.join(10)
    assert killed and res.status == {"base": "failed"}
    reason = json.loads((out / "run.json").read_text())["variants"]["base"]["reason"]
    assert f"(PID {killed[0]}) died during base|" in reason and "exit code -9" in reason and "\n" not in reason, reason
    assert not RunDir(out).window_records()  # the window does not count
    assert time.monotonic() - t0 < 120  # not the 300 s request timeout: the death ended the window
    assert not _spawned_workers()
    no_survivors()

"""Engine lifecycle: process groups, SIGTERM -> SIGKILL escalation, the whole tree (even a worker that left the
group), the port freed before the next launch, atexit and the reaper when specbench itself dies, and SIGINT /
SIGTERM / SIGKILL to a real `specbench run` process. Also the launch-side security rules (no shell, loopback).
Every test ends by checking that no process it started survives."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from specbench.config import parse_config
from specbench.records.rundir import RunDir
from specbench.server.engines.base import LaunchSpec
from specbench.server.ports import port_in_use
from specbench.server.process import EngineProcess
from tests.conftest import REPO, make_model_dir, needs_standin, standin_config, write_config


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def wait_for(pred, timeout_s: float, what: str, step: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(step)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# -- EngineProcess ------------------------------------------------------------------------------------------
STUBBORN = """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)           # the leader ignores SIGTERM
    worker = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    subprocess.Popen([sys.executable, "-c", worker])                          # same group, also stubborn
    subprocess.Popen([sys.executable, "-c", worker], start_new_session=True)  # left the group (setsid)
    print("started", flush=True)
    time.sleep(120)
"""


def test_stop_escalates_to_sigkill_and_reaps_the_whole_tree(tmp_path, port, no_survivors):
    log = tmp_path / "server.log"
    proc = EngineProcess("stubborn", LaunchSpec(argv=py(STUBBORN)), log, "127.0.0.1", port)
    proc.start()
    assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)  # its own process group (setsid)
    wait_for(lambda: "started" in log.read_text(), 10, "the tree to start")
    tree = psutil.Process(proc.pid).children(recursive=True)
    assert len(tree) == 2
    t0 = time.monotonic()
    proc.stop(grace_s=1.0, port_wait_s=1.0)
    # Every process of the tree ignores SIGTERM and sleeps 120 s: stop() returning well before that (a
    # generous 60 s for a loaded 2-core machine; 1 s grace is what it should take) means it escalated.
    assert time.monotonic() - t0 < 60
    assert proc.survivors() == []
    assert all(gone(p.pid) for p in tree)
    no_survivors()


def test_context_manager_stops_on_exception(tmp_path, port, no_survivors):
    log = tmp_path / "server.log"
    with pytest.raises(RuntimeError):
        with EngineProcess("x", LaunchSpec(argv=py("import time; print('up', flush=True); time.sleep(60)")),
                           log, "127.0.0.1", port) as proc:
            wait_for(lambda: "up" in log.read_text(), 10, "start")
            raise RuntimeError("boom in the middle of a sweep")
    assert gone(proc.pid)
    no_survivors()


def test_stop_returns_only_when_the_port_is_free(tmp_path, port, no_survivors):
    """A server that takes a while to let go of its port on SIGTERM: stop() waits for the port."""
    code = f"""
        import signal, socket, sys, time
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", {port})); s.listen()
        def term(*_):
            time.sleep(1.5); s.close(); sys.exit(0)
        signal.signal(signal.SIGTERM, term)
        print("listening", flush=True)
        time.sleep(60)
    """
    log = tmp_path / "server.log"
    proc = EngineProcess("slow-release", LaunchSpec(argv=py(code)), log, "127.0.0.1", port)
    proc.start()
    wait_for(lambda: "listening" in log.read_text(), 10, "listen")
    assert port_in_use("127.0.0.1", port)
    proc.stop(grace_s=5)
    assert not port_in_use("127.0.0.1", port)  # the next variant can bind it right away
    no_survivors()


def test_atexit_stops_engines_a_script_forgot(tmp_path, port, no_survivors):
    """A Python program that starts an engine and exits without stopping it leaves nothing behind."""
    script = f"""
        import sys, time
        from pathlib import Path
        from specbench.server.engines.base import LaunchSpec
        from specbench.server.process import EngineProcess
        p = EngineProcess("x", LaunchSpec(argv=[sys.executable, "-c", "import time; time.sleep(60)"]),
                          Path({str(tmp_path / 'server.log')!r}), "127.0.0.1", {port})
        p.start()
        print(p.pid, flush=True)
        sys.exit(3)  # no stop(): the atexit sweep must do it
    """
    r = subprocess.run(py(script), capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 3, r.stderr
    engine_pid = int(r.stdout.split()[0])
    wait_for(lambda: gone(engine_pid), 5, "the engine to be stopped at exit")
    no_survivors()


def test_reaper_stops_the_engine_when_its_owner_is_sigkilled(tmp_path, port, no_survivors):
    """No Python cleanup can run after SIGKILL: the reaper (own session, waiting on a pipe) stops the group,
    escalates to SIGKILL, and also reaches a stubborn worker that left the group with setsid."""
    engine = STUBBORN.replace("time.sleep(120)\n", "time.sleep(60)\n")
    script = f"""
        import os, signal, sys, time
        from pathlib import Path
        from specbench.server.engines.base import LaunchSpec
        from specbench.server.process import EngineProcess
        log = Path({str(tmp_path / 'server.log')!r})
        p = EngineProcess("x", LaunchSpec(argv=[sys.executable, "-c", {textwrap.dedent(engine)!r}]), log,
                          "127.0.0.1", {port}, reaper_grace_s=1.0)
        p.start()
        while "started" not in log.read_text():
            time.sleep(0.05)
        time.sleep(1.5)  # the reaper snapshots the tree once a second
        import psutil
        workers = [c.pid for c in psutil.Process(p.pid).children(recursive=True)]
        print(p.pid, p._reaper.pid, *workers, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """
    r = subprocess.run(py(script), capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == -signal.SIGKILL, r.stderr
    engine_pid, reaper_pid, *workers = map(int, r.stdout.split())
    assert len(workers) == 2, r.stdout  # both stubborn workers, the one that left the group included
    # the reaper acts as soon as its pipe closes; 30 s bounds SIGTERM, its 1 s grace and SIGKILL on a busy machine
    wait_for(lambda: gone(engine_pid), 30, "the reaper to stop the engine")
    wait_for(lambda: all(gone(pid) for pid in workers), 30, "the reaper to kill the stubborn workers")
    wait_for(lambda: gone(reaper_pid), 30, "the reaper itself to exit")
    no_survivors()


# -- signals to a real `specbench run` --------------------------------------------------------------------------
def slow_config(tmp_path: Path, port: int) -> Path:
    """Two variants, each request ~1 s (20 tokens x 50 ms), windows of C=1 and C=2: time to interrupt."""
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port, sweep={"output_lens": [20], "concurrency": [1, 2]})
    cfg["engine"]["command"] += ["--ms-per-token", "50"]
    return write_config(tmp_path / "config.yaml", cfg)


# Starts specbench with known signal dispositions, whatever this pytest process has: SIGINT, SIGTERM and
# SIGHUP at their defaults, none blocked, but those named in argv[1] ignored (as a shell starts a background
# job with SIGINT ignored, or nohup with SIGHUP ignored). It execs specbench: same pid.
WITH_DISPOSITIONS = """import os, signal, sys
ignored = set(filter(None, sys.argv[1].split(",")))
for name in ("SIGINT", "SIGTERM", "SIGHUP"):
    signal.signal(getattr(signal, name), signal.SIG_IGN if name in ignored else signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_SETMASK, [])
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


def start_run(args: list[str], tmp_path: Path, ignored: tuple[str, ...] = (),
              **popen: object) -> subprocess.Popen[str]:
    err = open(tmp_path / "specbench.stderr", "w")
    kw: dict = {"stdout": subprocess.DEVNULL, "stderr": err, **popen}
    return subprocess.Popen([sys.executable, "-c", WITH_DISPOSITIONS, ",".join(ignored),
                             "-m", "specbench.cli", "run", *args], cwd=REPO, text=True, **kw)


def n_lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def engine_pid(out: Path) -> int | None:
    try:
        m = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        return None
    running = [v for v in m.get("variants", {}).values() if v.get("status") == "running"]
    return running[0].get("pid") if running else None


def interrupt_run(sig: signal.Signals, tmp_path: Path, port: int, ignored: tuple[str, ...] = (),
                  before_signal=lambda: None, **popen: object) -> tuple[int, int, Path]:
    """Start a slow run, send `sig` once its first request record is on disk; (exit code, engine pid, out)."""
    cfg = slow_config(tmp_path, port)
    out = tmp_path / "run"
    proc = start_run([str(cfg), "--out", str(out), "--skip-preflight"], tmp_path, ignored, **popen)
    try:
        wait_for(lambda: n_lines(out / "requests.jsonl") >= 1 and engine_pid(out), 40, "the first request record")
        epid = engine_pid(out)
        assert epid is not None
        before_signal()
        proc.send_signal(sig)
        code = proc.wait(timeout=60)  # a hang guard only: exit code 130 is what shows the signal was handled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, epid, out


def check_interrupted(out: Path, epid: int) -> None:
    """The engine is gone, run.json says interrupted, and every window on disk has all its requests."""
    assert gone(epid)
    m = json.loads((out / "run.json").read_text())  # consistent and parseable
    assert m["interrupted"]
    assert m["variants"]["base"]["status"] == "interrupted"
    rd = RunDir(out)
    recs = rd.request_records(superseded=True)
    assert recs  # the raw files parse, and what was measured before the signal is kept
    for w in rd.window_records():  # a window counts only with all its requests on disk
        assert sum(r.window_id == w.window_id for r in recs) == w.n_requests


@needs_standin
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_sigint_sigterm_sighup_stop_every_engine(sig, tmp_path, port, no_survivors):
    code, epid, out = interrupt_run(sig, tmp_path, port)
    stderr = (tmp_path / "specbench.stderr").read_text()
    assert code == 130, stderr
    assert "Traceback" not in stderr
    (line,) = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert line.startswith(f"error: interrupted by {sig.name}: every engine was stopped") and \
        f"specbench run --resume {out}" in line
    check_interrupted(out, epid)
    no_survivors()


@needs_standin
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_stop_signal_inherited_as_ignored_still_stops_the_run(sig, tmp_path, port, no_survivors):
    """A shell starts a background job with SIGINT ignored (`specbench run ... &` in a script): Python then
    installs no KeyboardInterrupt handler. specbench installs its own, so the signal still stops it."""
    code, epid, out = interrupt_run(getattr(signal, sig), tmp_path, port, ignored=(sig,))
    stderr = (tmp_path / "specbench.stderr").read_text()
    assert code == 130, stderr
    assert f"error: interrupted by {sig}" in stderr and "Traceback" not in stderr
    check_interrupted(out, epid)
    no_survivors()


@needs_standin
def test_sighup_from_a_closed_terminal(tmp_path, port, no_survivors):
    """specbench's stdout and stderr are a terminal (a pty: the progress display is the rich one) that
    closes, then SIGHUP arrives, as when an ssh session drops: every write to the terminal now fails (EIO),
    yet the engine is stopped, run.json says interrupted and the exit code is 130, not a traceback's 1."""
    import pty

    master, slave = pty.openpty()
    try:
        # the terminal goes away (its master side closes: every later write to it fails), then SIGHUP
        code, epid, out = interrupt_run(signal.SIGHUP, tmp_path, port, before_signal=lambda: os.close(master),
                                        stdout=slave, stderr=slave)
    finally:
        os.close(slave)
    assert code == 130
    check_interrupted(out, epid)
    no_survivors()


@needs_standin
def test_nohup_keeps_the_run_going_when_the_terminal_closes(tmp_path, port, no_survivors):
    """A SIGHUP inherited as ignored is what `nohup specbench run` asks for: the run goes on to the end."""
    cfg = slow_config(tmp_path, port)
    out = tmp_path / "run"
    proc = start_run([str(cfg), "--out", str(out), "--skip-preflight"], tmp_path, ignored=("SIGHUP",))
    try:
        wait_for(lambda: n_lines(out / "requests.jsonl") >= 1 and engine_pid(out), 40, "the first request record")
        proc.send_signal(signal.SIGHUP)
        code = proc.wait(timeout=120)  # a hang guard only
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, (tmp_path / "specbench.stderr").read_text()
    assert {v["status"] for v in json.loads((out / "run.json").read_text())["variants"].values()} == {"done"}
    no_survivors()


@needs_standin
def test_sigkill_specbench_reaper_then_resume(tmp_path, port, no_survivors):
    cfg = slow_config(tmp_path, port)
    out = tmp_path / "run"
    proc = start_run([str(cfg), "--out", str(out), "--skip-preflight"], tmp_path)
    try:
        # the C=1 window is done (its WindowRecord written) and the C=2 window is in flight
        wait_for(lambda: n_lines(out / "windows.jsonl") >= 1 and engine_pid(out), 40, "the first window")
        epid = engine_pid(out)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the reaper notices its owner's death on a pipe at once; 30 s only bounds a loaded machine
    wait_for(lambda: gone(epid), 30, "the reaper to stop the orphaned engine")
    no_survivors()
    before = {w.window_id: w.t_start for w in RunDir(out).window_records()}
    assert before

    r = subprocess.run([sys.executable, "-m", "specbench.cli", "run", "--resume", str(out), "--skip-preflight"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    rd = RunDir(out)
    after = {w.window_id: w.t_start for w in rd.window_records()}
    assert all(after[k] == t for k, t in before.items())  # finished windows were not measured again
    import pandas as pd

    cells = pd.read_csv(out / "cells.csv")
    assert len(cells) == 4 and cells["valid"].all()  # 2 variants x 2 concurrencies, complete
    # both prompts in every window, 1 pass at C=1 and 3 at C=2 (plan.category_passes)
    assert (cells["n_requests"] == cells["concurrency"].map({1: 2, 2: 6})).all()
    lost = len(rd.request_records(superseded=True)) - len(rd.request_records())
    assert lost <= 6  # at most the in-flight window (C=2) was lost and measured again
    m = json.loads((out / "run.json").read_text())
    assert all(v["status"] == "done" for v in m["variants"].values())
    # the columnar store: one file per completed window, written by the run itself (not rebuilt), holding
    # exactly the measured records, the window finished before the kill included
    from specbench.records.columnar import open_store, window_path

    files = {w.window_id: window_path(rd, w.window_id).stat().st_mtime_ns for w in rd.window_records()}
    store = open_store(rd)
    assert {w: window_path(rd, w).stat().st_mtime_ns for w in files} == files  # nothing needed a rebuild
    measured = sorted((r.window_id, r.index, r.t_send) for r in rd.request_records() if not r.warmup)
    frame = store.frame(columns=["window_id", "index", "t_send"])
    assert sorted(zip(frame.window_id, frame["index"], frame.t_send)) == measured
    no_survivors()


# -- security of the launch ------------------------------------------------------------------------------------------
def test_engine_host_defaults_to_loopback():
    cfg = parse_config({"model": {"path": "/m"}, "variants": [{"name": "a", "drafter": "autoregressive",
                        "baseline": True}], "sweep": {"output_lens": [8], "concurrency": [1]}})
    assert cfg.engine.host == "127.0.0.1"
    from specbench.server.launch import make_engine, plan_launches

    cfg.engine.version = "0.10.0"
    (la,) = plan_launches(cfg, make_engine(cfg, "/m", "m"))
    argv = la.spec.argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert la.base_url.startswith("http://127.0.0.1:")


@needs_standin
def test_config_values_never_reach_a_shell(tmp_path, port, no_survivors):
    """`; touch X`, `$(touch X)` and backticks stay single argv elements; nothing is executed."""
    pwned = tmp_path / "pwned"
    evil = [f"; touch {pwned}", f"$(touch {pwned}2)", f"`touch {pwned}3`", f"| touch {pwned}4"]
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port, sweep={"concurrency": [1]})
    cfg["engine"]["args"] = evil
    cfg["engine"]["env"]["EVIL"] = f"$(touch {pwned}5)"
    from specbench.runner import RunOptions, run_matrix

    out = tmp_path / "run"
    res = run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True))
    assert set(res.status.values()) == {"done"}
    assert not list(tmp_path.glob("pwned*"))
    command = json.loads((out / "variants" / "base" / "command.json").read_text())
    for e in evil:
        assert e in command["argv"]  # one element each, untouched
    line = (out / "variants" / "base" / "command.sh").read_text().strip()
    assert shlex.split(line)[-len(command["argv"]):] == command["argv"]  # the copy-paste line is quoted safely
    no_survivors()


# -- the suite's own guard: no test leaves this process's signal dispositions changed ------------------------
def test_dispositions_guard_sees_python_c_and_mask_changes():
    """tests/conftest.py's guard compares Python's handlers, the blocked mask and the kernel's ignored set;
    a C library setting SIG_IGN behind Python's back (libc signal()) shows in the last one only."""
    import ctypes

    from tests.conftest import restore_dispositions, signal_dispositions

    before = signal_dispositions()
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])
        ctypes.CDLL(None).signal(signal.SIGHUP, ctypes.c_void_p(1))  # SIG_IGN, set from C
        after = signal_dispositions()
        assert after["SIGINT"] == signal.SIG_IGN and after["blocked"] == ["SIGTERM"]
        assert after["SIGHUP"] == before["SIGHUP"]  # Python does not know ...
        assert "SIGHUP" in after["kernel_ignored"]  # ... the kernel does, and a child would inherit it
    finally:
        restore_dispositions(before)
    assert signal_dispositions() == before


def test_dispositions_guard_fails_the_test_that_changed_them(pytester):
    """A test that leaves SIGINT changed fails by name, and the next test finds the disposition restored."""
    pytester.makeconftest((Path(__file__).parents[1] / "conftest.py").read_text())
    pytester.makepyfile(test_culprit="""
        import signal

        AT_START = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN if pytest inherited it

        def test_a_changes_sigint():
            signal.signal(signal.SIGINT, lambda *_: None)

        def test_b_finds_it_restored():
            assert signal.getsignal(signal.SIGINT) is AT_START
        """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*test_culprit.py::test_a_changes_sigint changed this process's signal*"])

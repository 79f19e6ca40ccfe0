"""Requests reach the engine specbench launched, and only it (issue 23, item 4).

Two runs whose engines share a port: run a's server already listens when run b's engine is still loading
(a real engine keeps its port closed while it loads). b's probe must not count a's answer: the variant fails
with one line naming the foreign listener, b's engine is stopped, and nothing of a is measured as b."""

from __future__ import annotations

import json
import socket
import subprocess
import time

from specbench.config import parse_config
from specbench.runner import RunOptions, run_matrix
from specbench.server.ports import listening_pids
from tests.conftest import REPO, make_model_dir, needs_standin, standin_argv, standin_config

pytestmark = needs_standin

BASE_ONLY = [{"name": "base", "drafter": "autoregressive", "baseline": True}]
LOADING = ["{python}", "-c", "import time; time.sleep(120)  # an engine still loading: port not bound yet"]


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_foreign_listener_on_the_engine_port_fails_the_variant(tmp_path, port, monkeypatch, no_survivors):
    foreign = subprocess.Popen(standin_argv(port, "--served-model-name", "standin"), cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not _accepts(port):  # synchronise on the foreign server listening (it exits on failure)
            assert foreign.poll() is None, "the foreign stand-in did not start"
            time.sleep(0.05)
        assert foreign.pid in (listening_pids("127.0.0.1", port) or [])
        # run b checked its port before run a's server bound it: the launch-time check saw it free
        monkeypatch.setattr("specbench.runner.session.port_in_use", lambda host, port: False)
        model = make_model_dir(tmp_path / "model")
        cfg = standin_config(model, port, variants=BASE_ONLY, engine={"command": LOADING})
        out = tmp_path / "run"
        res = run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True))
        assert res.status == {"base": "failed"}
        reason = json.loads((out / "run.json").read_text())["variants"]["base"]["reason"]
        assert f"port {port} is served by PID {foreign.pid}" in reason and "not by the engine specbench launched" \
            in reason and "engine.port" in reason and "\n" not in reason, reason
        assert not (out / "requests.jsonl").exists() or not (out / "requests.jsonl").read_text().strip()
    finally:
        foreign.kill()
        foreign.wait()
    no_survivors()  # b's "loading" engine was stopped


def test_own_listener_is_not_foreign(tmp_path, port):
    """The check passes for a listener in the engine's own tree (here: the engine itself)."""
    from specbench.server.engines.base import LaunchSpec
    from specbench.server.process import EngineProcess

    spec = LaunchSpec(standin_argv(port), env={"PYTHONPATH": str(REPO)})
    proc = EngineProcess("x", spec, tmp_path / "server.log", "127.0.0.1", port)
    try:
        proc.start()
        while not _accepts(port):
            assert proc.alive()
            time.sleep(0.05)
        assert proc.foreign_listener() is None
    finally:
        proc.stop(grace_s=5)


def test_a_foreign_listener_that_appears_mid_window_fails_that_window(tmp_path, port, monkeypatch, no_survivors):
    """The check runs around every window, not only at startup: a listener that shows up once the engine is
    serving (here: reported as soon as the stand-in has received a streamed request) fails the window it
    overlaps. The window gets no WindowRecord (resume measures it again); its request records are kept."""
    import httpx

    from specbench.server.process import EngineProcess

    real = EngineProcess.foreign_listener

    def foreign_after_first_stream(self: EngineProcess) -> str | None:
        seen = real(self)
        try:
            streams = httpx.get(f"http://127.0.0.1:{port}/standin/stats", timeout=5).json()["streams"]
        except httpx.HTTPError:  # not listening yet
            streams = 0
        return "PID 99999 (another run's server)" if seen is None and streams >= 1 else seen

    monkeypatch.setattr(EngineProcess, "foreign_listener", foreign_after_first_stream)
    model = make_model_dir(tmp_path / "model")
    out = tmp_path / "run"
    res = run_matrix(parse_config(standin_config(model, port, variants=BASE_ONLY)),
                     RunOptions(out=out, skip_preflight=True))
    assert res.status == {"base": "failed"}
    reason = json.loads((out / "run.json").read_text())["variants"]["base"]["reason"]
    assert f"port {port} is served by PID 99999 (another run's server)" in reason, reason
    from specbench.records.rundir import RunDir

    assert not RunDir(out).window_records() and RunDir(out).request_records(superseded=True)
    no_survivors()

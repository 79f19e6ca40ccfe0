"""One engine process: start it in its own session, wait until it really generates, tear it down fully.

Guarantees (see docs/reliability.md): the engine runs in its own process group (setsid), its output
goes to a log file, startup fails fast with the exit code and the log tail, and `stop()` returns only
when every process of its tree is gone (SIGTERM, then SIGKILL after a grace period) and its port is
free again. Every live server is also registered for an atexit sweep, so no exit path leaves one behind.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import psutil

from specbench.server.engines.base import LaunchSpec
from specbench.server.ports import describe_pid, listening_pids, port_in_use
from specbench.shared.errors import EngineStartError

_LIVE: set[EngineProcess] = set()

# A watchdog per engine, in its own session: it waits on a pipe from specbench and, if specbench dies
# without saying "done" (SIGKILL, OOM kill), it stops the engine's process group and every process of the
# engine's tree it has seen (a worker that called setsid has left the group). This is what makes "no orphan
# servers" hold even when no Python cleanup code can run. It snapshots the tree once a second while it waits;
# psutil's identity check (pid + start time) keeps it from signalling a recycled pid.
_REAPER = r"""
import os, select, signal, sys, time
import psutil
pgid, grace = int(sys.argv[1]), float(sys.argv[2])
known = {}
def remember():
    try:
        root = psutil.Process(pgid)
        for p in [root, *root.children(recursive=True)]:
            known.setdefault(p.pid, p)
    except psutil.Error:
        pass
while True:
    remember()
    if select.select([sys.stdin], [], [], 1.0)[0]:
        if sys.stdin.readline().strip() == "done":
            sys.exit(0)
        break  # EOF without "done": specbench is gone
def alive():
    out = []
    for p in known.values():
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            pass
    return out
def signal_all(sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for p in alive():
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass
signal_all(signal.SIGTERM)
deadline = time.monotonic() + grace
while alive() and time.monotonic() < deadline:
    time.sleep(0.1)
signal_all(signal.SIGKILL)
"""


def _stop_all_at_exit() -> None:
    for proc in list(_LIVE):
        proc.stop(grace_s=5.0)


atexit.register(_stop_all_at_exit)


def log_tail(path: Path, n: int = 15, max_chars: int = 2000) -> str:
    """The last n non-empty lines of a log, for error messages."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64_000))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    tail = [ln for ln in lines if ln.strip()][-n:]
    return "\n".join(tail)[-max_chars:]


PROBE_FIRST_S = 0.1  # the first pause between readiness probes; it doubles up to PROBE_MAX_S
PROBE_MAX_S = 1.0


def probe_pause(attempt: int) -> float:
    """The pause after the `attempt`-th failed readiness probe (0-based): 0.1 s doubling to 1 s. A stand-in
    is ready within a few tenths of a second, so a fixed 1 s pause cost most tests that launch one a second
    per launch; an engine that loads for minutes is still probed only once a second."""
    return min(PROBE_MAX_S, PROBE_FIRST_S * 2 ** min(attempt, 16))


def last_log_line(path: Path) -> str:
    tail = log_tail(path, n=1, max_chars=200)
    return tail.strip()


class EngineProcess:
    """A launched engine. Use as a context manager, or call start()/stop() yourself."""

    def __init__(self, name: str, spec: LaunchSpec, log_path: Path, host: str, port: int,
                 reaper_grace_s: float = 10.0):
        self.name = name
        self.reaper_grace_s = reaper_grace_s  # SIGTERM -> SIGKILL grace of the reaper (specbench died)
        self.spec = spec
        self.log_path = log_path
        self.host = host
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self._reaper: subprocess.Popen[bytes] | None = None
        self._known: dict[int, psutil.Process] = {}  # every descendant ever seen, to reap stragglers

    # -- start ----------------------------------------------------------------------------------
    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                self.spec.argv, env={**os.environ, **self.spec.env}, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # own session + group
        except OSError as exc:
            raise EngineStartError(f"{self.name}: cannot start {self.spec.argv[0]!r}: {exc.strerror}") from None
        finally:
            log.close()
        _LIVE.add(self)
        self._reaper = subprocess.Popen([sys.executable, "-c", _REAPER, str(self.proc.pid),
                                         str(self.reaper_grace_s)],
                                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
        self._remember_tree()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def exit_code(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _remember_tree(self) -> None:
        if not self.proc:
            return
        try:
            root = psutil.Process(self.proc.pid)
            self._known[root.pid] = root
            for child in root.children(recursive=True):
                self._known[child.pid] = child
        except psutil.Error:
            pass

    def foreign_listener(self) -> str | None:
        """Who else listens on the engine's port ('PID 123 (cmdline)'), or None when every listener belongs to
        this engine's process tree (or none is visible yet). Another run's server on a shared port would
        otherwise answer this engine's probes and requests, and the measurements would be of the wrong server."""
        pids = listening_pids(self.host, self.port)
        if not pids:
            return None
        self._remember_tree()
        ours = {pid for pid, p in self._known.items() if _running(p)}
        for pid in pids:
            if pid is not None and pid not in ours:
                return describe_pid(pid)
        return None

    async def wait_ready(self, probe: Callable[[], Awaitable[object]], timeout_s: float,
                         on_wait: Callable[[float, str], None] | None = None,
                         clock: Callable[[], float] = time.monotonic,
                         sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> float:
        """Poll `probe` (a real generation) until it succeeds; returns the startup time in seconds.

        Each probe is cut off at the time left of `timeout_s`, so a server that accepts connections but
        never answers fails at the timeout, not at the probe's own request timeout. A probe result may
        carry a `detail` (what the endpoint answered); the last one is named in the timeout error.
        Between probes it pauses `probe_pause(attempt)`. `clock` and `sleep` are the time source and the
        pause (tests pass a fake pair)."""
        t0 = clock()
        last = ""
        attempt = 0
        while True:
            elapsed = clock() - t0
            code = self.exit_code()
            if code is not None:
                raise EngineStartError(
                    f"{self.name}: engine exited with code {code} during startup after {elapsed:.0f}s; "
                    f"log {self.log_path}; last lines:\n{log_tail(self.log_path)}")
            left = timeout_s - elapsed
            if left <= 0:
                said = f"; last probe: {last}" if last else ""
                raise EngineStartError(
                    f"{self.name}: engine not ready after {timeout_s:.0f}s (engine.startup_timeout_s){said}; "
                    f"log {self.log_path}; last lines:\n{log_tail(self.log_path)}")
            self._remember_tree()
            try:
                result = await asyncio.wait_for(probe(), timeout=left)
            except TimeoutError:
                result, last = False, f"no answer within the {left:.1f}s left"
            else:
                last = str(getattr(result, "detail", "") or last)
            if result:
                return clock() - t0
            if getattr(result, "fatal", False):  # e.g. it serves another model name: waiting cannot help
                raise EngineStartError(f"{self.name}: engine answered but cannot be measured: {last}; "
                                       f"log {self.log_path}")
            if on_wait:
                on_wait(elapsed, last_log_line(self.log_path))
            await sleep(min(probe_pause(attempt), max(0.0, timeout_s - (clock() - t0))))
            attempt += 1

    # -- stop -----------------------------------------------------------------------------------
    def stop(self, grace_s: float = 30.0, port_wait_s: float = 30.0) -> None:
        """SIGTERM the process group, wait for the whole tree, SIGKILL what remains, wait for the port."""
        if self.proc is None:
            return
        self._remember_tree()
        self._signal_group(signal.SIGTERM)
        procs = [p for p in self._known.values() if _running(p)]
        _, alive = psutil.wait_procs(procs, timeout=grace_s)
        if alive:
            self._signal_group(signal.SIGKILL)
            for p in alive:
                try:
                    p.kill()  # also children that left the group (setsid in a worker)
                except psutil.Error:
                    pass
            psutil.wait_procs(alive, timeout=10)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        _LIVE.discard(self)
        self._dismiss_reaper()
        deadline = time.monotonic() + port_wait_s
        while port_in_use(self.host, self.port) and time.monotonic() < deadline:
            pids = listening_pids(self.host, self.port)
            if pids and all(pid not in self._known for pid in pids):
                break  # another process's listener (ForeignListenerError): not ours to wait for
            time.sleep(0.2)

    def _dismiss_reaper(self) -> None:
        if self._reaper is None:
            return
        try:
            self._reaper.communicate(b"done\n", timeout=5)
        except (subprocess.TimeoutExpired, OSError, ValueError):
            self._reaper.kill()
        self._reaper = None

    def _signal_group(self, sig: int) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, sig)  # the group id is the leader's pid (start_new_session)
        except (ProcessLookupError, PermissionError):
            pass

    def survivors(self) -> list[int]:
        """PIDs of this engine's tree still running (empty after a clean stop)."""
        return [pid for pid, p in self._known.items() if _running(p)]

    def __enter__(self) -> EngineProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False

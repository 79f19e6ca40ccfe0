"""A variant's live engine: its process, HTTP client, headers, URLs and the files its records go to.

    async with VariantSession(cfg, launch, sink, variant_dir, reporter) as session:
        window = await measure_window(session, planned, window_id)

Entering launches the engine (or checks an external endpoint) and returns once it really generates;
leaving stops the whole process tree and closes the client, on every exit path.
"""

from __future__ import annotations

import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import httpx

from specbench.client.shards import ShardedClient, WorkerSpec, resolve_processes
from specbench.client.stream import Endpoint, make_http_client, make_transport
from specbench.client.transport import StreamTransport
from specbench.config import RunConfig
from specbench.records.rundir import COMMAND_FILE, JsonlAppender, RunDir, atomic_write, write_json
from specbench.server.engines.base import Engine
from specbench.server.launch import VariantLaunch, api_headers, redact_env
from specbench.server.ports import port_in_use, port_owner
from specbench.server.process import EngineProcess
from specbench.shared.errors import EngineStartError, ForeignListenerError
from specbench.shared.progress import Reporter, make_reporter
from specbench.shared.schema import RequestRecord, WindowRecord


@dataclass
class RecordSink:
    """Where measurements go: raw request and window files, appended and fsynced record by record; with
    `columnar`, each completed window's requests are then also written to the columnar store (store/)."""

    requests: JsonlAppender
    windows: JsonlAppender
    run_id: str
    columnar: RunDir | None = None
    _open_windows: dict[str, list[RequestRecord]] = field(default_factory=dict)

    @classmethod
    def open(cls, rd: RunDir, run_id: str) -> RecordSink:
        # opening repairs a torn tail left by a crash, before anything is appended again
        return cls(JsonlAppender(rd.requests), JsonlAppender(rd.windows), run_id, columnar=rd)

    def request(self, rec: RequestRecord) -> None:
        rec.run_id = self.run_id
        self.requests.append(rec)
        if self.columnar is not None and not rec.warmup:
            self._open_windows.setdefault(rec.window_id, []).append(rec)

    def window(self, rec: WindowRecord) -> None:
        rec.run_id = self.run_id
        self.windows.append(rec)
        if self.columnar is not None:
            self._write_columnar(self.columnar, rec, self._open_windows.pop(rec.window_id, []))

    @staticmethod
    def _write_columnar(rd: RunDir, rec: WindowRecord, records: list[RequestRecord]) -> None:
        """The window's records are on disk already: a failed write here loses nothing (the file is rebuilt
        from requests.jsonl on first read)."""
        import pyarrow as pa

        from specbench.records.columnar import write_window

        try:
            write_window(rd, rec, records)
        except (OSError, ValueError, pa.ArrowException):  # disk full, unencodable value, ...
            pass

    def close(self) -> None:
        self.requests.close()
        self.windows.close()


class VariantSession:
    """One launch of one variant, from start to stop (an async context manager)."""

    def __init__(self, cfg: RunConfig, launch: VariantLaunch, sink: RecordSink, variant_dir: Path,
                 reporter: Reporter | None = None):
        if launch.engine is None:
            raise ValueError(f"{launch.name}: the launch has no engine (use launch.plan_launches)")
        self.cfg = cfg
        self.launch = launch
        self.engine: Engine = launch.engine
        self.sink = sink
        self.variant_dir = variant_dir
        self.reporter = reporter or make_reporter(quiet=True)
        self.headers = api_headers(cfg.engine)  # requests, probes and scrapes all authenticate
        self.request_timeout_s = cfg.sweep.request_timeout_s
        self.proc: EngineProcess | None = None
        self.startup_s: float | None = None
        self.last_window: list[RequestRecord] = []  # request records of the last measured window
        self._http: httpx.AsyncClient | None = None
        self._transport: StreamTransport | None = None  # what the streamed requests go through
        self.shards: ShardedClient | None = None  # client.processes > 1: the worker processes
        # the session's one clock (`now`): the wall clock once, then the monotonic clock (CLOCK_MONOTONIC, the
        # same in every process of the host); every t_send and every window edge is on it, so a wall-clock
        # step or slew (NTP) during the session cannot drop or admit a request at a window's edge
        self.clock_base = time.time() - time.perf_counter()
        # one thread appends the window's request records in order, off the event loop (measure_window)
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{launch.name}-records")

    @property
    def name(self) -> str:
        return self.launch.name

    @property
    def base_url(self) -> str:
        return self.launch.base_url

    @property
    def metrics_url(self) -> str:
        return self.launch.metrics_url

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            raise RuntimeError("VariantSession used outside `async with`")
        return self._http

    def now(self) -> float:
        """The session's clock (seconds, wall-clock epoch): a window's edges and every t_send."""
        return self.clock_base + time.perf_counter()

    @property
    def endpoint(self) -> Endpoint:
        """What the load loops send through: engine, stream transport, URL, timeout, headers, the session's
        clock."""
        if self._transport is None:
            raise RuntimeError("VariantSession used outside `async with`")
        return Endpoint(self.engine, self._transport, self.base_url, self.request_timeout_s, self.headers,
                        self.clock_base)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    async def __aenter__(self) -> VariantSession:
        self._http = make_http_client(max(self.cfg.sweep.concurrency))
        self._http.headers.update(self.headers or {})
        self._transport = make_transport(self.base_url, self._http)
        try:
            if self.launch.spec is None:
                self.reporter.phase(self.name, "checking endpoint")
                probe = await self.engine.probe_ready(self.http, self.base_url)
                if not probe:
                    said = f": {probe.detail}" if getattr(probe, "detail", "") else ""
                    raise EngineStartError(f"{self.name}: endpoint {self.base_url} does not generate{said}")
            else:
                await self._start()
            self._start_shards()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _start(self) -> None:
        spec, e = self.launch.spec, self.cfg.engine
        assert spec is not None
        self.variant_dir.mkdir(parents=True, exist_ok=True)
        write_json(self.variant_dir / COMMAND_FILE, {"argv": spec.argv, "env": redact_env(spec.env)})
        atomic_write(self.variant_dir / "command.sh", shell_line(spec.argv, redact_env(spec.env)) + "\n")
        if port_in_use(e.host, e.port):
            owner = port_owner(e.port) or "unknown process"
            raise EngineStartError(f"{self.name}: port {e.port} is already in use by {owner} (engine.port)")
        self.proc = EngineProcess(self.name, spec, self.variant_dir / "server.log", e.host, e.port,
                                  reaper_grace_s=e.stop_timeout_s)
        self.reporter.phase(self.name, "starting engine")
        self.proc.start()

        def on_wait(elapsed: float, line: str) -> None:
            self.reporter.phase(self.name, f"startup {elapsed:.0f}s | {line[-70:]}")

        async def probe() -> object:
            self.check_port()  # a foreign server already there would answer the probe
            ready = await self.engine.probe_ready(self.http, self.base_url)
            if ready:
                self.check_port()  # ... or one that bound the port while the probe ran
            return ready

        t = await self.proc.wait_ready(probe, e.startup_timeout_s, on_wait)
        self.startup_s = round(t, 2)
        self.reporter.log(f"{self.name}: engine ready in {self.startup_s:.1f}s")

    def _start_shards(self) -> None:
        n = resolve_processes(self.cfg.client.processes, max(self.cfg.sweep.concurrency))
        if n < 2:
            return
        self.reporter.phase(self.name, f"starting {n} client processes")
        spec = WorkerSpec(self.engine, self.base_url, self.request_timeout_s, dict(self.headers or {}),
                          self.clock_base, max(self.cfg.sweep.concurrency))
        self.shards = ShardedClient(n, spec)

    def check_port(self) -> None:
        """Raise ForeignListenerError when a process outside the launched engine's tree listens on its port
        (another run sharing engine.port). Skipped for an external endpoint, and where the engine's tree is
        not local (engine.launch_prefix: srun, a container exec; engine.nodes > 1)."""
        e = self.cfg.engine
        if self.proc is None or e.launch_prefix or e.nodes > 1:
            return
        who = self.proc.foreign_listener()
        if who is not None:
            raise ForeignListenerError(
                f"{self.name}: port {e.port} is served by {who}, not by the engine specbench launched "
                f"(PID {self.proc.pid}): another run or server shares engine.port; give each run its own port")

    async def close(self) -> None:
        """Stop the client processes and the engine (its whole tree; returns when it is gone), close the client."""
        if self.shards is not None:
            self.shards.close()
            self.shards = None
        if self.proc is not None:
            self.reporter.phase(self.name, "stopping engine")
            self.proc.stop(grace_s=self.cfg.engine.stop_timeout_s)
        self.writer.shutdown(wait=True)  # records still queued (a window cut short) are written, never lost
        if self._transport is not None:
            await self._transport.close()
            self._transport = None
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def shell_line(argv: list[str], env: dict[str, str]) -> str:
    """For reading and copy-paste only: specbench itself never runs a shell."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (prefix + " " if prefix else "") + shlex.join(argv)

"""The closed loop sharded across worker processes (`client.processes: N | auto`).

Each worker is a Python process (subprocess, talking over a socket pair with multiprocessing's
Connection framing) with its own event loop and lean stream client; it streams the planned
requests the parent hands it (client.stream_planned, the same function as in one process) and sends each
record back as it completes. The parent keeps the closed loop: C requests in flight in total, worker i
holding at most its share c_i (C split as evenly as possible), and a freed slot gets the next request of
the window, so the loop drains exactly as in one process. The parent alone writes records.

One clock: every worker stamps t_send as the parent's clock base (time.time() - perf_counter() in the
parent) + its own perf_counter(), which is CLOCK_MONOTONIC, shared by every process of the host; chunk
offsets and TTFTs are perf_counter differences within one request.

A worker that dies fails the window (ClientWorkerError, one line naming it); the pool is then stopped, so
nothing is left running. The parent also stops every worker when the session ends, on every exit path.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from .client import Endpoint, make_http_client, make_transport, stream_planned
from .engines.base import Engine
from .errors import ClientWorkerError
from .plan import PlannedRequest
from .records import RequestRecord

MAX_AUTO = 8


def resolve_processes(processes: int | str, max_concurrency: int) -> int:
    """`auto`: one worker per CPU this process may run on, at most MAX_AUTO and at most the largest C."""
    if processes == "auto":
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return max(1, min(cpus, MAX_AUTO, max_concurrency))
    return max(1, min(int(processes), max_concurrency))


def split(concurrency: int, n: int) -> list[int]:
    """C as n shares differing by at most one (the first ones larger): 5 over 2 -> [3, 2]."""
    return [concurrency // n + (1 if i < concurrency % n else 0) for i in range(n)]


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs to rebuild its Endpoint (everything picklable)."""

    engine: Engine
    base_url: str
    timeout_s: float
    headers: dict[str, str]
    clock_base: float
    max_connections: int


def worker_main(fd: int) -> None:
    """A worker's entry point: its end of the socket pair; the first message is its WorkerSpec. Ctrl-C goes
    to the whole process group: the parent handles it and stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    spec = conn.recv()
    asyncio.run(_worker(conn, spec))


async def _worker(conn: Connection, spec: WorkerSpec) -> None:
    loop = asyncio.get_running_loop()
    http = make_http_client(spec.max_connections)
    transport = make_transport(spec.base_url, http)
    ep = Endpoint(spec.engine, transport, spec.base_url, spec.timeout_s, spec.headers, spec.clock_base)
    stop = loop.create_future()
    tasks: set[asyncio.Task[None]] = set()

    async def one(planned: PlannedRequest) -> None:
        rec = await stream_planned(ep, planned)
        conn.send(rec)

    def on_message() -> None:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            msg = None
        if msg is None:  # the parent said stop, or is gone
            if not stop.done():
                stop.set_result(None)
            return
        task = loop.create_task(one(msg))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    loop.add_reader(conn.fileno(), on_message)
    conn.send("ready")
    try:
        await stop
    finally:
        loop.remove_reader(conn.fileno())
        for t in tasks:
            t.cancel()
        await transport.close()
        await http.aclose()


class ShardedClient:
    """N worker processes for one session; `run_closed_loop` per window, `close` at the end."""

    def __init__(self, n: int, spec: WorkerSpec):
        self.workers: list[tuple[subprocess.Popen[bytes], Connection]] = []
        try:
            for _ in range(n):
                ours, theirs = socket.socketpair()
                code = f"from specbench.client_shards import worker_main; worker_main({theirs.fileno()})"
                proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(theirs.fileno(),),
                                        stdin=subprocess.DEVNULL)
                theirs.close()
                conn = Connection(ours.detach())
                self.workers.append((proc, conn))
                conn.send(spec)
            for i, (proc, conn) in enumerate(self.workers):
                if not conn.poll(60) or conn.recv() != "ready":
                    raise ClientWorkerError(f"client worker {i + 1} (PID {proc.pid}) did not start "
                                            f"(exit code {proc.poll()})")
        except (OSError, EOFError) as exc:
            self.close()
            raise ClientWorkerError(f"cannot start the client worker processes (client.processes): {exc}") from None
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        return [p.pid for p, _ in self.workers]

    async def run_closed_loop(self, requests: Sequence[PlannedRequest], concurrency: int,
                              on_record: Callable[[RequestRecord], None], label: str) -> list[RequestRecord]:
        """C requests in flight in total across the workers until all are done; `label` (the window id)
        names the window in a worker-death error."""
        loop = asyncio.get_running_loop()
        queue = list(reversed(requests))
        records: list[RequestRecord] = []
        shares = split(min(concurrency, len(requests)), len(self.workers))
        in_flight = [0] * len(self.workers)
        finished = loop.create_future()

        def send_next(i: int) -> None:
            if queue:
                self.workers[i][1].send(queue.pop())
                in_flight[i] += 1

        def on_readable(i: int) -> None:
            proc, conn = self.workers[i]
            try:
                rec: Any = conn.recv()
            except (EOFError, OSError):
                if not finished.done():
                    finished.set_exception(ClientWorkerError(
                        f"client worker {i + 1} of {len(self.workers)} (PID {proc.pid}) died during {label} "
                        f"(exit code {_exit_code(proc)}): the window "
                        "is not complete and is measured again on resume"))
                return
            in_flight[i] -= 1
            records.append(rec)
            on_record(rec)
            send_next(i)
            if not queue and not any(in_flight) and not finished.done():
                finished.set_result(None)

        for i, (_, conn) in enumerate(self.workers):
            loop.add_reader(conn.fileno(), on_readable, i)
        try:
            for i, share in enumerate(shares):
                for _ in range(share):
                    send_next(i)
            if not any(in_flight):
                return records
            await finished
        except BaseException:
            self.close()  # a dead worker, or cancellation: stop them all, nothing is left running
            raise
        finally:
            for _, conn in self.workers:
                try:
                    loop.remove_reader(conn.fileno())
                except (ValueError, OSError):
                    pass
        return records

    def close(self) -> None:
        """Stop every worker (a polite message, then terminate, then kill); returns when all are gone."""
        for _, conn in self.workers:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 5
        for proc, _ in self.workers:
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None:
                    proc.send_signal(sig)
                try:
                    proc.wait(max(0.5, deadline - time.monotonic()) if sig is None else 2)
                    break
                except subprocess.TimeoutExpired:
                    continue
        for _, conn in self.workers:
            conn.close()
        self.workers = []


def _exit_code(proc: subprocess.Popen[bytes]) -> str:
    try:
        code = proc.wait(2)  # it is gone or going: its pipe closed
    except subprocess.TimeoutExpired:
        return "unknown"
    return str(code)

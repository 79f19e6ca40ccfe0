"""The closed loop sharded across worker processes (`client.processes: N | auto`).

Each worker is a Python process (subprocess, talking over a socket pair: pickled messages, `Channel`) with
its own event loop and lean stream client; it streams the planned requests the parent hands it
(client.stream_planned, the same function as in one process) and sends each record back as it completes. The
parent keeps the closed loop: C requests in flight in total, worker i holding at most its share c_i (C split
as evenly as possible), and a freed slot gets the next request of the window, so the loop drains exactly as
in one process. The parent alone writes records. Chosen by load/ (load/sharded.py) like any load shape.

Both sides send without blocking (the loop writes as the peer reads): a long prompt one way and a long record
the other can neither deadlock the two nor stall a worker's other streams.

One clock: every worker stamps t_send on the session's clock (runner/session.py: its wall-clock base +
perf_counter(), which is CLOCK_MONOTONIC, shared by every process of the host), as the parent stamps a
window's edges; chunk offsets and TTFTs are perf_counter differences within one request. Each worker times
its own loop's lag over the window (looplag.py), which the self-check reports.

A worker that dies fails the window (ClientWorkerError, one line naming it), and so does an exception raised
while a worker streamed a request (the exception itself, as in one process); the pool is then stopped, so
nothing is left running. The parent also stops every worker when the session ends, on every exit path.
"""

from __future__ import annotations

import asyncio
import functools
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specbench.client.channel import Channel
from specbench.client.inflight import InFlightQueue
from specbench.client.looplag import LagTimer
from specbench.client.stream import Endpoint, make_http_client, make_transport, stream_planned
from specbench.plan.windows import PlannedRequest
from specbench.server.engines.base import Engine
from specbench.shared.errors import ClientWorkerError
from specbench.shared.schema import RequestRecord

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
    chan = Channel(socket.socket(fileno=fd))
    spec = chan.recv_now(60)
    asyncio.run(_worker(chan, spec))


async def _worker(chan: Channel, spec: WorkerSpec) -> None:
    """Messages in: a PlannedRequest (stream it), LAG_START / LAG_STOP (the window's loop-lag timer), None
    (stop). Out: ("record", RequestRecord), ("error", exception) when streaming raised, ("lags", [s, ...])."""
    loop = asyncio.get_running_loop()
    http = make_http_client(spec.max_connections)
    transport = make_transport(spec.base_url, http)
    ep = Endpoint(spec.engine, transport, spec.base_url, spec.timeout_s, spec.headers, spec.clock_base)
    stop = loop.create_future()
    tasks: set[asyncio.Task[None]] = set()
    lag: LagTimer | None = None

    async def one(planned: PlannedRequest) -> None:
        try:
            rec = await stream_planned(ep, planned)
        except Exception as exc:  # in one process this fails the window: here too, with its reason
            chan.send(("error", _portable(exc)))
            return
        chan.send(("record", rec))

    def on_message(msg: Any) -> None:
        nonlocal lag
        if msg is None:
            if not stop.done():
                stop.set_result(None)
        elif msg == LAG_START:
            if lag is not None:
                lag.cancel()
            lag = LagTimer.start()
        elif msg == LAG_STOP:
            chan.send(("lags", lag.stop() if lag is not None else []))
            lag = None
        else:
            task = loop.create_task(one(msg))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    chan.on_message = on_message
    chan.on_eof = lambda: None if stop.done() else stop.set_result(None)  # the parent is gone
    chan.send("ready")
    chan.attach(loop)
    try:
        await stop
    finally:
        chan.detach()
        for t in tasks:
            t.cancel()
        await transport.close()
        await http.aclose()


def _portable(exc: Exception) -> Exception:
    """The exception itself when it crosses a pipe intact (pickled and read back), else a RuntimeError
    with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


LAG_START, LAG_STOP = "lag-start", "lag-stop"


class ShardedClient:
    """N worker processes for one session; `run_closed_loop` per window, `close` at the end."""

    def __init__(self, n: int, spec: WorkerSpec):
        self.workers: list[tuple[subprocess.Popen[bytes], Channel]] = []
        self.last_lags_s: list[list[float]] = []  # each worker's loop lags over the last sharded window
        try:
            for _ in range(n):
                ours, theirs = socket.socketpair()
                code = f"from specbench.client.shards import worker_main; worker_main({theirs.fileno()})"
                proc = subprocess.Popen([sys.executable, "-c", code], pass_fds=(theirs.fileno(),),
                                        stdin=subprocess.DEVNULL)
                theirs.close()
                chan = Channel(ours)
                self.workers.append((proc, chan))
                chan.send_now(spec, 60)
            for i, (proc, chan) in enumerate(self.workers):
                try:
                    ready = chan.recv_now(60)
                except (OSError, EOFError):
                    ready = None
                if ready != "ready":
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
        names the window in a worker-death error. Each worker times its own event loop over the window
        (`last_lags_s`, for the self-check). An exception raised while a worker streamed a request fails
        the window with that exception, as it does in one process."""
        if not self.workers:
            raise ClientWorkerError(f"the client worker processes were stopped before {label}")
        loop = asyncio.get_running_loop()
        queue = InFlightQueue(requests, concurrency)  # no prompt in flight twice (client/inflight.py)
        waiting: list[int] = []  # a free slot of a worker for which no request could go yet
        records: list[RequestRecord] = []
        shares = split(min(concurrency, len(requests)), len(self.workers))
        in_flight = [0] * len(self.workers)
        lags: dict[int, list[float]] = {}
        finished, lagged = loop.create_future(), loop.create_future()
        self.last_lags_s = []

        def fail(exc: BaseException) -> None:
            for fut in (finished, lagged):
                if not fut.done():
                    fut.set_exception(exc)

        def send_next(i: int) -> None:
            if (planned := queue.take()) is not None:
                self.workers[i][1].send(planned)
                in_flight[i] += 1
            elif queue:
                waiting.append(i)

        def on_message(i: int, msg: Any) -> None:
            kind, value = msg
            if kind == "lags":
                lags[i] = value
                if len(lags) == len(self.workers) and not lagged.done():
                    lagged.set_result(None)
                return
            if kind == "error":
                fail(value)
                return
            in_flight[i] -= 1
            queue.done(value.prompt_id)
            records.append(value)
            on_record(value)
            send_next(i)
            for _ in range(len(waiting)):  # slots left free while every request left was of a prompt in flight
                send_next(waiting.pop(0))
            if not queue and not any(in_flight) and not finished.done():
                finished.set_result(None)

        def on_eof(i: int) -> None:
            proc = self.workers[i][0]
            fail(ClientWorkerError(
                f"client worker {i + 1} of {len(self.workers)} (PID {proc.pid}) died during {label} "
                f"(exit code {_exit_code(proc)}): the window is not complete and is measured again on resume"))

        for i, (_, chan) in enumerate(self.workers):
            chan.on_message = functools.partial(on_message, i)
            chan.on_eof = functools.partial(on_eof, i)
            chan.send(LAG_START)
            chan.attach(loop)
        try:
            for i, share in enumerate(shares):
                for _ in range(share):
                    send_next(i)
            if any(in_flight):
                await finished
            for _, chan in self.workers:
                chan.send(LAG_STOP)
            await lagged
        except BaseException:
            self.close()  # a dead worker, an error, or cancellation: stop them all, nothing is left running
            raise
        finally:
            for _, chan in self.workers:
                chan.detach()
            for fut in (finished, lagged):  # an exception set but never awaited is retrieved here
                if fut.done() and not fut.cancelled():
                    fut.exception()
        self.last_lags_s = [lags[i] for i in range(len(self.workers))]
        return records

    def close(self) -> None:
        """Stop every worker (the socket closed, then terminate, then kill); returns when all are gone."""
        for _, chan in self.workers:
            try:
                chan.close()  # the worker reads the end of its socket and stops
            except OSError:
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
        self.workers = []


def _exit_code(proc: subprocess.Popen[bytes]) -> str:
    try:
        code = proc.wait(2)  # it is gone or going: its pipe closed
    except subprocess.TimeoutExpired:
        return "unknown"
    return str(code)

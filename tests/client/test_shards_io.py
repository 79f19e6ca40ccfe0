"""The sharded client's channel and clock (issue 30, items 1-4): a wall-clock step during a window drops no
request, an exception inside a worker fails the window with its reason (as in one process), megabyte prompts
and records cross the shards without a hang, and each worker's loop lag reaches the self-check.

The hang tests run the client in a thread watched with a long join timeout: it fires only on a hang (a
blocked send would stop the event loop itself, so an asyncio timeout could never fire)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from specbench.client.shards import ShardedClient, WorkerSpec
from specbench.client.sse_http import SSEClient
from specbench.client.stream import Endpoint, make_http_client, run_closed_loop
from specbench.config import parse_config
from specbench.plan.windows import PlannedRequest, RequestIdentity
from specbench.records.rundir import RunDir
from specbench.runner import RunOptions, run_matrix
from specbench.runner.selfcheck import ClientCheck
from specbench.server.engines.base import RequestSpec
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import sweep_facts
from tests.conftest import needs_standin
from tests.runner.test_client_paths import config

CFG = parse_config({"model": {"path": "/m"}, "variants": [{"name": "a", "drafter": "autoregressive",
                    "baseline": True}], "sweep": {"output_lens": [8], "concurrency": [1]}})
HANG_S = 120.0  # only a hang takes this long (each test finishes in seconds)
MB = 1 << 20


def engine() -> VLLMEngine:
    return VLLMEngine(CFG.engine, sweep_facts(CFG), "/m", "m")


def planned(n: int, prompt: str = "hi", max_tokens: int = 8) -> list[PlannedRequest]:
    out = []
    for i in range(n):
        fields = RequestIdentity(variant="a", cell_id="c", point_id="p", window_id="a|p|r1", category="code",
                                 prompt_id=f"q{i}", input_len=None, output_len=max_tokens, concurrency=4,
                                 temperature=0.0, launch=1, repeat=1, index=i, warmup=False)
        spec = RequestSpec(messages=[{"role": "user", "content": prompt}], prompt_text=prompt,
                           max_tokens=max_tokens, temperature=0.0, seed=0)
        out.append(PlannedRequest(spec=spec, fields=fields))
    return out


class BatchServer:
    """An OpenAI-style streaming server in its own thread and loop: it reads each request's body whole,
    holds the answers until `batch` requests are in, then answers them all at once, each with one chunk of
    `text` (so every worker finishes several records at the same moment)."""

    def __init__(self, batch: int, text: str, max_tokens: int = 8):
        self.batch, self.text, self.max_tokens = batch, text, max_tokens
        self.bodies: list[int] = []  # the body size of each request received
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.release = asyncio.Event()
        self.waiting = 0
        self.server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        self.ready.set()
        self.loop.run_forever()

    def _body(self) -> bytes:
        ids = list(range(1, self.max_tokens + 1))
        chunk = {"choices": [{"index": 0, "delta": {"content": self.text}, "token_ids": ids,
                              "finish_reason": "length"}],
                 "usage": {"prompt_tokens": 5, "completion_tokens": len(ids), "total_tokens": 5 + len(ids)}}
        return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                n = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n")
                             if ln.lower().startswith(b"content-length")))
                self.bodies.append(len(await reader.readexactly(n)))
                self.waiting += 1
                release = self.release
                if self.waiting == self.batch:  # the batch is in: answer all of it now
                    self.waiting, self.release = 0, asyncio.Event()
                    release.set()
                await release.wait()
                body = self._body()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"content-length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def watched(fn: Callable[[], Any], pool: list[ShardedClient]) -> Any:
    """fn() in a thread; a hang (HANG_S) kills the pool's workers and fails the test."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG_S)
    if t.is_alive():
        for shards in pool:
            for pid in shards.pids:
                os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the sharded client hung (no answer in {HANG_S:g} s)")
    if "error" in out:
        raise out["error"]
    return out["value"]


def spec(url: str, headers: dict[str, str] | None = None) -> WorkerSpec:
    return WorkerSpec(engine(), url, 60.0, headers or {}, time.time() - time.perf_counter(), 8)


def test_megabyte_prompts_and_records_cross_the_shards(no_survivors):
    """2 MB out per request (the prompt, twice in a planned request) and 1 MB back per record, answered in
    batches of C so each worker finishes records together while the parent sends it the next prompts: with
    blocking sends on both loops the two wait for each other forever."""
    server = BatchServer(batch=4, text="x" * MB)
    pool: list[ShardedClient] = []
    reqs = planned(16, prompt="p" * MB)

    def go() -> tuple[list[Any], list[list[float]]]:
        shards = ShardedClient(2, spec(server.url))
        pool.append(shards)
        try:
            recs = asyncio.run(shards.run_closed_loop(reqs, 4, lambda r: None, "a|p|r1"))
            return recs, shards.last_lags_s
        finally:
            shards.close()

    try:
        recs, lags = watched(go, pool)
    finally:
        server.close()
    assert len(recs) == 16 and all(r.error is None and len(r.text) == MB for r in recs), \
        [r.error for r in recs]
    assert sorted(r.index for r in recs) == list(range(16)) and min(server.bodies) > MB
    assert len(lags) == 2 and all(lags)  # each worker timed its own loop over the window
    no_survivors()


@pytest.mark.parametrize("processes", [1, 2])
def test_an_exception_inside_a_worker_fails_the_window_as_in_one_process(processes, no_survivors):
    """A header that is not latin-1 raises inside the request (sse_http encodes the head): in one process the
    window fails with that exception; across workers too, with the same reason, instead of hanging."""
    server = BatchServer(batch=1, text="x")
    headers = {"X-Note": "caf\u00e9 \u20ac"}  # the euro sign has no latin-1 byte
    pool: list[ShardedClient] = []

    def one_process() -> Any:
        async def run() -> Any:
            http, sse = make_http_client(4), SSEClient()
            try:
                ep = Endpoint(engine(), sse, server.url, 60.0, headers)
                return await run_closed_loop(ep, planned(4), 2, lambda r: None)
            finally:
                await sse.close()
                await http.aclose()
        return asyncio.run(run())

    def sharded() -> Any:
        shards = ShardedClient(2, spec(server.url, headers))
        pool.append(shards)
        try:
            return asyncio.run(shards.run_closed_loop(planned(4), 2, lambda r: None, "a|p|r1"))
        finally:
            shards.close()

    try:
        with pytest.raises(UnicodeEncodeError) as err:
            watched(one_process if processes == 1 else sharded, pool)
    finally:
        server.close()
    assert "latin-1" in str(err.value) and "\\u20ac" in str(err.value)
    no_survivors()


class _Shards:
    pids: list[int] = []

    def __init__(self, lags: list[list[float]]):
        self.last_lags_s = lags


def test_the_self_check_reports_the_largest_lag_of_any_worker():
    async def go() -> dict[str, float]:
        check = ClientCheck.start("w", None)
        check.shards = _Shards([[0.001] * 200, [0.002] * 199 + [0.5]])  # type: ignore[assignment]
        await asyncio.sleep(0.05)
        return await check.stop()

    out = asyncio.run(go())
    assert out["loop_lag_max_ms"] == pytest.approx(500.0) and out["loop_lag_p99_ms"] >= 2.0


@needs_standin
def test_a_wall_clock_step_during_a_sharded_window_drops_no_request(tmp_path, port, monkeypatch, no_survivors):
    """The wall clock steps 50 ms forward (NTP) once the workers are up: no edge of any window moves, so every
    request counts and every send lies inside its window."""
    real_time, step = time.time, [0.0]
    monkeypatch.setattr(time, "time", lambda: real_time() + step[0])
    real_init = ShardedClient.__init__

    def init(self: ShardedClient, n: int, spec: WorkerSpec) -> None:
        real_init(self, n, spec)
        step[0] = 0.05

    monkeypatch.setattr(ShardedClient, "__init__", init)
    cfg = config(tmp_path, port)
    cfg["variants"] = cfg["variants"][:1]
    cfg["client"] = {"processes": 2}
    out = tmp_path / "run"
    res = run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True))
    assert step[0] == 0.05 and set(res.status.values()) == {"done"}, res.status
    rd = RunDir(out)
    sent = [r for r in rd.request_records(superseded=True) if not r.warmup]
    counted = [r for r in rd.request_records() if not r.warmup]
    assert sent and len(counted) == len(sent)
    windows = {w.window_id: w for w in rd.window_records()}
    assert all(windows[r.window_id].t_start <= r.t_send <= windows[r.window_id].t_end for r in sent)
    no_survivors()

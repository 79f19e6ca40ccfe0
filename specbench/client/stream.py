"""The load generator: streamed requests, closed loop with exactly C in flight, per-request timings.

Timing points (defined in docs/metrics.md): t0 just before the request is sent; each SSE chunk that
carries output tokens is time-stamped on arrival with how many tokens it carries (from the server's
cumulative usage when available, else the token ids it lists); TTFT is the first such chunk.

Nothing the server sends is taken on trust: the tokens received are counted and reconciled with the
final usage, an empty or wrong-length output is an error (`check_output`), and text that is not valid
Unicode (a lone UTF-16 surrogate) is stored escaped (`safe_text`), so every record can be written.

The stream goes through a StreamTransport (specbench/client/transport.py): the lean one (specbench/client/sse_http.py:
the response is parsed in the connection's data callback, SSE events are split from the raw bytes, the events
of each read are handed over at once, with the time the read arrived) or httpx (the reference path, and
endpoints behind a proxy); each event's data is decoded once and counted (`_consume`). The request's end
(e2e_s) is the arrival of the read that held [DONE], on the same clock as the chunks.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from specbench.client.httpx_transport import HttpxTransport
from specbench.client.inflight import InFlightQueue
from specbench.client.sse_http import SSEClient
from specbench.client.transport import ABORT, CONTINUE, END, StreamError, StreamTransport, behind_proxy
from specbench.plan.windows import PlannedRequest
from specbench.server.engines.base import Engine, RequestSpec
from specbench.server.engines.fastchunk import FastChunk, chunk_reader
from specbench.shared.schema import RequestRecord, SpecDetails

SSE_HEADERS = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
_DONE = (b"[DONE]", "[DONE]")
_DECODE = msgspec.json.Decoder().decode
_ENCODE = msgspec.json.Encoder().encode
INT64 = (-(2**63), 2**63 - 1)  # what the columnar store (store.py) holds per token id


@dataclass(frozen=True)
class Endpoint:
    """Where and how requests are sent: the engine (bodies, chunk parsing), the stream transport
    (make_transport), the server's base URL, the per-request timeout (sweep.request_timeout_s) and the
    headers of every request."""

    engine: Engine
    transport: StreamTransport
    base_url: str
    timeout_s: float
    headers: Mapping[str, str] | None = None
    clock_base: float | None = None  # t_send = clock_base + perf_counter() (a sharded client's one clock)


@dataclass
class StreamResult:
    ttft_s: float | None = None
    e2e_s: float | None = None
    chunk_offsets_s: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    token_ids: list[int] | None = None
    text: str = ""
    finish_reason: str | None = None
    spec: SpecDetails | None = None
    error: str | None = None


@dataclass
class _Tally:
    """What was received, as counted by the client (not as claimed by the server's usage)."""

    ids: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    seen_cumulative: int = 0
    ids_streamed: bool = False  # some chunk listed its token ids
    exact: bool = True  # every chunk's token count came from usage deltas or ids (not the text fallback)
    done: bool = False
    done_s: float = 0.0  # when the read holding [DONE] arrived, from the send


def make_transport(base_url: str, http: httpx.AsyncClient) -> StreamTransport:
    """The lean stream transport, or httpx (`http`, not closed by the transport) for an endpoint the environment
    routes through a proxy (the lean one connects directly)."""
    return HttpxTransport(http) if behind_proxy(base_url) else SSEClient()


def safe_text(s: str) -> str:
    """`s` as valid Unicode: a lone UTF-16 surrogate (JSON's "\\ud83d" without its pair) becomes the six
    characters `\\ud83d`, so the record can be written as UTF-8 and read back; valid text is unchanged."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


def safe_value(v: Any) -> Any:
    """safe_text applied to every string of a JSON value (a chunk's raw payload kept in a record)."""
    if isinstance(v, str):
        return safe_text(v)
    if isinstance(v, dict):
        return {safe_text(str(k)): safe_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [safe_value(x) for x in v]
    return v


def decode_json(data: bytes | str) -> Any:
    """One event's JSON (msgspec: about 4x faster than json.loads on a vLLM chunk; json.loads for what
    msgspec refuses, e.g. a lone surrogate escape). Raises ValueError when it is not JSON."""
    try:
        return _DECODE(data)
    except msgspec.DecodeError:
        return json.loads(data)


async def stream_request(ep: Endpoint, req: RequestSpec) -> StreamResult:
    """Send one streaming request and time it. Never raises for request-level failures: the error
    is recorded in the result, so one bad request cannot lose a window's other measurements.

    Both transports feed the same per-event code (`_consume`): bytes (the lean transport) through the fast
    chunk decoder, str (httpx, the reference path) as a dict through `Engine.parse_chunk`."""
    res = StreamResult()
    body = ep.engine.request_body(req)
    url = ep.base_url + ep.engine.request_path(req)
    headers = {**SSE_HEADERS, **(ep.headers or {})}
    tally = _Tally()
    t0 = time.perf_counter()
    reader = _Reader(ep.engine, chunk_reader(ep.engine), res, tally, t0)

    try:
        async with asyncio.timeout(ep.timeout_s):
            resp = await ep.transport.post(url, _ENCODE(body), headers, reader.on_events)
            status, ctype = resp.status, resp.headers.get("content-type", "")
            if status != 200:
                text = resp.body.decode("utf-8", "replace")[:200]
                res.error = f"HTTP {status}: {' '.join(text.split())}"
            elif "text/event-stream" not in ctype:
                res.error = f"not an event stream: Content-Type {ctype!r}"
    except TimeoutError:
        res.error = f"timed out after {ep.timeout_s:g}s (sweep.request_timeout_s)"
    except StreamError as exc:
        res.error = str(exc)[:220]
    _finish(res, tally, t0)
    if res.error is None:
        res.error = check_output(res, tally, req.max_tokens if _ignores_eos(body) else None)
    return res


@dataclass(slots=True)
class _Reader:
    """One request's stream as events arrive: each event's data into its result (both paths)."""

    engine: Engine
    fast: FastChunk | None  # engines/fastchunk.py (bytes events), or None: every chunk through engine.parse_chunk
    res: StreamResult
    tally: _Tally
    t0: float

    def on_events(self, datas: Sequence[bytes | str], t: float) -> int:
        """Events in order, all arrived at `t`: CONTINUE, END after [DONE], ABORT on an error."""
        tally, res = self.tally, self.res
        if tally.done:
            return END  # nothing counts after [DONE]
        try:
            res.error = _consume(self, datas, t - self.t0)
        except Exception as exc:  # an engine's chunk parser on data it did not expect: a request error
            res.error = f"unreadable chunk ({type(exc).__name__}: {exc})"[:200]
        return ABORT if res.error is not None else END if tally.done else CONTINUE


def _consume(reader: _Reader, datas: Sequence[bytes | str], now: float) -> str | None:
    """Events' data into the result, in order, until [DONE] (`now`: their arrival, from the send); returns an
    error (the rest is not read), or None."""
    res, tally, fast = reader.res, reader.tally, reader.fast
    for data in datas:
        info = fast(data) if fast is not None and data.__class__ is bytes else None
        if info is None:
            if data in _DONE or data.strip() in _DONE:
                tally.done, tally.done_s = True, now
                return None
            try:
                chunk = decode_json(data)
            except ValueError:
                chunk = None
            if not isinstance(chunk, dict):
                text = data if isinstance(data, str) else data.decode("utf-8", "replace")
                return f"malformed SSE data: {safe_text(text[:80])!r}"
            if "error" in chunk and not chunk.get("choices"):
                return f"server error in stream: {str(chunk['error'])[:200]}"
            info = reader.engine.parse_chunk(chunk)
        # tokens in this chunk: the cumulative usage delta is exact; token ids are next best
        if info.cumulative_completion_tokens is not None and info.completion_tokens is None:
            n = info.cumulative_completion_tokens - tally.seen_cumulative
            tally.seen_cumulative = info.cumulative_completion_tokens
        elif info.token_ids is not None:
            n = len(info.token_ids)
        else:
            n = 1 if info.text else 0
            tally.exact = tally.exact and not info.text
        if info.token_ids is not None:
            tally.ids_streamed = True
            tally.ids.extend(info.token_ids)
        if info.text:
            tally.texts.append(info.text)
        if n > 0:
            if res.ttft_s is None:
                res.ttft_s = now
            res.chunk_offsets_s.append(now)
            res.chunk_tokens.append(n)
        if info.finish_reason:
            res.finish_reason = info.finish_reason
        if info.prompt_tokens is not None:
            res.prompt_tokens = info.prompt_tokens
        if info.completion_tokens is not None:
            res.output_tokens = info.completion_tokens
        if info.spec is not None:
            res.spec = info.spec
    return None


def _finish(res: StreamResult, tally: _Tally, t0: float) -> StreamResult:
    # the end: [DONE]'s arrival (the chunks' clock), not when this task woke; without [DONE] (an error), now
    res.e2e_s = tally.done_s if tally.done else time.perf_counter() - t0
    res.text = safe_text("".join(tally.texts))
    res.token_ids = tally.ids or None
    if res.token_ids and not (INT64[0] <= min(res.token_ids) and max(res.token_ids) <= INT64[1]):
        res.token_ids = None  # the columnar store holds int64 ids: the record keeps the error, not the ids
        res.error = res.error or "a streamed token id is outside the 64-bit range (not a token id)"
    if res.error is None and not tally.done:
        res.error = "stream ended before [DONE] (truncated)"
    if res.output_tokens is None and res.chunk_tokens:
        res.output_tokens = sum(res.chunk_tokens)
    if res.error is not None:
        res.error = safe_text(res.error)
    if res.finish_reason is not None:
        res.finish_reason = safe_text(res.finish_reason)
    if res.spec is not None and res.spec.raw is not None:
        res.spec.raw = safe_value(res.spec.raw)
    return res


def _ignores_eos(body: Mapping[str, Any]) -> bool:
    sampling = body.get("sampling_params")
    return bool(body.get("ignore_eos") or (isinstance(sampling, dict) and sampling.get("ignore_eos")))


def check_output(res: StreamResult, tally: _Tally, requested: int | None) -> str | None:
    """The reason a completed stream cannot count, or None. The tokens received (token ids when the
    server lists them, else the per-chunk counts) must agree with the final usage; an empty output is an
    error; with ignore_eos sent (`requested` given) the output must have the requested length."""
    counted = sum(res.chunk_tokens)
    claimed = res.output_tokens
    if tally.ids_streamed and len(tally.ids) != counted:
        return f"token count mismatch: {len(tally.ids)} token ids streamed, usage deltas count {counted}"
    received = len(tally.ids) if tally.ids_streamed else counted
    if claimed is not None and (tally.ids_streamed or tally.exact) and claimed != received:
        return f"token count mismatch: the final usage claims {claimed} completion tokens, {received} were streamed"
    n = claimed if claimed is not None else received
    if n == 0:
        return "empty completion (0 tokens)"
    if requested is not None and n != requested:
        return f"output length {n} tokens, {requested} requested (ignore_eos is sent)"
    return None


async def stream_planned(ep: Endpoint, planned: PlannedRequest) -> RequestRecord:
    """Stream one planned request and return its record (the one function every load loop calls)."""
    t_send = time.time() if ep.clock_base is None else ep.clock_base + time.perf_counter()
    res = await stream_request(ep, planned.spec)
    return RequestRecord(
        **planned.fields, t_send=t_send, ttft_s=res.ttft_s, e2e_s=res.e2e_s,
        chunk_offsets_s=res.chunk_offsets_s, chunk_tokens=res.chunk_tokens, max_tokens=planned.spec.max_tokens,
        prompt_tokens=res.prompt_tokens, output_tokens=res.output_tokens, token_ids=res.token_ids,
        text=res.text, finish_reason=res.finish_reason, spec=res.spec, error=res.error)


async def run_closed_loop(ep: Endpoint, requests: Sequence[PlannedRequest], concurrency: int,
                          on_record: Callable[[RequestRecord], None]) -> list[RequestRecord]:
    """Keep exactly `concurrency` requests in flight until all are done (closed loop), never two of one prompt
    while the window has at least C prompts (client/inflight.py; fewer in flight only at the window's tail).

    `on_record` is called as each request finishes (the runner appends it to requests.jsonl at once).
    """
    queue = InFlightQueue(requests, concurrency)  # no prompt in flight twice (client/inflight.py)
    freed = asyncio.Condition()
    records: list[RequestRecord] = []

    async def worker() -> None:
        while True:
            async with freed:
                while (planned := queue.take()) is None and queue:
                    await freed.wait()  # every request left is of a prompt in flight: wait for one to end
            if planned is None:
                return
            try:
                rec = await stream_planned(ep, planned)
            finally:
                queue.done(planned.fields["prompt_id"])
                async with freed:
                    freed.notify_all()
            records.append(rec)
            on_record(rec)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(requests)))))
    return records


def make_http_client(max_connections: int) -> httpx.AsyncClient:
    """One pooled client per variant; limits sized so the pool never queues our own requests."""
    limits = httpx.Limits(max_connections=max_connections + 4, max_keepalive_connections=max_connections + 4)
    return httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(30.0, read=None))

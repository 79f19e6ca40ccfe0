"""The load generator: streamed requests, closed loop with exactly C in flight, per-request timings.

Timing points (defined in docs/metrics.md): t0 just before the request is sent; each SSE chunk that
carries output tokens is time-stamped on arrival with how many tokens it carries (from the server's
cumulative usage when available, else the token ids it lists); TTFT is the first such chunk.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx
from httpx_sse import SSEError, aconnect_sse

from .engines.base import Engine, RequestSpec
from .plan import PlannedRequest
from .records import RequestRecord, SpecDetails


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


async def stream_request(engine: Engine, http: httpx.AsyncClient, base_url: str, req: RequestSpec,
                         timeout_s: float, headers: dict[str, str] | None = None) -> StreamResult:
    """Send one streaming request and time it. Never raises for request-level failures: the error
    is recorded in the result, so one bad request cannot lose a window's other measurements."""
    res = StreamResult()
    body = engine.request_body(req)
    url = base_url + engine.request_path(req)
    ids: list[int] = []
    texts: list[str] = []
    seen_cumulative = 0
    got_done = False
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            async with aconnect_sse(http, "POST", url, json=body, headers=dict(headers or {})) as es:
                if es.response.status_code != 200:
                    detail = (await es.response.aread()).decode("utf-8", "replace")[:200]
                    res.error = f"HTTP {es.response.status_code}: {' '.join(detail.split())}"
                    return res
                async for sse in es.aiter_sse():
                    now = time.perf_counter() - t0
                    if sse.data.strip() == "[DONE]":
                        got_done = True
                        break
                    try:
                        data = json.loads(sse.data)
                    except json.JSONDecodeError:
                        res.error = f"malformed SSE data: {sse.data[:80]!r}"
                        return res
                    if not isinstance(data, dict):
                        res.error = f"malformed SSE data: {sse.data[:80]!r}"
                        return res
                    if "error" in data and not data.get("choices"):
                        res.error = f"server error in stream: {str(data['error'])[:200]}"
                        return res
                    info = engine.parse_chunk(data)
                    # tokens in this chunk: the cumulative usage delta is exact; token ids are next best
                    if info.cumulative_completion_tokens is not None and info.completion_tokens is None:
                        n = info.cumulative_completion_tokens - seen_cumulative
                        seen_cumulative = info.cumulative_completion_tokens
                    elif info.token_ids is not None:
                        n = len(info.token_ids)
                    else:
                        n = 1 if info.text else 0
                    if info.token_ids:
                        ids.extend(info.token_ids)
                    if info.text:
                        texts.append(info.text)
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
    except TimeoutError:
        res.error = f"timed out after {timeout_s:g}s (sweep.request_timeout_s)"
    except (httpx.HTTPError, SSEError) as exc:
        res.error = f"{type(exc).__name__}: {str(exc)[:200] or 'connection failed'}"
    res.e2e_s = time.perf_counter() - t0
    res.text = "".join(texts)
    res.token_ids = ids or None
    if res.error is None and not got_done:
        res.error = "stream ended before [DONE] (truncated)"
    if res.output_tokens is None and res.chunk_tokens:
        res.output_tokens = sum(res.chunk_tokens)
    return res


async def run_closed_loop(engine: Engine, http: httpx.AsyncClient, base_url: str,
                          requests: Sequence[PlannedRequest], concurrency: int, timeout_s: float,
                          on_record: Callable[[RequestRecord], None],
                          headers: dict[str, str] | None = None) -> list[RequestRecord]:
    """Keep exactly `concurrency` requests in flight until all are done (closed loop).

    `on_record` is called as each request finishes (the runner appends it to requests.jsonl at once).
    """
    queue: asyncio.Queue[PlannedRequest] = asyncio.Queue()
    for r in requests:
        queue.put_nowait(r)
    records: list[RequestRecord] = []

    async def worker() -> None:
        while True:
            try:
                planned = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            t_send = time.time()
            res = await stream_request(engine, http, base_url, planned.spec, timeout_s, headers)
            rec = RequestRecord(
                **planned.fields, t_send=t_send, ttft_s=res.ttft_s, e2e_s=res.e2e_s,
                chunk_offsets_s=res.chunk_offsets_s or [], chunk_tokens=res.chunk_tokens or [],
                prompt_tokens=res.prompt_tokens, output_tokens=res.output_tokens, token_ids=res.token_ids,
                text=res.text, finish_reason=res.finish_reason, spec=res.spec, error=res.error)
            records.append(rec)
            on_record(rec)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(requests)))))
    return records


def make_http_client(max_connections: int) -> httpx.AsyncClient:
    """One pooled client per variant; limits sized so the pool never queues our own requests."""
    limits = httpx.Limits(max_connections=max_connections + 4, max_keepalive_connections=max_connections + 4)
    return httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(30.0, read=None))

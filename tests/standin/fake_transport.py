"""A StreamTransport (specbench/client/transport.py) that replays SSE bytes at set times: the client and every load
shape tested in-process, in milliseconds, without a port.

Each request gets `script(body)`: the reads of its response, as (seconds after the post began, bytes). The
bytes go through the lean transport's own SSE splitter (specbench/client/sse.py), and each read's events are handed
over with its set time (origin + seconds; origin = perf_counter() when post() is called), whatever the real
time is, so a test can check timing arithmetic exactly. Between reads the fake yields to the event loop once,
so concurrent requests interleave. It counts requests in flight (now and at most).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specbench.client.sse import SSEParser
from specbench.client.transport import CONTINUE, OnEvents, Response

Reads = list[tuple[float, bytes]]


def sse(*datas: object) -> bytes:
    """SSE bytes of events, each a JSON value or a literal string ("[DONE]")."""
    return b"".join(b"data: %s\n\n" % (d if isinstance(d, str) else json.dumps(d)).encode() for d in datas)


def chunk(i: int, cumulative: int | None = None) -> dict[str, Any]:
    """A vLLM-style chunk carrying token id `i` (cumulative usage = `cumulative`, default `i`)."""
    return {"choices": [{"index": 0, "delta": {"content": f"t{i}"}, "token_ids": [i], "finish_reason": None}],
            "usage": {"prompt_tokens": 3, "completion_tokens": i if cumulative is None else cumulative}}


def stream(n: int, step_s: float = 0.01) -> Reads:
    """A complete n-token stream: one token per read every `step_s`, then the usage and [DONE] in one read."""
    final = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n}}
    return [*((step_s * i, sse(chunk(i))) for i in range(1, n + 1)), (step_s * (n + 1), sse(final, "[DONE]"))]


@dataclass
class FakeTransport:
    script: Callable[[dict[str, Any]], Reads]
    status: int = 200
    posts: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    closed: bool = False

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], on_events: OnEvents) -> Response:
        request = json.loads(body)
        self.posts.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            origin = time.perf_counter()
            await asyncio.sleep(0)  # the others' sends first: requests sent together are in flight together
            parser = SSEParser()
            for at, raw in self.script(request):
                events: list[bytes] = []
                parser.feed(raw, events)
                if events and on_events(events, origin + at) != CONTINUE:
                    break
                await asyncio.sleep(0)
            return Response(self.status, {"content-type": "text/event-stream"})
        finally:
            self.in_flight -= 1

    async def close(self) -> None:
        self.closed = True

"""The reference stream transport: httpx (h11) for HTTP and httpx-sse's decoders for the event stream.

The lean transport (sse_http.py) is checked against this one (tests/runner/test_client_paths.py, the framing and SSE
cases in tests/client/test_transport.py). It also streams an endpoint that the environment routes through a proxy.

httpx-sse's `aiter_sse` differs from the WHATWG rules in two ways that change what a client reads, so its
line and field decoders are driven here with the two rules on top (see specbench/client/sse.py for the rules):
- the body is decoded as UTF-8 with one leading byte-order mark dropped (the spec's UTF-8 decode; httpx
  decodes by the response's charset and keeps a BOM, which turns the first field name into "\\ufeffdata");
- an event is handed over only when it had a data field (httpx-sse also yields events of only `id`, `event` or
  `retry`, and, once an id was seen, one for every further blank line).
The events of one network read are handed over in one call, stamped when httpx handed that read over.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Mapping

import httpx
from httpx_sse._decoders import SSEDecoder, SSELineDecoder  # pinned in pyproject.toml (not exported)

from specbench.client.transport import CONTINUE, MAX_ERROR_BODY, OnEvents, Response, StreamError


def _is_data_field(line: str) -> bool:
    return line == "data" or line.startswith("data:")


class HttpxTransport:
    """StreamTransport over an httpx.AsyncClient (closed here only when `owned`)."""

    def __init__(self, http: httpx.AsyncClient, owned: bool = False):
        self.http = http
        self.owned = owned

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], on_events: OnEvents) -> Response:
        hdrs = {"Content-Type": "application/json", "Accept-Encoding": "identity", **headers}
        try:
            async with self.http.stream("POST", url, content=body, headers=hdrs) as r:
                resp = Response(r.status_code, {k.lower(): v for k, v in r.headers.items()})
                if r.status_code != 200:
                    resp.body = (await r.aread())[:MAX_ERROR_BODY]
                elif "text/event-stream" in resp.headers.get("content-type", ""):
                    await _read_events(r, on_events)
                return resp
        except httpx.HTTPError as exc:
            raise StreamError(type(exc).__name__, str(exc)[:200] or "connection failed") from None

    async def close(self) -> None:
        if self.owned:
            await self.http.aclose()


async def _read_events(r: httpx.Response, on_events: OnEvents) -> None:
    text = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
    lines, fields = SSELineDecoder(), SSEDecoder()
    has_data = False

    def events_of(got: list[str]) -> list[str]:
        nonlocal has_data
        out = []
        for line in got:
            sse = fields.decode(line)
            if line:
                has_data = has_data or _is_data_field(line)
            else:
                if sse is not None and has_data:
                    out.append(sse.data)
                has_data = False
        return out

    async for raw in r.aiter_bytes():
        now = time.perf_counter()
        events = events_of(lines.decode(text.decode(raw)))
        if events and on_events(events, now) != CONTINUE:
            return
    # the body's end: a last line ended by a CR may still complete an event (an event without its blank line
    # is not dispatched: fields.decode dispatches only on a blank line)
    events = events_of(lines.decode(text.decode(b"", final=True)) + lines.flush())
    if events:
        on_events(events, time.perf_counter())

"""What the client streams through: one protocol with two implementations (chosen by client.make_transport).

    transport = make_transport(base_url, http)     # lean (sse_http.SSEClient), or httpx behind a proxy
    resp = await transport.post(url, body, headers, on_events)
    await transport.close()

`StreamTransport.post` sends one generation request and hands the SSE events of a 200 response to
`on_events`, read by read, each call with the events one read completed and perf_counter() when that read's
bytes arrived. The lean transport hands each event's data as bytes, the httpx one (the reference path) as
str; the client reads bytes with its fast chunk decoder and str as a dict (engines/fastchunk.py). Both
follow the same SSE rules (specbench/client/sse.py). A stand-in that replays bytes at set times (tests/fakes.py)
implements the same protocol, so the client and every load shape can be tested in-process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

# What on_events returns: CONTINUE, END (the stream's last event was read, e.g. [DONE]: the exchange is complete
# at once; the lean transport drains the rest of the body in the background so the connection can be reused;
# events after it in the same call are the callee's to ignore) or ABORT (an error: the connection is closed).
# After END or ABORT no later event is handed over.
CONTINUE, END, ABORT = 0, 1, 2
OnEvents = Callable[[Sequence[bytes | str], float], int]

MAX_ERROR_BODY = 64_000


class StreamError(Exception):
    """The exchange failed below HTTP (connect, connection lost, a malformed or unsupported response)."""

    def __init__(self, kind: str, detail: str):
        self.kind = kind
        super().__init__(f"{kind}: {detail}")


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes = b""  # non-200 responses only (up to MAX_ERROR_BODY)


class StreamTransport(Protocol):
    async def post(self, url: str, body: bytes, headers: Mapping[str, str], on_events: OnEvents) -> Response:
        """POST `body` (JSON); hand the events of a 200 text/event-stream response to `on_events`; return once
        the response has ended or `on_events` said END/ABORT. Raises StreamError below HTTP; cancellation (a
        timeout) closes the connection. A POST is never sent twice (a generation would be duplicated)."""
        ...

    async def close(self) -> None:
        """Close every connection this transport holds."""
        ...


def behind_proxy(url: str) -> bool:
    """True when the environment routes `url` through an HTTP proxy (HTTP_PROXY etc., not bypassed by
    NO_PROXY): the lean stream client goes direct, so such an endpoint is streamed through httpx instead."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    u = urlsplit(url)
    if not getproxies().get(u.scheme or "http"):
        return False
    return not proxy_bypass(u.hostname or "")

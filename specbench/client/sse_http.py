"""The lean stream transport: HTTP/1.1 for streamed generation requests, one asyncio Protocol per connection,
the response framed by llhttp (httptools, Node's parser, uvicorn's) in the connection's `data_received`
callback, SSE events split from the body's bytes (specbench/client/sse.py), and the events of each read handed to
a plain function at once, in one call, with the time the read's bytes arrived.

Why not httpx for these: every chunk then passes through h11, anyio and httpx-sse's async iterators, a task
switch and several objects per event (docs/client-overhead.md measured 19-156 µs per chunk). Here a chunk
costs llhttp's C code, a few bytes operations and one JSON decode. Why one call per read and not later, in
larger batches: deferred work bunches up when many streams move in step (a batched version measured p99
timing lag 0.7-3 ms at 64-256 paced streams, this one 0.04-1.4 ms; docs/client-overhead.md) for ~5% less CPU.

Strict where a lenient reading could count a wrong stream: llhttp refuses a malformed Content-Length, chunk
size (`0x9`, `+9`, `9_0`) or chunk end; a Transfer-Encoding other than plain `chunked` and any
Content-Encoding but identity (it asks for none) fail the request; 1xx interim responses are skipped; a head
or chunk-size line over 64 KiB fails it; `Connection` is read as a token list. A POST is never sent twice: a
kept-alive connection is checked before it is reused (closed, or readable while idle: the server closed it),
and one that fails after the request was written fails the request (a retry could duplicate a generation).

Probes, scrapes and every other request still use httpx. What this client does not do: HTTP proxies (an
endpoint the environment routes through a proxy is streamed through httpx: transport.behind_proxy),
redirects, compression, HTTP/2.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from typing import cast
from urllib.parse import urlsplit

import httptools

from specbench.client.sse import SSEParser
from specbench.client.transport import ABORT, CONTINUE, END, MAX_ERROR_BODY, OnEvents, Response, StreamError

__all__ = ["ABORT", "CONTINUE", "END", "SSEClient", "StreamError", "Response"]

# response bytes without progress (an over-long head, chunk-size line or trailer) that fail the exchange; counted
# over whole reads (llhttp streams and never buffers them: the limit is against a response that never ends)
MAX_STALL = 65536
_clock = time.perf_counter
_HEAD, _BODY, _END = 0, 1, 2


def _tokens(value: str) -> list[str]:
    return [t.strip().lower() for t in value.split(",") if t.strip()]


def _protocol_error(detail: str) -> StreamError:
    return StreamError("RemoteProtocolError", detail)


class _Exchange:
    """One request's response, framed by llhttp as bytes arrive (its callbacks are this object's on_*)."""

    __slots__ = ("on_events", "done", "parser", "sse", "events", "now", "state", "status", "headers",
                 "response", "sse_ok", "stopped", "got_bytes", "reusable", "until_close", "stalled", "extra",
                 "on_end")

    def __init__(self, on_events: OnEvents, done: asyncio.Future[Response]):
        self.on_events = on_events
        self.done = done
        self.parser = httptools.HttpResponseParser(self)
        self.sse = SSEParser()
        self.events: list[bytes] = []  # the events of the read being parsed ...
        self.now = 0.0  # ... and when its bytes arrived
        self.state = _HEAD
        self.status = 0
        self.headers: dict[str, str] = {}
        self.response: Response | None = None
        self.sse_ok = False  # a 200 response whose events are still read
        self.stopped = False  # on_events said END or ABORT: later events are not read
        self.got_bytes = False
        self.reusable = False
        self.until_close = False  # the body ends when the connection closes (no length, not chunked)
        self.stalled = 0  # bytes fed since the parser last made progress
        self.extra = False  # bytes after the response's end: the connection cannot be trusted
        self.on_end: Callable[[], None] | None = None  # a drained body ended (the connection goes back)

    def feed(self, raw: bytes, now: float) -> None:
        """One read's bytes; its events are handed over before this returns."""
        self.now = now
        self.got_bytes = True
        self.stalled += len(raw)
        try:
            self.parser.feed_data(raw)
        except httptools.HttpParserCallbackError as exc:  # a check in a callback below
            ctx = exc.__context__
            self.fail(ctx if isinstance(ctx, StreamError) else _protocol_error(f"{type(ctx).__name__}: {ctx}"))
        except httptools.HttpParserUpgrade:
            self.fail(_protocol_error(f"unexpected protocol switch (HTTP {self.status})"))
        except httptools.HttpParserError as exc:
            self.fail(_protocol_error(f"malformed HTTP response: {exc}"))
        else:
            if self.stalled > MAX_STALL and self.state != _END:
                what = "response head" if self.state == _HEAD else "chunk-size line or trailer section"
                self.fail(_protocol_error(f"{what} over {MAX_STALL // 1024} KiB"))
        if self.events:
            self.flush()

    # -- llhttp's callbacks ---------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self.state == _END:  # a second response nobody asked for
            self.extra, self.reusable = True, False

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.state == _END:
            return
        k, v = name.decode("latin-1").lower(), value.decode("latin-1")
        self.headers[k] = f"{self.headers[k]}, {v}" if k in self.headers else v

    def on_headers_complete(self) -> None:
        if self.state == _END:
            return
        p = self.parser
        status = self.status = p.get_status_code()
        if 100 <= status < 200 and status != 101:  # an interim response (100 Continue, 103 Early Hints)
            self.headers = {}
            return
        if p.get_http_version() not in ("1.1", "1.0"):
            raise _protocol_error(f"not an HTTP/1.1 response (version {p.get_http_version()})")
        h = self.headers
        te, ce = h.get("transfer-encoding"), h.get("content-encoding")
        if te is not None and _tokens(te) != ["chunked"]:
            raise _protocol_error(f"unsupported Transfer-Encoding {te!r} (HTTP {status}; only chunked is read)")
        if ce is not None and any(t != "identity" for t in _tokens(ce)):
            raise _protocol_error(f"unsupported Content-Encoding {ce!r} (HTTP {status}; identity was asked for)")
        if status == 101:
            raise _protocol_error("unexpected protocol switch (HTTP 101)")
        self.response = Response(status, h)
        self.sse_ok = status == 200
        self.reusable = p.should_keep_alive()
        self.until_close = te is None and "content-length" not in h and status not in (204, 304)
        self.state, self.stalled = _BODY, 0

    def on_body(self, body: bytes) -> None:
        self.stalled = 0
        if self.sse_ok:
            sse = self.sse
            # the piece is one whole SSE event, "data: <data>\n\n" (a vLLM chunk): <data> at once
            if (sse.clean and body.startswith(b"data: ") and body.find(b"\n") == len(body) - 2
                    and body.endswith(b"\n\n") and b"\r" not in body):
                self.events.append(body[6:-2])
            else:
                sse.feed(body, self.events)
        elif self.state == _BODY and self.status != 200:
            resp = self.response
            assert resp is not None
            if len(resp.body) < MAX_ERROR_BODY:
                resp.body += body[:MAX_ERROR_BODY - len(resp.body)]

    def on_message_complete(self) -> None:
        if self.state == _HEAD:  # the end of an interim response: the final one follows
            return
        if self.state == _BODY:
            self.reusable = self.reusable and self.parser.should_keep_alive()
            self._end()

    # -- the exchange's end ---------------------------------------------------------------------------
    def flush(self) -> bool:
        """Hand the read's events over; True when the exchange stops reading events."""
        if self.stopped:
            self.events = []
            return True
        if not self.events:
            return False
        events, self.events = self.events, []
        verdict = self.on_events(events, self.now)
        if verdict == CONTINUE:
            return False
        self.stopped, self.sse_ok = True, False
        if verdict == ABORT:
            self.fail(StreamError("Aborted", "stream abandoned"), keep_result=True)
        else:
            self._complete()
        return True

    def _end(self) -> None:
        """The response ended (an event without its blank line is discarded, as the SSE rules say)."""
        self.state = _END
        if self.events:
            self.flush()
        self._complete()
        if self.on_end is not None:
            self.on_end()

    def _complete(self) -> None:
        if not self.done.done() and self.response is not None:
            self.done.set_result(self.response)

    def fail(self, exc: BaseException, keep_result: bool = False) -> None:
        """The exchange cannot go on (the connection is not reused). With keep_result the response read so
        far is the result (an ABORT by on_events: the caller has what it needs). The events read before it
        are handed over first."""
        self.flush()
        self.state, self.reusable, self.sse_ok = _END, False, False
        if not self.done.done():
            if keep_result and self.response is not None:
                self.done.set_result(self.response)
            else:
                self.done.set_exception(exc)
        if self.on_end is not None:  # a draining connection that broke: it is closed, not reused
            self.on_end()

    def lost(self) -> None:
        """The connection closed: the end of a read-until-close body, else a truncated response."""
        if self.state == _BODY and self.until_close:
            self.now = _clock()
            self._end()
        elif self.state != _END:
            what = "before the response head" if self.state == _HEAD else "before the response ended"
            self.fail(_protocol_error(f"peer closed the connection {what} (truncated)"))


class _Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.exchange: _Exchange | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        now = _clock()
        exchange = self.exchange
        if exchange is None:  # bytes nobody asked for: the connection cannot be trusted
            self.close()
            return
        exchange.feed(data, now)
        if exchange.extra:
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.exchange is not None:
            self.exchange.lost()

    def reusable(self) -> bool:
        """Idle and still open: not closed, and nothing to read (a readable idle socket is the server's close,
        or bytes nobody asked for, not yet seen by the event loop)."""
        if self.closed or self.transport is None or self.transport.is_closing():
            return False
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return True
        poll = select.poll()
        poll.register(sock.fileno(), select.POLLIN)
        return not poll.poll(0)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class SSEClient:
    """The lean StreamTransport: a keep-alive pool of lean connections, per event loop (one per loop; close()
    at the end)."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._draining: set[_Conn] = set()  # complete exchanges whose body end has not been read yet
        self._ssl: ssl.SSLContext | None = None
        self._open = True

    async def _connect(self, key: tuple[str, str, int]) -> _Conn:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        if scheme == "https" and self._ssl is None:
            self._ssl = ssl.create_default_context()
        try:
            _, conn = await loop.create_connection(_Conn, host, port, ssl=self._ssl if scheme == "https" else None)
        except OSError as exc:
            raise StreamError("ConnectError", str(exc) or type(exc).__name__) from None
        return conn

    def _take_idle(self, key: tuple[str, str, int]) -> _Conn | None:
        """A kept-alive connection known to be open, or None; those found dead are closed (never written to)."""
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.reusable():
                return conn
            conn.close()
        return None

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], on_events: OnEvents) -> Response:
        """StreamTransport.post (see transport.py); the body of a non-200 response is in `Response.body`."""
        u = urlsplit(url)
        scheme = u.scheme or "http"
        port = u.port or (443 if scheme == "https" else 80)
        key = (scheme, u.hostname or "", port)
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        head = [f"POST {path} HTTP/1.1", f"Host: {u.netloc}", "Content-Type: application/json",
                f"Content-Length: {len(body)}", "Accept-Encoding: identity",
                *(f"{k}: {v}" for k, v in headers.items())]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        conn = self._take_idle(key)
        reused = conn is not None
        if conn is None:
            conn = await self._connect(key)
        exchange = _Exchange(on_events, asyncio.get_running_loop().create_future())
        conn.exchange = exchange
        assert conn.transport is not None
        try:
            conn.transport.write(request)
            resp = await exchange.done
        except StreamError as exc:
            conn.close()
            if reused and not exchange.got_bytes:  # the request may have reached the server: not sent again
                raise StreamError(exc.kind, f"{str(exc)[len(exc.kind) + 2:]} on a kept-alive connection; a POST "
                                            "is not sent twice (it could duplicate a generation)") from None
            raise
        except BaseException:
            conn.close()
            raise
        if exchange.state == _END:
            self._release(key, conn, exchange)
        else:  # complete at its last event: the connection returns once the body's end is read
            self._draining.add(conn)
            exchange.on_end = lambda: self._release(key, conn, exchange)
        return resp

    def _release(self, key: tuple[str, str, int], conn: _Conn, exchange: _Exchange) -> None:
        exchange.on_end = None
        if conn.exchange is exchange:
            conn.exchange = None
        self._draining.discard(conn)
        if exchange.reusable and not conn.closed and self._open:
            self._idle.setdefault(key, []).append(conn)
        else:
            conn.close()

    async def close(self) -> None:
        self._open = False
        for c in list(self._draining):
            c.close()
        self._draining.clear()
        for conns in self._idle.values():
            for c in conns:
                c.close()
        self._idle.clear()

"""A lean HTTP/1.1 client for streamed generation requests: one asyncio Protocol per connection, the
response parsed in its `data_received` callback (status line, headers, chunked framing, SSE lines split
from the raw bytes), the events of each read handed to a plain function at once, in one call, with the time
the read's bytes arrived.

Why not httpx for these: every chunk then passes through h11, anyio and httpx-sse's async iterators, a
task switch and several objects per event (docs/client-overhead.md measured 19-156 µs per chunk). Here a
chunk costs a few bytes operations and one JSON decode. Why one call per read and not later, in larger
batches: deferred work bunches up when many streams move in step (a batched version measured p99 timing lag
0.7-3 ms at 64-256 paced streams, this one 0.04-1.4 ms; docs/client-overhead.md) for ~5% less CPU. Probes,
scrapes and every other request still use httpx. What this client does not do: HTTP proxies (an endpoint
the environment routes through a proxy is streamed through httpx instead: runner/session.behind_proxy),
redirects, compression (it asks for none), HTTP/2.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import urlsplit

# on_events(data, t): the SSE events of one read, in order, and perf_counter() when the read's bytes arrived.
# Returns CONTINUE, END (the stream's last event was read, e.g. [DONE]: the exchange is complete at once, and
# the rest of the body is drained in the background so the connection can be reused; events after it in the
# same call are the callee's to ignore) or ABORT (an error: the connection is closed). After END or ABORT no
# later event is handed over.
CONTINUE, END, ABORT = 0, 1, 2
OnEvents = Callable[[list[bytes], float], int]

MAX_ERROR_BODY = 64_000
_clock = time.perf_counter


class StreamError(Exception):
    """The exchange failed below HTTP (connect, connection lost, a response that is not HTTP/1.1)."""

    def __init__(self, kind: str, detail: str):
        self.kind = kind
        super().__init__(f"{kind}: {detail}")


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes = b""  # non-200 responses only (up to MAX_ERROR_BODY)


@dataclass
class _Exchange:
    """One request's response, parsed as bytes arrive."""

    on_events: OnEvents
    done: asyncio.Future[Response]
    head: bytes = b""
    response: Response | None = None
    mode: str = "head"  # head -> chunked | length | close -> end
    left: int = 0  # length mode: body bytes still due; chunked: bytes of the current chunk still due (-2: its CRLF)
    sse_ok: bool = False  # a 200 response whose events are still read (the fast path's condition)
    buf: bytes = b""  # framing bytes not yet consumed
    line: bytes = b""  # SSE: the incomplete last line
    data: list[bytes] = field(default_factory=list)  # SSE: data lines of the event being read
    events: list[bytes] = field(default_factory=list)  # the events of the read being parsed ...
    now: float = 0.0  # ... and when its bytes arrived
    stopped: bool = False  # on_events said END or ABORT: later events are not read
    got_bytes: bool = False
    reusable: bool = True
    on_end: Callable[[], None] | None = None  # called when a drained body ends (the connection goes back)

    # -- framing ------------------------------------------------------------------------------------
    def feed(self, raw: bytes, now: float) -> None:
        """One read's bytes; its events are handed over before this returns."""
        self.now = now
        if self.mode == "chunked":  # the stream's body (first: the one test per read)
            self._chunked(raw)
        else:
            self._feed(raw)
        if self.events:
            self.flush()

    def _feed(self, raw: bytes) -> None:
        self.got_bytes = True
        if self.mode == "head":
            self.head += raw
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                if len(self.head) > 65536:
                    self.fail(StreamError("RemoteProtocolError", "response head over 64 KiB"))
                return
            raw, self.head = self.head[end + 4:], self.head[:end]
            self._parse_head()
            if self.mode == "end":
                return
        if self.mode == "chunked":
            self._chunked(raw)
        elif self.mode == "length":
            take = raw[:self.left]
            self.left -= len(take)
            self._payload(take)
            if self.left <= 0:
                self._end()
        elif self.mode == "close":
            self._payload(raw)

    def _parse_head(self) -> None:
        lines = self.head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            self.fail(StreamError("RemoteProtocolError", f"not an HTTP/1.1 response: {lines[0][:80]!r}"))
            return
        headers: dict[str, str] = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        self.response = Response(int(parts[1]), headers)
        self.sse_ok = self.response.status == 200
        self.reusable = headers.get("connection", "").lower() != "close" and parts[0] != "HTTP/1.0"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.mode = "chunked"
        elif "content-length" in headers:
            self.mode, self.left = "length", int(headers["content-length"] or 0)
            if self.left == 0:
                self._end()
        else:
            self.mode, self.reusable = "close", False

    def _chunked(self, raw: bytes) -> None:
        buf = self.buf + raw if self.buf else raw
        pos, n = 0, len(buf)
        while pos < n:
            left = self.left
            if left > 0:  # inside a chunk whose data came in pieces
                take = buf[pos:pos + left]
                pos += len(take)
                self.left = left - len(take)
                self._payload(take)
                if self.left == 0:
                    self.left = -2  # the CRLF after the chunk's data
                continue
            if left == -2:
                if n - pos < 2:
                    break
                pos += 2
                self.left = 0
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            try:
                size = int(buf[pos:eol], 16)
            except ValueError:
                size = -1
            if size < 0:
                size = self._chunk_size(buf[pos:eol])
            if size <= 0:
                if size == 0:  # the last chunk (trailers, if any, are not read: the connection is not reused)
                    if n - eol < 4:  # its final CRLF is still to come
                        break
                    self.reusable = self.reusable and buf[eol + 2:eol + 4] == b"\r\n"
                    self._end()
                return
            start = eol + 2
            end = start + size
            if end + 2 <= n and self.sse_ok and not self.line and not self.data:
                # the whole chunk is here and holds one whole SSE event, "data: <data>\n\n" (a vLLM chunk):
                # hand <data> over at once; anything else (more lines, CRLF endings, ...) takes _payload
                if (buf.startswith(b"data: ", start, end) and buf.find(b"\n", start, end) == end - 2
                        and buf[end - 1] == 10 and buf[end - 3] != 13):
                    pos = end + 2
                    self.events.append(buf[start + 6:end - 2])  # after END the rest is drained (not read)
                    continue
                self._payload(buf[start:end])
                pos = end + 2
                continue
            pos, self.left = start, size
        self.buf = buf[pos:] if pos < n else b""

    def _chunk_size(self, line: bytes) -> int:
        """A chunk-size line with an extension ("1a;name=value"); -1 after failing the exchange."""
        text = line.split(b";", 1)[0].strip()
        try:
            size = int(text, 16)
        except ValueError:
            size = -1
        if size < 0:
            self.fail(StreamError("RemoteProtocolError", f"bad chunk size {text[:20]!r}"))
        return size

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

    def _payload(self, raw: bytes) -> None:
        resp = self.response
        assert resp is not None
        if resp.status != 200:
            if len(resp.body) < MAX_ERROR_BODY:
                resp.body += raw[:MAX_ERROR_BODY - len(resp.body)]
            return
        if self.stopped or not raw:
            return
        # SSE: lines end in LF or CRLF; an event's data lines are joined by LF and dispatched on a blank line
        *lines, self.line = (self.line + raw).split(b"\n")
        for line in lines:
            if line[-1:] == b"\r":
                line = line[:-1]
            if not line:
                if self.data:
                    self.events.append(b"\n".join(self.data))
                    self.data = []
            elif line[:5] == b"data:":
                self.data.append(line[6:] if line[5:6] == b" " else line[5:])

    def _end(self) -> None:
        self.mode = "end"
        if self.response is not None and self.response.status == 200 and not self.stopped:
            line = self.line[:-1] if self.line[-1:] == b"\r" else self.line
            if line[:5] == b"data:":  # a last event without its blank line still counts (as in httpx-sse)
                self.data.append(line[6:] if line[5:6] == b" " else line[5:])
            if self.data:
                self.events.append(b"\n".join(self.data))
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
        self.mode, self.reusable = "end", False
        if not self.done.done():
            if keep_result and self.response is not None:
                self.done.set_result(self.response)
            else:
                self.done.set_exception(exc)
        if self.on_end is not None:  # a draining connection that broke: it is closed, not reused
            self.on_end()

    def lost(self) -> None:
        """The connection closed: the end of a read-until-close body, else a truncated response."""
        if self.mode == "close":
            self.now = time.perf_counter()  # the body's end: a last event without its blank line arrives now
            self._end()
        elif self.mode != "end":
            what = "before the response head" if self.mode == "head" else "before the response ended"
            self.fail(StreamError("RemoteProtocolError", f"peer closed the connection {what} (truncated)"))


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

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.exchange is not None:
            self.exchange.lost()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class SSEClient:
    """A keep-alive pool of lean connections, per event loop (use one per loop; close() at the end)."""

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

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], on_events: OnEvents) -> Response:
        """POST `body` (JSON) and hand the SSE events of a 200 response to `on_events`, read by read, with the
        time each read's bytes arrived. Returns when the response has ended (the body of a non-200 response is
        in `Response.body`). Raises StreamError below HTTP; cancellation (a timeout) closes the connection."""
        u = urlsplit(url)
        scheme = u.scheme or "http"
        port = u.port or (443 if scheme == "https" else 80)
        key = (scheme, u.hostname or "", port)
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        head = [f"POST {path} HTTP/1.1", f"Host: {u.netloc}", "Content-Type: application/json",
                f"Content-Length: {len(body)}", "Accept-Encoding: identity",
                *(f"{k}: {v}" for k, v in headers.items())]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        for attempt in (1, 2):
            idle = self._idle.get(key) or []
            while idle and idle[-1].closed:
                idle.pop()
            reused = bool(idle)
            conn = idle.pop() if idle else await self._connect(key)
            exchange = _Exchange(on_events, asyncio.get_running_loop().create_future())
            conn.exchange = exchange
            assert conn.transport is not None
            try:
                conn.transport.write(request)
                resp = await exchange.done
            except StreamError:
                conn.close()
                # a kept-alive connection the server had already closed: send once more on a fresh one
                if reused and attempt == 1 and not exchange.got_bytes:
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            if exchange.mode == "end":
                self._release(key, conn, exchange)
            else:  # complete at its last event: the connection returns once the body's end is read
                self._draining.add(conn)
                exchange.on_end = lambda: self._release(key, conn, exchange)
            return resp
        raise AssertionError("unreachable")

    def _release(self, key: tuple[str, str, int], conn: _Conn, exchange: _Exchange) -> None:
        exchange.on_end = None
        if conn.exchange is exchange:
            conn.exchange = None
        self._draining.discard(conn)
        if exchange.reusable and not conn.closed and self._open:
            self._idle.setdefault(key, []).append(conn)
        else:
            conn.close()

    def close(self) -> None:
        self._open = False
        for c in list(self._draining):
            c.close()
        self._draining.clear()
        for conns in self._idle.values():
            for c in conns:
                c.close()
        self._idle.clear()

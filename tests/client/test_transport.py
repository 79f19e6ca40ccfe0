"""Both stream transports (lean: sse_http.SSEClient; reference: httpx_transport.HttpxTransport) against a raw
stand-in that writes exact bytes (tests/standin/raw_http.py): HTTP framing the lean one used to read leniently
(issue 30, item 5), a POST never sent twice, and the WHATWG event-stream rules on both (item 6)."""

from __future__ import annotations

import asyncio
import json
import select
import threading
from collections.abc import Sequence

import httpx
import pytest

from specbench.client.httpx_transport import HttpxTransport
from specbench.client.sse_http import SSEClient
from specbench.client.stream import Endpoint, StreamResult, stream_request
from specbench.client.transport import CONTINUE, StreamError, StreamTransport
from specbench.config import parse_config
from specbench.server.engines.base import RequestSpec
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import sweep_facts
from tests.standin.raw_http import HEAD, RawServer, Reply, chunked, sse_response

CFG = parse_config({"model": {"path": "/m"}, "variants": [{"name": "a", "drafter": "autoregressive",
                    "baseline": True}], "sweep": {"output_lens": [4], "concurrency": [1]}})
REQ = RequestSpec(messages=[{"role": "user", "content": "hi"}], prompt_text="hi", max_tokens=4, temperature=0.0,
                  seed=0)
PATHS = pytest.mark.parametrize("path", ["lean", "httpx"])


def event(obj: object) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def chunk(i: int) -> bytes:
    return event({"choices": [{"index": 0, "delta": {"content": "x"}, "token_ids": [i], "finish_reason": None}],
                  "usage": {"prompt_tokens": 2, "completion_tokens": i}})


STREAM = [*(chunk(i) for i in range(1, 5)),
          event({"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 4}}),
          event(b"[DONE]")]  # a complete 4-token stream, one event per part


def ok(r: StreamResult) -> bool:
    return r.error is None and r.token_ids == [1, 2, 3, 4]


def transport(path: str, http: httpx.AsyncClient) -> StreamTransport:
    return SSEClient() if path == "lean" else HttpxTransport(http)


async def settled(t: object) -> None:
    """Until the lean transport's connections have read their bodies' ends: a stream returns at [DONE], and
    its connection goes back to the pool only once the last chunk is read (the next request would otherwise
    race that read and open a new connection). The loop reads on each yield; httpx has no such state."""
    while getattr(t, "_draining", None):
        await asyncio.sleep(0)


def requests(path: str, server: RawServer, n: int = 1, timeout: float = 10.0,
             between: object = None) -> list[StreamResult]:
    """`n` requests in turn through one transport (its pool kept between them); `between(t)` after the first."""
    async def go() -> list[StreamResult]:
        async with httpx.AsyncClient() as http:
            t = transport(path, http)
            ep = Endpoint(VLLMEngine(CFG.engine, sweep_facts(CFG), "/m", "m"), t, server.url, timeout)
            out = []
            try:
                for i in range(n):
                    out.append(await stream_request(ep, REQ))
                    if getattr(t, "_draining", None):  # (no yield otherwise: a test may hold the loop still)
                        await asyncio.wait_for(settled(t), timeout)
                    if between is not None and i == 0:
                        between(t)  # type: ignore[operator]
            finally:
                await t.close()
            return out

    return asyncio.run(go())


# -- framing (issue 30, item 5): every case fails the request with a clear error in its record ---------------
def bad_size(form: str) -> list[bytes]:
    size = b"%x" % len(STREAM[0])  # two hex digits
    bad = {"0x": b"0x" + size, "+": b"+" + size, "_": size[:1] + b"_" + size[1:]}[form]
    return [HEAD + b"transfer-encoding: chunked\r\n\r\n", bad + b"\r\n" + STREAM[0] + b"\r\n", *chunked(*STREAM[1:])]


FRAMING = {
    "bad Content-Length": ([HEAD + b"content-length: 12abc\r\n\r\n"], "Invalid character in Content-Length"),
    "Transfer-Encoding gzip, chunked": (
        [HEAD + b"transfer-encoding: gzip, chunked\r\n\r\n", *chunked(*STREAM)],
        "unsupported Transfer-Encoding 'gzip, chunked'"),
    "Content-Encoding gzip": (sse_response(*STREAM, head=HEAD + b"content-encoding: gzip\r\n"),
                              "unsupported Content-Encoding 'gzip'"),
    "chunk size 0x..": (bad_size("0x"), "Invalid character in chunk size"),
    "chunk size +..": (bad_size("+"), "Invalid character in chunk size"),
    "chunk size 9_0": (bad_size("_"), "Invalid character in chunk size"),
    "no CRLF after chunk data": (
        [HEAD + b"transfer-encoding: chunked\r\n\r\n", b"%x\r\n%sXX" % (len(STREAM[0]), STREAM[0]),
         *chunked(*STREAM[1:])], "after chunk data"),
    # (1 MB: the lean transport counts the bytes of reads without progress, and a read is at most 256 KiB)
    "unterminated chunk-size line": (
        [HEAD + b"transfer-encoding: chunked\r\n\r\n", b"1;" + b"e" * 1_000_000],
        "chunk-size line or trailer section over 64 KiB"),
    "response head over 64 KiB": ([HEAD + b"x-big: " + b"a" * 200_000], "response head over 64 KiB"),
}


@pytest.mark.parametrize("case", FRAMING)
@PATHS
def test_a_malformed_or_unsupported_response_fails_the_request(path, case):
    writes, lean_error = FRAMING[case]
    with RawServer([Reply(writes)]) as server:  # the connection stays open after the reply: no EOF to end it
        (r,) = requests(path, server, timeout=5.0)
    assert r.error is not None and "timed out" not in r.error, r.error
    if path == "lean":
        assert r.error.startswith("RemoteProtocolError: ") and lean_error in r.error, r.error


@PATHS
def test_interim_1xx_responses_are_skipped(path):
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n"
    writes = sse_response(*STREAM)
    with RawServer([Reply([interim + writes[0], *writes[1:]])]) as server:
        (r,) = requests(path, server)
    assert ok(r), r.error


@PATHS
def test_connection_close_among_other_tokens_is_honoured(path):
    """`Connection: close, x` is a token list holding close: the connection is not used again (the server
    here keeps it open, so a client that reused it would send the second request on it)."""
    reply = Reply(sse_response(*STREAM, head=HEAD + b"connection: close, x\r\n"))
    with RawServer([reply, reply]) as server:
        rs = requests(path, server, n=2)
    assert all(ok(r) for r in rs), [r.error for r in rs]
    assert [c for c, _ in server.requests] == [1, 2]


# -- a POST is never sent twice -----------------------------------------------------------------------------
@PATHS
def test_a_kept_alive_connection_the_server_closed_is_replaced_before_sending(path):
    """The server closes an idle kept-alive connection (uvicorn after 5 s). The client sees it closed (here:
    the close has reached its socket, the event loop has not run since) and sends on a new connection."""
    close = threading.Event()  # set once the connection is idle in the pool, with the loop held still
    with RawServer([Reply(sse_response(*STREAM), close_on=close), Reply(sse_response(*STREAM))]) as server:
        def wait_for_the_close(t: StreamTransport) -> None:  # blocks the loop: it cannot see the close itself
            close.set()
            assert server.closed.wait(10)
            if isinstance(t, SSEClient):
                (conn,) = [c for conns in t._idle.values() for c in conns]
                assert conn.transport is not None
                assert select.select([conn.transport.get_extra_info("socket").fileno()], [], [], 10)[0]
                assert not conn.closed  # the loop has not noticed: only the readability check can

        rs = requests(path, server, n=2, between=wait_for_the_close)
    assert all(ok(r) for r in rs), [r.error for r in rs]
    assert [c for c, _ in server.requests] == [1, 2]


@PATHS
def test_a_post_is_not_sent_again_when_its_kept_alive_connection_drops(path):
    """The second request reaches the server on the kept-alive connection, which then closes without a reply:
    the request fails (sent again, it could start a second generation), and the server saw it once."""
    with RawServer([Reply(sse_response(*STREAM)), Reply([], hang_up=True), Reply(sse_response(*STREAM))]) as server:
        rs = requests(path, server, n=2)
    assert ok(rs[0]) and rs[1].error is not None, [r.error for r in rs]
    assert len(server.requests) == 2
    if path == "lean":  # (httpx does not keep a connection whose body it left unread, here at [DONE])
        assert [c for c, _ in server.requests] == [1, 1] and "a POST is not sent twice" in rs[1].error


# -- SSE (issue 30, item 6): the WHATWG rules on both transports ----------------------------------------------
SSE_CASES = {
    # an event without its blank line at the end of the stream is discarded
    "unterminated last event": ([b"data: a\n\ndata: b"], ["a"]),
    "last line without its blank line": ([b"data: a\n\n", b"data: b\n"], ["a"]),
    # a line without a colon is a field name with an empty value
    "data alone": ([b"data\n\n"], [""]),
    "data alone among data lines": ([b"data\ndata: x\n\ndata: y\ndata\n\n"], ["\nx", "y\n"]),
    # CR, LF and CRLF all end lines, a CRLF split across reads included
    "lone CR": ([b"data: a\rdata: b\r\r"], ["a\nb"]),
    "CR then CRLF": ([b"data: a\r\r\ndata: b\n\n"], ["a", "b"]),
    "CRLF split across chunks": ([b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"], ["a", "b"]),
    # one leading byte-order mark is ignored (a second one is not)
    "leading BOM": ([b"\xef\xbb\xbfdata: a\n\n"], ["a"]),
    "BOM split across chunks": ([b"\xef", b"\xbb", b"\xbfdata: a\n\n"], ["a"]),
    "two BOMs": ([b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n"], ["b"]),
    # an event is dispatched only when it had a data field
    "id, event or retry only": ([b"id: 1\n\ndata: a\n\n\n\nevent: x\n\nretry: 5\n\n", b"id: 2\n\n"], ["a"]),
    "comments and other fields": ([b": hi\nevent: e\nid: 3\nfoo: bar\ndata:  two spaces\n\n"], [" two spaces"]),
}


def stream_events(path: str, parts: Sequence[bytes]) -> list[str]:
    got: list[str] = []

    def on_events(datas: Sequence[bytes | str], t: float) -> int:
        got.extend(d.decode() if isinstance(d, bytes) else d for d in datas)
        return CONTINUE

    async def go() -> None:
        async with httpx.AsyncClient() as http:
            t = transport(path, http)
            try:
                resp = await t.post(server.url + "/v1/completions", b"{}", {}, on_events)
                assert resp.status == 200
            finally:
                await t.close()

    with RawServer([Reply(sse_response(*parts))]) as server:
        asyncio.run(go())
    return got


@pytest.mark.parametrize("case", SSE_CASES)
@PATHS
def test_sse_events_follow_the_whatwg_rules(path, case):
    parts, expected = SSE_CASES[case]
    assert stream_events(path, parts) == expected


@PATHS
def test_a_connection_error_is_a_stream_error(path):
    async def go() -> None:
        async with httpx.AsyncClient() as http:
            t = transport(path, http)
            try:
                await t.post("http://127.0.0.1:9/v1/completions", b"{}", {}, lambda d, t: CONTINUE)
            finally:
                await t.close()

    with pytest.raises(StreamError, match="ConnectError"):
        asyncio.run(go())

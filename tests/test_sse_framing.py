"""The lean client's response parser (sse_http._Exchange) gives the same events however the body is framed:
one SSE event per HTTP chunk (its fast path), small chunks splitting events and lines, one chunk for all,
chunk extensions, CRLF line endings, multi-line data, comments; and however the bytes are split into reads."""

from __future__ import annotations

import asyncio

import pytest

from specbench.sse_http import CONTINUE, END, _Exchange

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
EVENTS = [b'data: {"a": 1}\n\n', b'data: {"a": 2}\r\n\r\n', b"data: line1\ndata: line2\n\n", b": a comment\n\n",
          b"data:nospace\n\n", b"event: x\ndata: {}\n\n", b"data: \n\n", b'data: {"a": 3}\n\n', b"data: [DONE]\n\n"]
EXPECTED = [b'{"a": 1}', b'{"a": 2}', b"line1\nline2", b"nospace", b"{}", b"", b'{"a": 3}', b"[DONE]"]


def frame(events: list[bytes], how: str) -> bytes:
    body = b"".join(events)
    if how == "per event":
        parts = events
    elif how == "7 bytes":
        parts = [body[i:i + 7] for i in range(0, len(body), 7)]
    else:  # one chunk, with an extension on its size line
        return HEAD + b"%x;ext=1\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    return HEAD + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def parse(raw: bytes, read: int) -> tuple[list[bytes], _Exchange]:
    loop = asyncio.new_event_loop()
    try:
        got: list[bytes] = []

        def on_event(data: bytes, t: float) -> int:
            got.append(data)
            return END if data == b"[DONE]" else CONTINUE

        ex = _Exchange(on_event, loop.create_future())
        for i in range(0, len(raw), read):
            ex.feed(raw[i:i + read], 0.0)
        return got, ex
    finally:
        loop.close()


@pytest.mark.parametrize("how", ["per event", "7 bytes", "one chunk"])
@pytest.mark.parametrize("read", [1, 2, 5, 64, 1 << 20])
def test_the_same_events_however_the_body_is_framed_and_read(how, read):
    got, ex = parse(frame(EVENTS, how), read)
    assert got == EXPECTED
    assert ex.done.done() and ex.done.result().status == 200
    assert ex.mode == "end" and ex.reusable  # the body was drained to its end: the connection can be reused


def test_nothing_after_done_is_read_and_the_body_is_still_drained():
    got, ex = parse(frame([b"data: [DONE]\n\n", b'data: {"late": 1}\n\n'], "per event"), 1 << 20)
    assert got == [b"[DONE]"] and ex.mode == "end" and ex.reusable


@pytest.mark.parametrize("size", [b"-1", b"zz", b"1x;e"])
def test_a_bad_chunk_size_fails_the_exchange(size):
    raw = HEAD + size + b"\r\ndata: x\n\n\r\n0\r\n\r\n"
    got, ex = parse(raw, 1 << 20)
    assert got == [] and ex.done.done() and "bad chunk size" in str(ex.done.exception())

"""The lean client's response parser (sse_http._Exchange) gives the same events however the body is framed:
one SSE event per HTTP chunk (its fast path), small chunks splitting events and lines, one chunk for all,
chunk extensions, CRLF line endings, multi-line data, comments; and however the bytes are split into reads."""

from __future__ import annotations

import asyncio

import pytest

from specbench.client.sse_http import _END, ABORT, CONTINUE, END, _Exchange

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

        def on_events(datas: list[bytes], t: float) -> int:
            for data in datas:
                got.append(data)
                if data == b"[DONE]":
                    return END
            return CONTINUE

        ex = _Exchange(on_events, loop.create_future())
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
    assert ex.state == _END and ex.reusable  # the body was drained to its end: the connection can be reused


def test_nothing_after_done_is_read_and_the_body_is_still_drained():
    got, ex = parse(frame([b"data: [DONE]\n\n", b'data: {"late": 1}\n\n'], "per event"), 1 << 20)
    assert got == [b"[DONE]"] and ex.state == _END and ex.reusable


@pytest.mark.parametrize("size", [b"-1", b"zz", b"1x;e"])
def test_a_bad_chunk_size_fails_the_exchange(size):
    raw = HEAD + size + b"\r\ndata: x\n\n\r\n0\r\n\r\n"
    got, ex = parse(raw, 1 << 20)
    assert got == [] and ex.done.done() and ("malformed HTTP response: Invalid character in chunk size"
                                             in str(ex.done.exception()))



def test_the_events_of_each_read_are_handed_over_in_one_call_with_its_time():
    """Each read's complete events at once, in order, with that read's arrival time; an event split across reads
    comes with the read that completes it; [DONE] completes the exchange before the body's last chunk."""
    loop = asyncio.new_event_loop()
    try:
        calls: list[tuple[list[bytes], float]] = []

        def on_events(datas: list[bytes], t: float) -> int:
            calls.append((datas, t))
            return END if b"[DONE]" in datas else CONTINUE

        ex = _Exchange(on_events, loop.create_future())
        ex.feed(HEAD, 0.0)
        body = frame([b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n", b"data: [DONE]\n\n"], "per event")
        first, rest = body[len(HEAD):len(HEAD) + 35], body[len(HEAD) + 35:]  # two events and half the third
        ex.feed(first, 1.0)
        ex.feed(rest[:-5], 2.0)  # all but the body's last chunk
        assert calls == [([b"1", b"2"], 1.0), ([b"3", b"[DONE]"], 2.0)] and ex.done.done()
        ex.feed(rest[-5:], 3.0)
        assert len(calls) == 2 and ex.state == _END and ex.reusable
    finally:
        loop.close()


def test_after_an_abort_no_later_read_is_handed_over_and_the_response_is_kept():
    loop = asyncio.new_event_loop()
    try:
        calls: list[list[bytes]] = []

        def on_events(datas: list[bytes], t: float) -> int:
            calls.append(datas)
            return ABORT

        ex = _Exchange(on_events, loop.create_future())
        raw = frame([b"data: a\n\n", b"data: b\n\n"], "per event")
        ex.feed(raw[:len(HEAD) + 14], 0.0)  # the head and the first event
        ex.feed(raw[len(HEAD) + 14:], 0.0)
        assert calls == [[b"a"]] and ex.done.result().status == 200 and not ex.reusable
    finally:
        loop.close()


def test_the_events_before_a_framing_error_in_the_same_read_are_handed_over_first():
    got, ex = parse(HEAD + b"9\r\ndata: a\n\n\r\nzz\r\n", 1 << 20)
    assert got == [b"a"] and "malformed HTTP response: Invalid character in chunk size" in str(ex.done.exception())


def test_the_sse_rules_hold_however_the_bytes_are_split():
    """Every SSE case of tests/client/test_transport.py, fed to the lean splitter one byte at a time and in two pieces
    at every position: a CR, a CRLF or a BOM split across reads reads the same."""
    from specbench.client.sse import SSEParser
    from tests.client.test_transport import SSE_CASES

    for parts, expected in SSE_CASES.values():
        raw = b"".join(parts)
        splits = [[raw[i:i + 1] for i in range(len(raw))]] + [[raw[:i], raw[i:]] for i in range(1, len(raw))]
        for pieces in splits:
            p, out = SSEParser(), []
            for piece in pieces:
                p.feed(piece, out)
            assert [e.decode() for e in out] == expected, (raw, pieces)

"""The lean client's response parser (sse_http._Exchange) gives the same events however the body is framed:
one SSE event per HTTP chunk (its fast path), small chunks splitting events and lines, one chunk for all,
chunk extensions, CRLF line endings, multi-line data, comments; and however the bytes are split into reads."""

from __future__ import annotations

import asyncio

import pytest

from specbench.sse_http import ABORT, BATCH, CONTINUE, END, FLUSH_S, STALL_S, _Exchange

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

        def on_events(datas: list[bytes], times: list[float]) -> int:
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
    assert ex.mode == "end" and ex.reusable  # the body was drained to its end: the connection can be reused


def test_nothing_after_done_is_read_and_the_body_is_still_drained():
    got, ex = parse(frame([b"data: [DONE]\n\n", b'data: {"late": 1}\n\n'], "per event"), 1 << 20)
    assert got == [b"[DONE]"] and ex.mode == "end" and ex.reusable


@pytest.mark.parametrize("size", [b"-1", b"zz", b"1x;e"])
def test_a_bad_chunk_size_fails_the_exchange(size):
    raw = HEAD + size + b"\r\ndata: x\n\n\r\n0\r\n\r\n"
    got, ex = parse(raw, 1 << 20)
    assert got == [] and ex.done.done() and "bad chunk size" in str(ex.done.exception())


def test_events_are_handed_over_in_batches_in_order_with_each_ones_arrival_time():
    """Every BATCH events, then the rest at [DONE] at once (the exchange completes then, not at the body's end)."""
    loop = asyncio.new_event_loop()
    try:
        calls: list[tuple[list[bytes], list[float]]] = []

        def on_events(datas: list[bytes], times: list[float]) -> int:
            calls.append((datas, times))
            return END if datas[-1] == b"[DONE]" else CONTINUE

        ex = _Exchange(on_events, loop.create_future())
        n = BATCH + 5
        ex.feed(HEAD, 0.0)
        step = FLUSH_S / (2 * n)  # all of them within FLUSH_S: only the count and [DONE] hand them over
        for i in range(n):
            ex.feed(b"%x\r\n%s\r\n" % (len(e := b"data: %d\n\n" % i), e), i * step)
        assert [len(d) for d, _ in calls] == [BATCH] and not ex.done.done()
        ex.feed(b"e\r\ndata: [DONE]\n\n\r\n", n * step)
        assert [len(d) for d, _ in calls] == [BATCH, 6] and ex.done.done()  # before the body's last chunk
        assert [x for d, _ in calls for x in d] == [b"%d" % i for i in range(n)] + [b"[DONE]"]
        assert [x for _, t in calls for x in t] == [i * step for i in range(n + 1)]
        ex.feed(b"0\r\n\r\n", 0.0)
        assert ex.mode == "end" and ex.reusable
    finally:
        loop.close()


def test_an_abort_in_a_batch_stops_the_later_events_and_keeps_the_response():
    loop = asyncio.new_event_loop()
    try:
        calls: list[list[bytes]] = []

        def on_events(datas: list[bytes], times: list[float]) -> int:
            calls.append(datas)
            return ABORT

        ex = _Exchange(on_events, loop.create_future())
        ex.feed(frame([b"data: %d\n\n" % i for i in range(2 * BATCH)], "per event"), 0.0)
        assert len(calls) == 1 and len(calls[0]) == BATCH  # the second batch was never handed over
        assert ex.done.result().status == 200 and not ex.reusable
    finally:
        loop.close()


@pytest.mark.parametrize("end", ["truncated", "flush"])
def test_events_read_before_a_failure_or_a_cancellation_are_handed_over(end):
    """A body cut short (StreamError) and a cancelled post (a timeout: SSEClient.post calls flush) both hand
    over what arrived, so the record keeps the chunks measured before it."""
    loop = asyncio.new_event_loop()
    try:
        got: list[bytes] = []

        def on_events(datas: list[bytes], times: list[float]) -> int:
            got.extend(datas)
            return CONTINUE

        ex = _Exchange(on_events, loop.create_future())
        ex.feed(frame([b"data: a\n\n", b"data: b\n\n"], "per event")[:-5], 0.0)  # without the last chunk
        assert got == []
        if end == "truncated":
            ex.lost()
            assert "truncated" in str(ex.done.exception())
        else:
            ex.flush()
        assert got == [b"a", b"b"]
    finally:
        loop.close()


def test_a_batch_is_handed_over_once_its_first_event_is_flush_s_old_or_by_a_timer_when_the_stream_stalls():
    loop = asyncio.new_event_loop()
    try:
        calls: list[list[bytes]] = []

        def on_events(datas: list[bytes], times: list[float]) -> int:
            calls.append(datas)
            return CONTINUE

        ex = _Exchange(on_events, loop.create_future())
        ex.feed(HEAD, 0.0)
        for i, t in enumerate([0.0, FLUSH_S / 2, FLUSH_S]):  # the third arrives FLUSH_S after the first
            ex.feed(b"%x\r\n%s\r\n" % (len(e := b"data: %d\n\n" % i), e), t)
        assert calls == [[b"0", b"1", b"2"]] and ex.timer is None  # no timer left behind by that batch
        ex.feed(b"a\r\ndata: 3\n\n\r\n", 1.0)  # then nothing more: the stall timer hands it over
        assert ex.timer is not None and ex.timer.when() - loop.time() <= STALL_S
        loop.call_later(STALL_S, loop.stop)
        loop.run_forever()  # runs the timers due by then: the stall timer's first
        assert calls == [[b"0", b"1", b"2"], [b"3"]] and ex.timer is None
    finally:
        loop.close()

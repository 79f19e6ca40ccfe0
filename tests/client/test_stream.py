"""The streaming client on hand-made SSE bodies: multi-token chunks, usage, errors. No server needed."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from specbench.client.httpx_transport import HttpxTransport
from specbench.client.sse_http import SSEClient
from specbench.client.stream import Endpoint, stream_request
from specbench.config import parse_config
from specbench.server.engines.base import RequestSpec
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import sweep_facts

CFG = parse_config({"model": {"path": "/m"}, "variants": [{"name": "a", "drafter": "autoregressive",
                    "baseline": True}], "sweep": {"output_lens": [8], "concurrency": [1]}})


def sse(*events: object) -> bytes:
    out = []
    for e in events:
        out.append(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n")
    return "".join(out).encode()


def chunk(ids: list[int], cumulative: int, text: str = "x", finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": text}, "token_ids": ids, "finish_reason": finish}],
            "usage": {"prompt_tokens": 5, "completion_tokens": cumulative, "total_tokens": 5 + cumulative}}


async def _serve(body: bytes, status: int, seen: list[dict], piece: int, keep_alive: bool = True,
                 terminate: bool = True):
    """A one-route HTTP/1.1 server: every request gets `body` as a chunked response, written `piece` bytes at
    a time (so chunk framing and SSE lines are split across reads); keep-alive."""
    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                n = int(next(ln.split(b":")[1] for ln in lines if ln.lower().startswith(b"content-length")))
                seen.append(json.loads(await reader.readexactly(n)))
                ctype = b"text/event-stream" if status == 200 else b"application/json"
                out = b"HTTP/1.1 %d X\r\ncontent-type: %s\r\ntransfer-encoding: chunked\r\n\r\n" % (status, ctype)
                for i in range(0, len(body), 7):
                    part = body[i:i + 7]
                    out += b"%x\r\n%s\r\n" % (len(part), part)
                out += b"0\r\n\r\n" if terminate else b""
                for i in range(0, len(out), piece):
                    writer.write(out[i:i + piece])
                    await writer.drain()
                if not keep_alive:  # an idle-timeout close, without "connection: close"
                    writer.close()
                    return
                if not terminate:  # the body never ends: the connection stays open and silent
                    await asyncio.Event().wait()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return await asyncio.start_server(on_client, "127.0.0.1", 0)


def run(body: bytes, status: int = 200, timeout: float = 5.0, path: str = "lean", piece: int = 5, max_tokens: int = 8,
        terminate: bool = True):
    async def go():
        seen: list[dict] = []
        server = await _serve(body, status, seen, piece, terminate=terminate)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        try:
            async with httpx.AsyncClient() as http:
                transport = SSEClient() if path == "lean" else HttpxTransport(http)
                eng = VLLMEngine(CFG.engine, sweep_facts(CFG), "/m", "m")
                req = RequestSpec(messages=[{"role": "user", "content": "hi"}], prompt_text="hi",
                                  max_tokens=max_tokens, temperature=0.0, seed=0)
                try:
                    return await stream_request(Endpoint(eng, transport, url, timeout), req)
                finally:
                    await transport.close()
        finally:
            server.close()
            assert seen and all(s["stream"] is True and s["ignore_eos"] is True and s["return_token_ids"] is True
                                for s in seen)

    return asyncio.run(go())


PATHS = pytest.mark.parametrize("path", ["lean", "httpx"])


@PATHS
def test_multi_token_chunks_are_counted_from_cumulative_usage(path):
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 0}}
    final = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 8, "total_tokens": 13}}
    body = sse(role, chunk([1], 1), chunk([2, 3, 4], 4), chunk([5, 6], 6), chunk([7, 8], 8, finish="length"),
               final, "[DONE]")
    r = run(body, path=path)
    assert r.error is None
    assert r.chunk_tokens == [1, 3, 2, 2]
    assert r.output_tokens == 8 and r.prompt_tokens == 5
    assert r.token_ids == [1, 2, 3, 4, 5, 6, 7, 8]
    assert r.ttft_s is not None and r.ttft_s <= r.chunk_offsets_s[-1] <= r.e2e_s
    assert r.finish_reason == "length"


@PATHS
def test_http_error_is_recorded_not_raised(path):
    r = run(b'{"error": "boom"}', status=500, path=path)
    assert r.error is not None and r.error.startswith("HTTP 500")


@PATHS
def test_malformed_sse_is_an_error(path):
    r = run(sse(chunk([1], 1), "{not json"), path=path)
    assert r.error is not None and "malformed" in r.error


@PATHS
def test_stream_without_done_is_truncated(path):
    r = run(sse(chunk([1], 1), chunk([2], 2)), path=path)
    assert r.error == "stream ended before [DONE] (truncated)"
    assert r.output_tokens == 2  # what did arrive is kept


@pytest.mark.parametrize("ids,expected", [([1, 2], [2]), (None, [1])])
@PATHS
def test_token_count_without_usage_falls_back_to_ids_then_text(path, ids, expected):
    c = {"choices": [{"index": 0, "delta": {"content": "ab"}, "finish_reason": None}]}
    if ids is not None:
        c["choices"][0]["token_ids"] = ids
    r = run(sse(c, "[DONE]"), path=path)
    assert r.chunk_tokens == expected


FINAL8 = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 8, "total_tokens": 13}}


def eight(final: dict = FINAL8) -> bytes:
    return sse(*(chunk([i], i) for i in range(1, 9)), final, "[DONE]")


@PATHS
def test_a_token_id_beyond_64_bits_is_a_request_error_and_the_record_can_be_stored(path, tmp_path):
    """The columnar store holds int64 ids: such an id (a broken server) makes the request an error without
    its ids, and the window's Parquet file is written."""
    from specbench.records.columnar import write_window
    from specbench.records.rundir import RunDir
    from specbench.shared.schema import RequestRecord, WindowRecord

    r = run(sse(*(chunk([2**63 if i == 3 else i], i) for i in range(1, 9)), FINAL8, "[DONE]"), path=path)
    assert r.error is not None and "64-bit" in r.error and r.token_ids is None
    rec = RequestRecord(variant="b", cell_id="c", point_id="p", window_id="w", category="c", prompt_id="p0",
                        output_len=8, concurrency=1, repeat=1, index=0, t_send=1.0, token_ids=r.token_ids,
                        chunk_offsets_s=r.chunk_offsets_s, chunk_tokens=r.chunk_tokens, error=r.error)
    (tmp_path / "columnar").mkdir()
    window = WindowRecord(window_id="w", variant="b", cell_id="c", point_id="p", repeat=1, t_start=0.0, t_end=2.0,
                          n_requests=1)
    assert write_window(RunDir(tmp_path), window, [rec]).exists()


@PATHS
@pytest.mark.parametrize("piece", [1, 3, 4096])
def test_a_healthy_stream_passes_every_check_however_it_is_split(path, piece):
    r = run(eight(), path=path, piece=piece)
    assert r.error is None and r.chunk_tokens == [1] * 8 and r.token_ids == list(range(1, 9))


@PATHS
def test_final_usage_that_claims_more_than_was_streamed_is_an_error(path):
    r = run(eight({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 16}}), path=path)
    assert r.error == "token count mismatch: the final usage claims 16 completion tokens, 8 were streamed"


@PATHS
def test_token_ids_that_disagree_with_usage_deltas_are_an_error(path):
    body = sse(*(chunk([i], 2 * i) for i in range(1, 9)), FINAL8, "[DONE]")  # usage says 2 per chunk
    assert run(body, path=path).error == "token count mismatch: 8 token ids streamed, usage deltas count 16"


@PATHS
def test_empty_and_wrong_length_outputs_are_errors(path):
    empty = sse({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 0}}, "[DONE]")
    assert run(empty, path=path).error == "empty completion (0 tokens)"
    assert run(eight(), path=path, max_tokens=4).error == "output length 8 tokens, 4 requested (ignore_eos is sent)"


@PATHS
def test_lone_surrogate_is_stored_escaped(path):
    r = run(sse(chunk([1], 1, text="a\ud83d"), *(chunk([i], i) for i in range(2, 9)), FINAL8, "[DONE]"), path=path)
    assert r.error is None and r.text.startswith("a\\ud83d") and r.text.encode("utf-8")


def test_an_endpoint_behind_a_proxy_is_streamed_through_httpx(monkeypatch):
    from specbench.client.transport import behind_proxy

    for k in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    assert not behind_proxy("http://10.1.2.3:8000")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert behind_proxy("http://10.1.2.3:8000")
    monkeypatch.setenv("NO_PROXY", "10.1.2.3")
    assert not behind_proxy("http://10.1.2.3:8000")


@PATHS
def test_a_stream_complete_at_done_does_not_wait_for_the_body_end(path):
    """[DONE] completes the request even if the server never ends the HTTP body (the 5 s timeout would
    otherwise be the error), and an error mid-stream ends it at once."""
    assert run(eight(), path=path, terminate=False).error is None
    r = run(sse(chunk([1], 1), "{not json", chunk([2], 2)), path=path, terminate=False)
    assert r.error is not None and "malformed" in r.error


@PATHS
def test_a_chunk_the_engine_cannot_parse_is_a_request_error(path):
    r = run(sse({"choices": ["not an object"]}, "[DONE]"), path=path)
    assert r.error is not None and r.error.startswith("unreadable chunk (AttributeError")

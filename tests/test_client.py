"""The streaming client on hand-made SSE bodies: multi-token chunks, usage, errors. No server needed."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from specbench.client import Endpoint, stream_request
from specbench.config import parse_config
from specbench.engines.base import RequestSpec
from specbench.engines.vllm import VLLMEngine
from specbench.launch import sweep_facts

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


def run(body: bytes, status: int = 200, timeout: float = 5.0):
    def handler(request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.content)
        assert sent["stream"] is True and sent["ignore_eos"] is True and sent["return_token_ids"] is True
        return httpx.Response(status, content=body, headers={"content-type": "text/event-stream"})

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            eng = VLLMEngine(CFG.engine, sweep_facts(CFG), "/m", "m")
            req = RequestSpec(messages=[{"role": "user", "content": "hi"}], prompt_text="hi", max_tokens=8,
                              temperature=0.0, seed=0)
            return await stream_request(Endpoint(eng, http, "http://test", timeout), req)

    return asyncio.run(go())


def test_multi_token_chunks_are_counted_from_cumulative_usage():
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 0}}
    final = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 8, "total_tokens": 13}}
    body = sse(role, chunk([1], 1), chunk([2, 3, 4], 4), chunk([5, 6], 6), chunk([7, 8], 8, finish="length"),
               final, "[DONE]")
    r = run(body)
    assert r.error is None
    assert r.chunk_tokens == [1, 3, 2, 2]
    assert r.output_tokens == 8 and r.prompt_tokens == 5
    assert r.token_ids == [1, 2, 3, 4, 5, 6, 7, 8]
    assert r.ttft_s is not None and r.ttft_s <= r.chunk_offsets_s[-1] <= r.e2e_s
    assert r.finish_reason == "length"


def test_http_error_is_recorded_not_raised():
    r = run(b'{"error": "boom"}', status=500)
    assert r.error is not None and r.error.startswith("HTTP 500")


def test_malformed_sse_is_an_error():
    r = run(sse(chunk([1], 1), "{not json"))
    assert r.error is not None and "malformed" in r.error


def test_stream_without_done_is_truncated():
    r = run(sse(chunk([1], 1), chunk([2], 2)))
    assert r.error == "stream ended before [DONE] (truncated)"
    assert r.output_tokens == 2  # what did arrive is kept


@pytest.mark.parametrize("ids,expected", [([1, 2], [2]), (None, [1])])
def test_token_count_without_usage_falls_back_to_ids_then_text(ids, expected):
    c = {"choices": [{"index": 0, "delta": {"content": "ab"}, "finish_reason": None}]}
    if ids is not None:
        c["choices"][0]["token_ids"] = ids
    r = run(sse(c, "[DONE]"))
    assert r.chunk_tokens == expected

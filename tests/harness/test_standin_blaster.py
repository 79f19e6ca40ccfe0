"""The pre-rendered stand-in (tests/standin/blaster.py, the benchmark's ceiling rows) streams what the client
accepts as a complete vLLM stream: every check passes, token ids and usage agree."""

from __future__ import annotations

import asyncio

from specbench.client.sse_http import SSEClient
from specbench.client.stream import Endpoint, stream_request
from specbench.config import parse_config
from specbench.server.engines.base import RequestSpec
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import sweep_facts
from tests.standin.blaster import handler
from tests.standin.httpserver import serve

CFG = parse_config({"model": {"path": "/m"}, "variants": [{"name": "a", "drafter": "autoregressive",
                    "baseline": True}], "sweep": {"output_lens": [8], "concurrency": [1]}})


def test_the_blaster_streams_complete_records():
    async def go():
        server = await serve("127.0.0.1", 0, handler("m"))
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        sse = SSEClient()
        try:
            ep = Endpoint(VLLMEngine(CFG.engine, sweep_facts(CFG), "/m", "m"), sse, url, 10.0)
            out = []
            for n in (3, 5000):  # 5000 tokens: the body spans several 64 KiB writes
                req = RequestSpec(messages=[{"role": "user", "content": "hi"}], prompt_text="hi", max_tokens=n,
                                  temperature=0.0, seed=0)
                out.append(await stream_request(ep, req))
            return out
        finally:
            await sse.close()
            server.close()

    small, big = asyncio.run(go())
    assert small.error is None and small.chunk_tokens == [1] * 3 and small.output_tokens == 3
    assert big.error is None and len(big.token_ids or []) == 5000 and big.finish_reason == "length"

"""An endpoint specbench did not launch, read in its own protocol (issue 39 item 2): `engine.protocol: vllm`
or `sglang` reads acceptance from each response and from the counters exactly as for a server specbench
launches (the same functions), `openai` only what acceptance_field / acceptance_metric name."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from specbench.config import parse_config
from specbench.plan.specs import RequestSpec
from specbench.server.engines import sglang, vllm
from specbench.server.engines.external import ExternalEngine
from specbench.server.launch import sweep_facts
from specbench.shared.errors import ConfigError

VLLM_CHUNK = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
              "usage": {"prompt_tokens": 5, "completion_tokens": 12},
              "metrics": {"speculative_decoding": {"num_accepted_draft_tokens": 4, "num_spec_steps": 6,
                                                   "num_draft_tokens": 18, "acceptance_histogram": [2, 4]}}}
SGLANG_CHUNK = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 12},
                "sglext": {"spec_tokens_details": {"spec_verify_ct": 8, "spec_accept_length": 1.5}}}
VLLM_METRICS = """# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{model_name="m"} 10
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{model_name="m"} 30
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 12
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="m"} 40
"""


def engine(protocol: str, **extra: Any) -> ExternalEngine:
    c = parse_config({"model": {"path": "/m"},
                      "engine": {"kind": "external", "url": "http://h:9", "protocol": protocol, **extra},
                      "variants": [{"name": "a", "drafter": "autoregressive", "baseline": True}],
                      "sweep": {"output_lens": [8], "concurrency": [1]}})
    return ExternalEngine(c.engine, sweep_facts(c), "/m", "m")


def spec() -> RequestSpec:
    return RequestSpec(messages=[{"role": "user", "content": "hi"}], prompt_text="hi", max_tokens=8,
                       temperature=0.0, seed=0)


def test_vllm_protocol_reads_what_a_launched_vllm_server_gives() -> None:
    e = engine("vllm")
    assert e.parse_spec(VLLM_CHUNK) == vllm.parse_vllm_spec(VLLM_CHUNK) is not None
    assert e.spec_keys() == ("metrics",) and e.counter_acceptance
    assert e.request_body(spec())["return_token_ids"] is True

    def metrics(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=VLLM_METRICS)

    async def read() -> dict[str, Any] | None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(metrics)) as http:
            return await e.read_counters(http, "http://h:9/metrics")

    got = asyncio.run(read())
    assert got is not None and got["num_accepted_tokens"] == 12 and got["num_drafts"] == 10


def test_sglang_protocol_reads_sglext() -> None:
    e = engine("sglang")
    assert e.parse_spec(SGLANG_CHUNK) == sglang.parse_sglang_spec(SGLANG_CHUNK) is not None
    assert e.spec_keys() == ("sglext", "meta_info") and not e.counter_acceptance
    assert e.request_body(spec())["return_spec_tokens_details"] is True


def test_openai_protocol_reads_only_the_named_field() -> None:
    e = engine("openai")
    assert e.parse_spec(VLLM_CHUNK) is None and not e.counter_acceptance
    assert "return_token_ids" not in e.request_body(spec())
    named = engine("openai", acceptance_field="stats.steps", acceptance_field_kind="verify_steps")
    got = named.parse_spec({"stats": {"steps": 7}})
    assert got is not None and got.verify_steps == 7


@pytest.mark.parametrize(("engine_section", "expected"), [
    ({"kind": "vllm", "protocol": "sglang"},
     "engine.protocol: sglang is for an external endpoint; a vllm engine that specbench launches speaks its own "
     "protocol already (remove it)"),
    ({"kind": "external", "url": "http://h:9", "protocol": "vllm", "acceptance_metric": "x_total"},
     "engine.protocol: vllm reads the server's own acceptance fields and counters; remove "
     "engine.acceptance_field / acceptance_metric (or use protocol: openai)"),
])
def test_protocol_misuse_is_one_line(engine_section: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"model": {"path": "/m"}, "engine": engine_section,
                      "variants": [{"name": "a", "drafter": "autoregressive", "baseline": True}],
                      "sweep": {"output_lens": [8], "concurrency": [1]}})
    assert "\n" not in str(exc.value) and expected in str(exc.value)

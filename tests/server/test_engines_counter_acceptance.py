"""Acceptance from server counters, end to end: the engine reads /metrics (served here from Prometheus text),
the runner diffs the window, the metrics turn the deltas into tau. Known answers, and missing counters."""

from __future__ import annotations

import asyncio
import math

import httpx
import pytest

from specbench.config import parse_config
from specbench.runner import counter_delta
from specbench.server.engines.command import CommandEngine
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import sweep_facts
from tests.metrics.test_metrics import cells_of, one, req, windows_for


def _read(engine, text: str) -> dict:
    """engine.read_counters against a /metrics endpoint that answers `text`."""
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text=text))

    async def go() -> dict:
        async with httpx.AsyncClient(transport=transport) as http:
            return await engine.read_counters(http, "http://engine/metrics")

    return asyncio.run(go())


def _cfg(engine: dict) -> object:
    return parse_config({"model": {"path": "/m"}, "engine": engine,
                         "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                                      {"name": "dd", "drafter": "ngram"}],
                         "sweep": {"output_lens": [8], "concurrency": [1]}})


def _cell_from_counters(engine, before_text: str, after_text: str, n_out: int) -> object:
    counters, per_pos = counter_delta(_read(engine, before_text), _read(engine, after_text))
    r = req("dd", n_out=n_out, output_len=n_out)
    return one(cells_of([r], windows_for([r], counters=counters, per_position_accepted=per_pos)), "dd")


VERIFY = "# TYPE ddtree_verify_steps counter\nddtree_verify_steps_total {}\n"


def test_command_engine_verify_step_counter_gives_tau() -> None:
    """engine.acceptance_metric (a DDTree wrapper's verify-step counter): 120 tokens in 40 verify steps."""
    cfg = _cfg({"kind": "command", "command": ["wrap"], "acceptance_metric": "ddtree_verify_steps_total"})
    eng = CommandEngine(cfg.engine, sweep_facts(cfg), "/m", "m")
    cell = _cell_from_counters(eng, VERIFY.format(10), VERIFY.format(50), n_out=120)
    assert cell["acceptance_source"] == "counters"
    assert cell["acceptance_length"] == pytest.approx(120 / 40)
    assert math.isnan(cell["draft_acceptance_length"])  # no draft counters: vLLM's figure stays empty


def test_command_engine_without_its_counter_has_no_acceptance() -> None:
    cfg = _cfg({"kind": "command", "command": ["wrap"], "acceptance_metric": "ddtree_verify_steps_total"})
    eng = CommandEngine(cfg.engine, sweep_facts(cfg), "/m", "m")
    cell = _cell_from_counters(eng, "", "", n_out=120)
    assert cell["acceptance_source"] == "none"
    assert math.isnan(cell["acceptance_length"])


VLLM_GEN_ONLY = "# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total{{model_name=\"m\"}} {}\n"
VLLM_SPEC = ("# TYPE vllm:spec_decode_num_drafts counter\nvllm:spec_decode_num_drafts_total {d}\n"
             "# TYPE vllm:spec_decode_num_draft_tokens counter\nvllm:spec_decode_num_draft_tokens_total {t}\n"
             "# TYPE vllm:spec_decode_num_accepted_tokens counter\nvllm:spec_decode_num_accepted_tokens_total {a}\n")


def test_vllm_without_spec_decode_counters_is_unknown_not_one() -> None:
    """A drafter whose spec-decode counters are absent: acceptance unknown, never 1.00."""
    c = _cfg({"kind": "vllm"})
    eng = VLLMEngine(c.engine, sweep_facts(c), "/m", "m")
    counters = _read(eng, VLLM_GEN_ONLY.format(500))
    assert counters["num_accepted_tokens"] is None and counters["num_drafts"] is None
    cell = _cell_from_counters(eng, VLLM_GEN_ONLY.format(500), VLLM_GEN_ONLY.format(628), n_out=128)
    assert cell["acceptance_source"] == "none"
    assert math.isnan(cell["acceptance_length"])
    assert math.isnan(cell["draft_acceptance_length"]) and math.isnan(cell["acceptance_rate"])


def test_vllm_without_generation_counter_falls_back_to_usage_totals() -> None:
    """No vllm:generation_tokens_total: the window's usage sum (128) stands in, as docs/metrics.md says."""
    c = _cfg({"kind": "vllm"})
    eng = VLLMEngine(c.engine, sweep_facts(c), "/m", "m")
    cell = _cell_from_counters(eng, VLLM_SPEC.format(d=0, t=0, a=0), VLLM_SPEC.format(d=28, t=112, a=73),
                               n_out=128)
    assert cell["acceptance_source"] == "counters"
    assert cell["acceptance_length"] == pytest.approx(128 / 55)
    assert cell["draft_acceptance_length"] == pytest.approx(1 + 73 / 28)

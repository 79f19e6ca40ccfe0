"""Fairness pins (SGLang per version line, vLLM) and the audit of everything outside the drafter's flags."""

from __future__ import annotations

from typing import Any

from specbench.checks.fairness import audit
from specbench.config import parse_config
from specbench.server.engines.pins import sglang_pins, vllm_pins
from specbench.server.engines.sglang import SGLangEngine
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import plan_launches, sweep_facts

E3 = {"draft_model_path": "/d", "steps": 3, "topk": 1, "num_draft_tokens": 4}


def cfg(kind: str = "sglang", args: list[str] | None = None, variants: list[dict[str, Any]] | None = None,
        version: str = "0.5.23") -> Any:
    return parse_config({
        "model": {"path": "/m"}, "engine": {"kind": kind, "version": version, "args": args or [],
                                             "env": {"NCCL_ALGO": "Ring"}},
        "variants": variants or [{"name": "ar", "drafter": "autoregressive", "baseline": True},
                                 {"name": "e3", "drafter": "eagle3", "params": E3}],
        "sweep": {"output_lens": [16], "concurrency": [1, 32, 4]}})


def test_pins_follow_the_sweep_and_version() -> None:
    assert sweep_facts(cfg()).max_concurrency == 32  # the largest of concurrency [1, 32, 4]
    assert sglang_pins([], 32, (0, 5, 23)) == ["--max-running-requests", "32", "--cuda-graph-max-bs-decode", "32",
                                               "--mem-fraction-static", "0.85"]
    assert sglang_pins([], 32, (0, 5, 9))[2] == "--cuda-graph-max-bs"
    assert sglang_pins(["--mem-fraction-static", "0.9", "--cuda-graph-max-bs", "16"], 32, None) == [
        "--max-running-requests", "32"]
    assert vllm_pins([], 32) == ["--max-num-seqs", "32"]
    assert vllm_pins(["--max-num-seqs=8"], 32) == []


def test_fair_matrix() -> None:
    c = cfg()
    a = audit(plan_launches(c, SGLangEngine(c.engine, sweep_facts(c), "/m", "m")))
    assert a.fair and a.pinned == {"--cuda-graph-max-bs-decode": "32", "--max-running-requests": "32",
                                   "--mem-fraction-static": "0.85"}
    assert "--speculative-algorithm" in a.drafter_flags["e3"]
    md = a.to_markdown()
    assert "| `--max-running-requests` | `32` |" in md
    assert a.to_dict()["ok"] is True


def test_variant_overrides_are_warnings() -> None:
    c = cfg(variants=[
        {"name": "ar", "drafter": "autoregressive", "baseline": True},
        {"name": "e3", "drafter": "eagle3", "params": E3, "env": {"NCCL_ALGO": "Tree"},
         "args": ["--max-running-requests", "48", "--attention-backend", "fa3",
                  "--speculative-attention-mode", "decode"]}])
    a = audit(plan_launches(c, SGLangEngine(c.engine, sweep_facts(c), "/m", "m")))
    settings = {w.setting for w in a.warnings}
    assert settings == {"--max-running-requests", "--attention-backend", "env:NCCL_ALGO"}
    assert "--max-running-requests" not in a.pinned
    d = a.to_dict()
    row = next(x for x in d["differences"] if x["what"] == "--attention-backend")
    assert row["values"] == {"ar": None, "e3": "fa3"}
    assert "warning (--attention-backend)" in a.to_markdown()


def test_vllm_matrix_pins_max_num_seqs() -> None:
    c = cfg("vllm", variants=[{"name": "ar", "drafter": "autoregressive", "baseline": True},
                              {"name": "ng", "drafter": "ngram"}])
    a = audit(plan_launches(c, VLLMEngine(c.engine, sweep_facts(c), "/m", "m")))
    assert a.pinned == {"--max-num-seqs": "32"} and a.fair


def test_a_wrapper_variant_is_flagged() -> None:
    c = cfg(variants=[{"name": "ar", "drafter": "autoregressive", "baseline": True},
                      {"name": "dd", "drafter": "ddtree", "params": {"mode": "command"},
                       "command": ["wrap", "--port", "{port}"]}])
    a = audit(plan_launches(c, SGLangEngine(c.engine, sweep_facts(c), "/m", "m")))
    assert [w.setting for w in a.warnings] == ["engine"] and "runs engine 'command'" in a.warnings[0].message


def test_a_command_servers_own_drafter_arguments_are_not_unfair_settings() -> None:
    from specbench.server.engines.command import CommandEngine

    serve = ["serve", "--port", "{port}", "--served-model-name", "{served_name}"]
    tree = [*serve, "--draft", "{draft_model_path}", "--tree-budget", "{tree_budget}"]
    c = parse_config({"model": {"path": "/m"}, "engine": {"kind": "command", "command": tree},
                      "sweep": {"output_lens": [16], "concurrency": [1]}, "variants": [
        {"name": "plain", "drafter": "autoregressive", "baseline": True, "command": [*serve, "--tree-budget", "0"]},
        {"name": "dd16", "drafter": "ddtree", "params": {"mode": "command", "draft_model_path": "/d",
                                                          "tree_budget": 16}},
        {"name": "dd64", "drafter": "ddtree", "params": {"mode": "command", "draft_model_path": "/d",
                                                          "tree_budget": 64}, "command": [*tree, "--sync", "1"]}]})
    a = audit(plan_launches(c, CommandEngine(c.engine, sweep_facts(c), "/m", "m")))
    # --draft and --tree-budget are the drafter's (filled from its parameters); --sync is a server setting
    assert [w.setting for w in a.warnings] == ["--sync"], a.warnings
    assert a.drafter_flags["dd16"] == ["--draft", "--tree-budget"] and a.drafter_flags["plain"] == ["--tree-budget"]

"""MTP read where the engines read it (issue 39 item 3), the DeepSeek-V3 recipe accepted, vLLM's mtp, eagle,
medusa and suffix drafters, and a speculative flag in a plain-decoding variant refused by the audit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specbench.checks.fairness import audit
from specbench.checks.preflight import config_problems
from specbench.config import parse_config
from specbench.plan.drafter import LaunchContext, get_drafter
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import plan_launches, sweep_facts

VLLM = LaunchContext(engine="vllm", engine_version=(0, 32), model_path="/m", check_paths=False)


def problems(name: str, params: dict[str, Any], ctx: LaunchContext) -> list[str]:
    d = get_drafter(name)
    return d.check(d.parse_params(params), ctx)


def spec_config(name: str, params: dict[str, Any], ctx: LaunchContext = VLLM) -> dict[str, Any]:
    d = get_drafter(name)
    argv = d.launch_args(d.parse_params(params), ctx)
    assert argv[0] == "--speculative-config"
    return json.loads(argv[1])


def model(tmp_path: Path, hf: dict[str, Any]) -> str:
    (tmp_path / "config.json").write_text(json.dumps(hf))
    return str(tmp_path)


KIMI = {"architectures": ["KimiK25ForConditionalGeneration"],
        "text_config": {"architectures": ["DeepseekV3ForCausalLM"], "num_nextn_predict_layers": 1}}
QWEN35 = {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "text_config": {"mtp_num_hidden_layers": 1}}
DSV3 = {"architectures": ["DeepseekV3ForCausalLM"], "num_nextn_predict_layers": 1}
DSV3_NO_MTP = {"architectures": ["DeepseekV3ForCausalLM"], "num_nextn_predict_layers": 0}
KIMI_NO_MTP = {"architectures": ["KimiK25ForConditionalGeneration"],
               "text_config": {"architectures": ["DeepseekV3ForCausalLM"]}}

# (checkpoint config.json, engine, params with "{model}" for the model folder, the expected answer)
CASES = [
    ("kimi-text-config-no-path", KIMI, "sglang", {"steps": 1}, []),
    ("kimi-text-config-own-path", KIMI, "sglang", {"draft_model_path": "{model}", "steps": 1}, []),
    ("qwen35-mtp-num-hidden-layers", QWEN35, "sglang", {"draft_model_path": "{model}", "steps": 1}, []),
    ("deepseek-v3-recipe-no-path", DSV3, "sglang", {"steps": 1, "topk": 1, "num_draft_tokens": 2}, []),
    ("deepseek-v3-on-vllm", DSV3, "vllm", {"steps": 2}, []),
    ("kimi-without-mtp-layers", KIMI_NO_MTP, "sglang", {"steps": 1}, [
        "params.draft_model_path: the target checkpoint has no MTP layers (config.json: none of "
        "num_nextn_predict_layers, mtp_num_hidden_layers, num_mtp_modules at the top level or under text_config "
        "or mtp_config), and SGLang fills a missing path with the target for KimiK25ForConditionalGeneration; "
        "give the folder of a separate MTP checkpoint"]),
    ("no-mtp-layers-on-vllm", DSV3_NO_MTP, "vllm", {"steps": 1}, [
        "params.draft_model_path: the target checkpoint has no MTP layers (config.json: num_nextn_predict_layers "
        "is 0), and vLLM's mtp drafts with the target's own MTP layers; give the folder of a separate MTP "
        "checkpoint"]),
    ("own-path-without-layers", DSV3_NO_MTP, "sglang", {"draft_model_path": "{model}", "steps": 1}, [
        "params.draft_model_path: the target checkpoint has no MTP layers (config.json: num_nextn_predict_layers "
        "is 0)"]),
    ("vllm-steps-not-a-multiple", {**DSV3, "num_nextn_predict_layers": 2}, "vllm", {"steps": 3}, [
        "params.steps: 3 is not a multiple of the checkpoint's 2 MTP layers (num_nextn_predict_layers): vLLM "
        "refuses it; use 2 or a multiple"]),
    ("vllm-tree-params-dropped", DSV3, "vllm", {"steps": 1, "topk": 2}, [
        "params.topk: an SGLang setting; vLLM's mtp drafts a chain of `steps` tokens and would ignore it "
        "(remove it)"]),
]


@pytest.mark.parametrize("hf,engine,params,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_mtp_checks(tmp_path: Path, hf: dict[str, Any], engine: str, params: dict[str, Any],
                    expected: list[str]) -> None:
    path = model(tmp_path, hf)
    params = {k: (path if v == "{model}" else v) for k, v in params.items()}
    ctx = LaunchContext(engine=engine, engine_version=(0, 5, 23) if engine == "sglang" else (0, 32),
                        model_path=path)
    assert problems("mtp", params, ctx) == expected


def test_raw_nextn_without_path_is_the_recipe_when_the_target_has_mtp_layers(tmp_path: Path) -> None:
    """NEXTN/EAGLE with no draft path on DeepSeek-V3 with MTP layers: SGLang's own recipe, not a hazard;
    EAGLE3 there still is one (the target is no EAGLE-3 head)."""
    ctx = LaunchContext(engine="sglang", engine_version=(0, 5, 23), model_path=model(tmp_path, KIMI))
    rules = get_drafter("mtp")
    assert rules.check_engine_args({"--speculative-algorithm": "NEXTN", "--speculative-num-steps": "1"}, ctx) == []
    out = rules.check_engine_args({"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": "1"}, ctx)
    assert out[0].message.startswith("no --speculative-draft-model-path for KimiK25ForConditionalGeneration")


def test_vllm_drafters_golden_configs() -> None:
    assert spec_config("mtp", {"steps": 2}) == {"method": "mtp", "num_speculative_tokens": 2}
    assert spec_config("mtp", {"draft_model_path": "/mtp"}) == {"method": "mtp", "model": "/mtp",
                                                               "num_speculative_tokens": 1}
    assert spec_config("eagle", {"draft_model_path": "/e", "steps": 4}) == {
        "method": "eagle", "model": "/e", "num_speculative_tokens": 4}
    assert spec_config("medusa", {"draft_model_path": "/h", "num_tokens": 3}) == {
        "method": "medusa", "model": "/h", "num_speculative_tokens": 3}
    assert spec_config("suffix", {"max_cached_requests": 0}) == {
        "method": "suffix", "num_speculative_tokens": 24, "suffix_decoding_max_cached_requests": 0,
        "suffix_decoding_max_spec_factor": 1.0, "suffix_decoding_max_tree_depth": 24,
        "suffix_decoding_min_token_prob": 0.1}
    e = get_drafter("eagle")
    sglang = LaunchContext(engine="sglang", engine_version=(0, 5, 23), model_path="/m")
    assert e.launch_args(e.parse_params({"draft_model_path": "/e", "steps": 2}), sglang)[:2] == [
        "--speculative-algorithm", "EAGLE"]


def test_vllm_drafter_checks(tmp_path: Path) -> None:
    assert problems("eagle", {"draft_model_path": "/e", "steps": 3, "topk": 4}, VLLM) == [
        "params.topk: vLLM drafts a chain of `steps` tokens (no EAGLE tree) and would silently ignore topk; "
        "remove it (a tree needs SGLang)"]  # the EAGLE family's one refusal, as for EAGLE-3
    heads = model(tmp_path, {"medusa_num_heads": 3})
    assert problems("medusa", {"draft_model_path": heads, "num_tokens": 5}, VLLM) == [
        "params.num_tokens: 5 is more than the checkpoint's 3 Medusa heads (vLLM would build heads it has no "
        "weights for)"]
    with pytest.raises(ValueError, match="num_tokens must be <= max_tree_depth"):
        get_drafter("suffix").parse_params({"num_tokens": 30})
    with pytest.raises(ValueError, match="num_tokens"):  # vLLM has no default for medusa
        get_drafter("medusa").parse_params({"draft_model_path": "/h"})


def test_drafter_fields_are_vllm_speculative_config_fields() -> None:
    """Every key the four drafters emit is a field of the installed vLLM's SpeculativeConfig, and every
    method name one of its SpeculativeMethod literals (read from its source: importing vLLM takes 20 s)."""
    import ast
    import importlib.util

    found = importlib.util.find_spec("vllm")
    if found is None or not found.submodule_search_locations:
        pytest.skip("vLLM is not installed")
    source = Path(next(iter(found.submodule_search_locations))) / "config" / "speculative.py"
    tree = ast.parse(source.read_text())
    methods = {n.value for a in tree.body if isinstance(a, ast.Assign)
               and a.targets[0].id.endswith(("Types", "Method"))  # type: ignore[attr-defined]
               for n in ast.walk(a.value) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    cls = next(c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "SpeculativeConfig")
    fields = {a.target.id for a in cls.body if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)}
    assert {"mtp", "eagle", "medusa", "suffix"} <= methods
    for name, params in (("mtp", {"steps": 1, "draft_model_path": "/x"}), ("eagle", {"draft_model_path": "/e"}),
                         ("medusa", {"draft_model_path": "/h", "num_tokens": 2}), ("suffix", {})):
        cfg = spec_config(name, params)
        assert cfg["method"] in methods
        assert set(cfg) <= fields, set(cfg) - fields


def test_speculative_flag_in_a_plain_variant_is_refused() -> None:
    cfg = parse_config({
        "model": {"path": "/m"}, "engine": {"kind": "vllm", "version": "0.32.0"},
        "variants": [{"name": "ar", "drafter": "autoregressive", "baseline": True},
                     {"name": "sneaky", "drafter": "autoregressive",
                      "args": ["-sc", '{"method": "ngram", "num_speculative_tokens": 4}', "--spec-tokens=2"]},
                     {"name": "ng", "drafter": "ngram"}],
        "sweep": {"output_lens": [16], "concurrency": [1]}})
    eng = VLLMEngine(cfg.engine, sweep_facts(cfg), "/m", "m")
    launches = plan_launches(cfg, eng)
    a = audit(launches)
    assert [w.setting for w in a.warnings] == ["-sc"]
    assert not a.fair
    assert config_problems(cfg, eng, launches) == [
        "variants[1].args: -sc, --spec-tokens in variant sneaky, whose drafter autoregressive decodes without "
        "speculation: it would speculate, and its comparison would be between two drafters; remove them, or give "
        "the variant the drafter they name"]

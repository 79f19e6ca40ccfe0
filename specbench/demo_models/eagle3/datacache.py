"""The head builds' training data kept across builds: the data step (the target's greedy answers and its
teacher-forced pass) is most of a build's cost and depends only on the fields below, so a rebuild with
another training schedule (`--force`, a changed learning rate or epoch count) reads it back instead. One
file per key in the data folder (<cache>/data/ for `specbench models prepare`, given by demo_models; a
build called directly keeps none unless given one), written atomically; a file that does not load is
rebuilt. The key: the recipe's data fields, the dtype the pass ran in, the target's weights and config,
the ShareGPT file and DATA_VERSION (raise it when data.py changes what it produces)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from specbench.demo_models.eagle3.recipe import Eagle3Recipe, Sequence

DATA_VERSION = 1
# the recipe fields that decide the data (the rest decide only the training)
DATA_FIELDS = ("seed", "threads", "train_sequences", "regenerated_sequences", "heldout_sequences",
               "scan_conversations", "max_prompt_tokens", "min_prompt_chars", "max_new_tokens", "generation_batch",
               "max_response_tokens", "forward_batch", "aux_layers")


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def data_name(recipe: Eagle3Recipe, dtype: str, target: Path, sharegpt: Path) -> str:
    """The data file's name: what the data depend on, hashed (equal names, the same sequences)."""
    fields = {k: v for k, v in asdict(recipe).items() if k in DATA_FIELDS}
    blob = {"version": DATA_VERSION, "recipe": fields, "dtype": dtype, "sharegpt": _file_digest(sharegpt),
            "target": {f.name: _file_digest(f) for f in sorted(target.iterdir())
                       if f.suffix in (".json", ".safetensors") and f.is_file() and not f.name.startswith(".")}}
    return f"headdata-{hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]}.pt"


def save(path: Path, seqs: list[Sequence], info: dict[str, Any]) -> None:
    """The sequences (tensors as they are) and the prompts' record, written to a sibling and renamed."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        torch.save({"input_ids": [s.input_ids for s in seqs], "prompt_len": [s.prompt_len for s in seqs],
                    "aux": [s.aux_hidden for s in seqs], "last": [s.last_hidden for s in seqs],
                    "info": json.dumps(info)}, tmp)
        tmp.rename(path)
    finally:
        tmp.unlink(missing_ok=True)


def load(path: Path) -> tuple[list[Sequence], dict[str, Any]] | None:
    """What save wrote, or None when there is no such file or it does not load (then it is rebuilt)."""
    import torch

    if not path.is_file():
        return None
    try:
        d = torch.load(path, weights_only=True)
        seqs = [Sequence(*x) for x in zip(d["input_ids"], d["prompt_len"], d["aux"], d["last"], strict=True)]
        return seqs, json.loads(d["info"])
    except Exception:  # a truncated or foreign file: build the data again
        return None

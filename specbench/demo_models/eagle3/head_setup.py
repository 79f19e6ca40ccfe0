"""What every head build shares (EAGLE-3's and DFlash's): the quiet, seeded, fixed-thread set-up, the
progress bar, the training data with its vocabulary mapping, and the manifest's common part."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specbench.demo_models.eagle3 import datacache
from specbench.demo_models.eagle3.data import (
    dataset_pairs,
    generate,
    pad_id,
    sharegpt_path,
    teacher_forced,
    training_prompts,
)
from specbench.demo_models.eagle3.recipe import Eagle3Recipe, Sequence
from specbench.demo_models.eagle3.train import vocab_mapping
from specbench.shared.cpu_dtype import AUTO_CPU, FAST, PORTABLE, CpuDtype, cpu_dtype
from specbench.shared.errors import UsageError

INSTALL_HINT = "pip install --no-deps speculators==0.9.0 hs-connectors==0.9.0 && pip install datasets==5.1.0 loguru"
Progress = Callable[[str], None]


def require_speculators(name: str) -> None:
    for mod in ("speculators", "datasets", "loguru"):
        if importlib.util.find_spec(mod) is None:
            raise UsageError(f"demo model {name} needs the {mod} package: {INSTALL_HINT}")


@dataclass
class Session:
    """One build's clock, timings and progress bar."""

    name: str  # the demo model's name, for messages
    bar: Any
    t0: float = field(default_factory=time.perf_counter)
    cpu0: float = field(default_factory=time.process_time)
    timings: dict[str, float] = field(default_factory=dict)

    def lap(self, key: str) -> None:
        """Record the time since the previous lap (or the start) under `key`."""
        self.timings[key] = time.perf_counter() - self.t0 - sum(self.timings.values())

    def task(self, description: str, total: int) -> Callable[[int], None]:
        task = self.bar.add_task(f"{self.name}: {description}", total=total)
        return lambda n: self.bar.advance(task, n)

    def seconds(self) -> dict[str, Any]:
        return {"build_seconds": {k: round(v, 1) for k, v in self.timings.items()}
                | {"total": round(time.perf_counter() - self.t0, 1)},
                "cpu_seconds": round(time.process_time() - self.cpu0, 1)}


@contextlib.contextmanager
def session(name: str, recipe: Eagle3Recipe) -> Iterator[Session]:
    """Offline, seeded, on recipe.threads threads, libraries quiet, with a progress bar."""
    require_speculators(name)
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from loguru import logger
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from transformers.utils import logging as hf_logging

    logger.disable("speculators")  # its per-tensor loading notes; errors still raise
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    threads = torch.get_num_threads()
    torch.set_num_threads(recipe.threads)
    random.seed(recipe.seed)
    torch.manual_seed(recipe.seed)
    try:
        from specbench.shared.progress import progress_bar

        with progress_bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn()) as bar:
            yield Session(name, bar)
    finally:
        torch.set_num_threads(threads)


def head_dtype(recipe: Eagle3Recipe, flags: frozenset[str] | None = None) -> CpuDtype:
    """The dtype of the build's data pass and of the head it writes: the recipe's, `auto-cpu` resolved for
    this CPU (flags: this CPU's by default) as the demo configs' `--dtype auto-cpu` is, so the hidden states
    the head learns from are those vLLM will feed it."""
    if recipe.dtype == AUTO_CPU:
        return cpu_dtype(flags)
    if recipe.dtype not in (FAST, PORTABLE):
        raise UsageError(f"recipe.dtype: must be {AUTO_CPU}, {FAST} or {PORTABLE}, got {recipe.dtype!r}")
    return CpuDtype(recipe.dtype, "set by the recipe")


@dataclass
class Data:
    """The training data of one head: sequences with hidden states, the vocabulary mapping, the record."""

    tokenizer: Any
    heldout: list[Sequence]
    train: list[Sequence]
    d2t: Any
    t2d: Any
    manifest: dict[str, Any]  # the manifest's "data" section and coverage
    dtype: str = FAST  # the target's dtype in the data pass; the head is saved in it too


def collect(target: Path, recipe: Eagle3Recipe, s: Session, progress: Progress,
            data_cache: Path | None = None) -> Data:
    """Prompts (benchmark prompts excluded); the target's greedy responses for the held-out split and the
    regenerated training sequences, the dataset's own responses for the rest; one forward pass over all
    of them for the hidden states. With `data_cache` (a folder), read back from there when an earlier
    build made the same data, and kept there otherwise."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(target, local_files_only=True)
    choice = head_dtype(recipe)
    progress(f"{s.name}: data pass in {choice.dtype}: {choice.reason}")
    path = data_cache / datacache.data_name(recipe, choice.dtype, target, sharegpt_path()) if data_cache else None
    cached = datacache.load(path) if path else None
    if cached is not None:
        progress(f"{s.name}: training data read from {path} (built by an earlier build with the same data recipe)")
        seqs, info = cached
        s.lap("data_cache_s")
    else:
        seqs, info = _make_data(target, recipe, choice.dtype, tokenizer, s, progress)
        if path:
            datacache.save(path, seqs, info)
            s.lap("data_cache_write_s")
    heldout, train = seqs[:recipe.heldout_sequences], seqs[recipe.heldout_sequences:]
    vocab = int(json.loads((target / "config.json").read_text())["vocab_size"])
    d2t, t2d, coverage = vocab_mapping(train, recipe, vocab)
    n_tokens = [len(x.input_ids) for x in seqs]
    response = sum(len(x.input_ids) - x.prompt_len for x in seqs)
    data = {**info, "sequences": {"train": len(train), "heldout": len(heldout),
                                  "train_dataset_responses": recipe.train_sequences,
                                  "train_regenerated": recipe.regenerated_sequences},
            "tokens": {"total": sum(n_tokens), "response": response,
                       "train_response": sum(len(x.input_ids) - x.prompt_len for x in train)}}
    return Data(tokenizer, heldout, train, d2t, t2d,
                {"data": data, "draft_vocab_size": recipe.draft_vocab_size,
                 "draft_vocab_response_coverage": round(coverage, 4), "dtype": choice.to_dict(),
                 "data_cache": {"file": str(path) if path else None, "reused": cached is not None}},
                choice.dtype)


def _make_data(target: Path, recipe: Eagle3Recipe, dtype: str, tokenizer: Any, s: Session,
               progress: Progress) -> tuple[list[Sequence], dict[str, Any]]:
    """The data step: prompts, the target's greedy answers, one teacher-forced pass over every sequence."""
    import torch
    from transformers import AutoModelForCausalLM

    n_regen = recipe.heldout_sequences + recipe.regenerated_sequences
    progress(f"{s.name}: selecting ShareGPT prompts (benchmark prompts excluded)")
    turns, info = training_prompts(recipe, tokenizer, n_regen + recipe.train_sequences)
    s.lap("prompts_s")
    # the dtype vLLM serves it in here: the hidden states the head learns from are the ones it will be fed
    model = AutoModelForCausalLM.from_pretrained(target, dtype=getattr(torch, dtype), local_files_only=True).eval()
    own = generate(model, tokenizer, [t.prompt for t in turns[:n_regen]], recipe,
                   s.task("target answers the held-out and regenerated prompts (greedy)", n_regen))
    s.lap("generate_s")
    pairs = own + dataset_pairs(tokenizer, turns[n_regen:], recipe)
    seqs = teacher_forced(model, pad_id(tokenizer), pairs, recipe,
                          s.task("target reads its own and the dataset's responses", len(pairs)))
    s.lap("forward_s")
    return seqs, info


def common_manifest(name: str, target: Path, recipe: Eagle3Recipe, model: Any, losses: list[float]) -> dict[str, Any]:
    return {
        "name": name,
        "target": str(target),
        "recipe": asdict(recipe),
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "steps": len(losses),
        "train_losses": [round(x, 4) for x in losses],
        "final_train_loss": round(sum(losses[-5:]) / len(losses[-5:]), 4),
        "first_train_loss": round(losses[0], 4),
        "torch_threads": recipe.threads,
    }

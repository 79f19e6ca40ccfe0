"""The build: data, training and the folder vLLM loads, with a manifest; run in a child process."""

from __future__ import annotations

import importlib.util
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ...errors import UsageError
from .data import generate, training_prompts
from .recipe import Eagle3Recipe
from .train import epoch_packs, evaluate, new_head, pack, train, vocab_mapping

MANIFEST = "specbench-eagle3.json"
INSTALL_HINT = "pip install --no-deps speculators==0.9.0 hs-connectors==0.9.0 && pip install datasets==5.1.0 loguru"
Progress = Callable[[str], None]


def require_speculators() -> None:
    for mod in ("speculators", "datasets", "loguru"):
        if importlib.util.find_spec(mod) is None:
            raise UsageError(f"demo model smollm2-eagle3 needs the {mod} package: {INSTALL_HINT}")


def build_eagle3(target: Path, dest: Path, *, recipe: Eagle3Recipe = Eagle3Recipe(),
                 progress: Progress = print) -> dict[str, Any]:
    """Train an EAGLE-3 head for the target folder and write it (speculators format) to `dest`.
    Returns the manifest, also written to dest/MANIFEST."""
    require_speculators()
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn
    from speculators.losses.utils import resolve_loss_config
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from loguru import logger

    logger.disable("speculators")  # its per-tensor loading notes; errors still raise
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    t0, cpu0 = time.perf_counter(), time.process_time()
    threads = torch.get_num_threads()
    torch.set_num_threads(recipe.threads)
    timings: dict[str, float] = {}
    try:
        random.seed(recipe.seed)
        torch.manual_seed(recipe.seed)
        tokenizer = AutoTokenizer.from_pretrained(target, local_files_only=True)
        needed = recipe.train_sequences + recipe.heldout_sequences
        progress("eagle3: selecting ShareGPT prompts (benchmark prompts excluded)")
        prompts, data_info = training_prompts(recipe, tokenizer, needed)
        timings["prompts_s"] = time.perf_counter() - t0
        # bfloat16, as vLLM serves it: the hidden states the head learns from are the ones it will be fed
        target_model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.bfloat16,
                                                            local_files_only=True).eval()
        with _bar(Bar, BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn) as bar:
            task = bar.add_task("eagle3: target regenerates responses (greedy)", total=needed)
            seqs = generate(target_model, tokenizer, prompts, recipe, lambda n: bar.advance(task, n))
            timings["generate_s"] = time.perf_counter() - t0 - sum(timings.values())
            del target_model
            heldout, train_seqs = seqs[:recipe.heldout_sequences], seqs[recipe.heldout_sequences:]
            d2t, t2d, coverage = vocab_mapping(train_seqs, recipe, tokenizer_vocab(target))
            torch.manual_seed(recipe.seed)
            model = new_head(target, recipe, d2t, t2d)
            loss_config = resolve_loss_config("kl_div", "eager")  # "fused" needs a Triton GPU driver
            epochs = epoch_packs(train_seqs, recipe)
            task = bar.add_task("eagle3: training", total=sum(len(e) for e in epochs))
            losses = train(model, epochs, recipe, loss_config,
                           lambda n, loss: bar.update(task, advance=n, description=f"eagle3: training loss {loss:.3f}"))
        timings["train_s"] = time.perf_counter() - t0 - sum(timings.values())
        held = evaluate(model, pack(heldout, recipe.pack_tokens), recipe, loss_config)
        progress(f"eagle3: held-out per-position accuracy {held['full_acc_per_position']}")
        dest.mkdir(parents=True, exist_ok=True)
        model.to(torch.bfloat16).save_pretrained(dest)
        tokenizer.save_pretrained(dest)
        n_tokens = [len(s.input_ids) for s in seqs]
        manifest = {
            "name": "smollm2-eagle3",
            "library": "speculators 0.9.0 (Eagle3DraftModel, vocab mapping, kl_div loss, save_pretrained)",
            "target": str(target),
            "recipe": asdict(recipe),
            "aux_layer_ids": list(model.config.eagle_aux_hidden_state_layer_ids),  # the target layers read
            "data": {**data_info, "sequences": {"train": len(train_seqs), "heldout": len(heldout)},
                     "tokens": {"total": sum(n_tokens),
                                "response": sum(len(s.input_ids) - s.prompt_len for s in seqs),
                                "train_response": sum(len(s.input_ids) - s.prompt_len for s in train_seqs)}},
            "draft_vocab_size": recipe.draft_vocab_size,
            "draft_vocab_response_coverage": round(coverage, 4),
            "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "steps": len(losses),
            "train_losses": [round(x, 4) for x in losses],
            "final_train_loss": round(sum(losses[-5:]) / len(losses[-5:]), 4),
            "first_train_loss": round(losses[0], 4),
            "heldout": held,
            "build_seconds": {k: round(v, 1) for k, v in timings.items()}
                             | {"total": round(time.perf_counter() - t0, 1)},
            "cpu_seconds": round(time.process_time() - cpu0, 1),
            "torch_threads": recipe.threads,
        }
        (dest / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return manifest
    finally:
        torch.set_num_threads(threads)


def tokenizer_vocab(target: Path) -> int:
    return int(json.loads((target / "config.json").read_text())["vocab_size"])


def _bar(Bar, BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn) -> Any:  # noqa: N803
    return Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               transient=False)


def build_in_subprocess(target: Path, dest: Path, *, progress: Progress = print) -> dict[str, Any]:
    """build_eagle3 in a child process: its OpenMP threads wait passively (spinning threads on a shared
    2-core machine burned ~10x the CPU time here), and the gigabytes the data pass allocates go back to
    the system when it exits. The child inherits the terminal, so its progress bar shows."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    cmd = [sys.executable, "-m", "specbench.models.eagle3", str(target), str(dest)]
    proc = subprocess.Popen(cmd, env=env)
    try:
        code = proc.wait()
    except BaseException:
        proc.terminate()
        proc.wait()
        raise
    if code != 0:
        raise UsageError(f"building demo model smollm2-eagle3 failed (exit code {code}; see the output above)")
    return json.loads((dest / MANIFEST).read_text())


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m specbench.models.eagle3",
                                 description="train the smollm2-eagle3 head (use `specbench models prepare`)")
    ap.add_argument("target", type=Path)
    ap.add_argument("dest", type=Path)
    a = ap.parse_args(argv)
    try:
        m = build_eagle3(a.target, a.dest)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"eagle3: {m['steps']} steps, final loss {m['final_train_loss']}, held-out accuracy per position "
          f"{m['heldout']['full_acc_per_position']}, {m['build_seconds']['total']} s, {m['cpu_seconds']} CPU-s")
    return 0

"""The DFlash build: the EAGLE-3 builder's data and loop, speculators' DFlash head, the folder vLLM loads
and its manifest; run in a child process like the EAGLE-3 build (..eagle3.build.build_in_subprocess)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from specbench.demo_models.dflash.recipe import DFlashRecipe
from specbench.demo_models.dflash.train import evaluate, new_head, run_head
from specbench.demo_models.eagle3.head_setup import Progress, collect, common_manifest, session
from specbench.demo_models.eagle3.train import epoch_packs, pack, train
from specbench.shared.errors import UsageError

MANIFEST = "specbench-dflash.json"


def build_dflash(target: Path, dest: Path, *, recipe: DFlashRecipe = DFlashRecipe(),
                 progress: Progress = print, data_cache: Path | None = None) -> dict[str, Any]:
    """Train a DFlash head for the target folder and write it (speculators format) to `dest`.
    Returns the manifest, also written to dest/MANIFEST. `data_cache`: the folder of the data kept across
    builds (session.collect), None for none."""
    with session("dflash", recipe) as s:
        import torch
        from speculators.losses.utils import resolve_loss_config

        data = collect(target, recipe, s, progress, data_cache)
        torch.manual_seed(recipe.seed)
        model = new_head(target, recipe, (data.d2t, data.t2d))
        loss_config = resolve_loss_config("kl_div", "eager")  # "fused" needs a Triton GPU driver
        epochs = epoch_packs(data.train, recipe)
        task = s.bar.add_task("dflash: training", total=sum(len(e) for e in epochs))
        losses = train(model, epochs, recipe, lambda p: run_head(model, p, recipe, loss_config)[0],
                       lambda n, loss: s.bar.update(task, advance=n, description=f"dflash: training loss {loss:.3f}"))
        s.lap("train_s")
        held = evaluate(model, pack(data.heldout, recipe.pack_tokens), recipe, loss_config)
        progress(f"dflash: held-out accuracy per block position {held['acc_per_position']}, "
                 f"expected acceptance length {held['expected_acceptance_length']}")
        dest.mkdir(parents=True, exist_ok=True)
        model.to(getattr(torch, data.dtype)).save_pretrained(dest)
        data.tokenizer.save_pretrained(dest)
        manifest = {
            **common_manifest("smollm2-dflash", target, recipe, model, losses),
            "library": "speculators 0.9.0 (DFlashDraftModel, vocab mapping, kl_div loss, save_pretrained)",
            "aux_layer_ids": list(model.config.aux_hidden_state_layer_ids),
            "block_size": recipe.block_size,
            "mask_token_id": model.config.mask_token_id,
            **data.manifest,
            "heldout": held,
            **s.seconds(),
        }
        (dest / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return manifest


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m specbench.demo_models.dflash",
                                 description="train the smollm2-dflash head (use `specbench models prepare`)")
    ap.add_argument("target", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--minutes", type=float, default=None, help="build budget (default: the recipe's)")
    ap.add_argument("--data-cache", type=Path, default=None, help="folder of the data kept across builds")
    ap.add_argument("--recipe", default="{}", help="JSON object of DFlashRecipe fields to override")
    a = ap.parse_args(argv)
    try:
        recipe = replace(DFlashRecipe.for_minutes(a.minutes) if a.minutes else DFlashRecipe(), **json.loads(a.recipe))
        m = build_dflash(a.target, a.dest, recipe=recipe, data_cache=a.data_cache)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"dflash: {m['steps']} steps, final loss {m['final_train_loss']}, held-out accuracy per position "
          f"{m['heldout']['acc_per_position']}, EAL {m['heldout']['expected_acceptance_length']}, "
          f"{m['build_seconds']['total']} s, {m['cpu_seconds']} CPU-s")
    return 0

"""The build: data, training and the folder vLLM loads, with a manifest; run in a child process."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from specbench.demo_models.eagle3.head_setup import Progress, collect, common_manifest, session
from specbench.demo_models.eagle3.recipe import Eagle3Recipe
from specbench.demo_models.eagle3.train import batch_of, epoch_packs, evaluate, new_head, pack, run_head, train
from specbench.shared.errors import UsageError

MANIFEST = "specbench-eagle3.json"


def build_eagle3(target: Path, dest: Path, *, recipe: Eagle3Recipe = Eagle3Recipe(),
                 progress: Progress = print, data_cache: Path | None = None) -> dict[str, Any]:
    """Train an EAGLE-3 head for the target folder and write it (speculators format) to `dest`.
    Returns the manifest, also written to dest/MANIFEST. `data_cache`: the folder of the data kept across
    builds (session.collect), None for none."""
    with session("eagle3", recipe) as s:
        import torch
        from speculators.losses.utils import resolve_loss_config

        data = collect(target, recipe, s, progress, data_cache)
        torch.manual_seed(recipe.seed)
        model = new_head(target, recipe, data.d2t, data.t2d)
        loss_config = resolve_loss_config("kl_div", "eager")  # "fused" needs a Triton GPU driver
        epochs = epoch_packs(data.train, recipe)
        task = s.bar.add_task("eagle3: training", total=sum(len(e) for e in epochs))
        losses = train(model, epochs, recipe, lambda p: run_head(model, batch_of(p), recipe, loss_config)[0],
                       lambda n, loss: s.bar.update(task, advance=n, description=f"eagle3: training loss {loss:.3f}"))
        s.lap("train_s")
        held = evaluate(model, pack(data.heldout, recipe.pack_tokens), recipe, loss_config)
        progress(f"eagle3: held-out per-position accuracy {held['full_acc_per_position']}")
        dest.mkdir(parents=True, exist_ok=True)
        model.to(getattr(torch, data.dtype)).save_pretrained(dest)
        data.tokenizer.save_pretrained(dest)
        manifest = {
            **common_manifest("smollm2-eagle3", target, recipe, model, losses),
            "library": "speculators 0.9.0 (Eagle3DraftModel, vocab mapping, kl_div loss, save_pretrained)",
            "aux_layer_ids": list(model.config.eagle_aux_hidden_state_layer_ids),  # the target layers read
            **data.manifest,
            "heldout": held,
            **s.seconds(),
        }
        (dest / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        return manifest


def build_in_subprocess(target: Path, dest: Path, *, minutes: float | None = None,
                        module: str = "specbench.demo_models.eagle3", data_cache: Path | None = None,
                        recipe: dict[str, Any] | None = None) -> dict[str, Any]:
    """A head builder (`python -m module TARGET DEST`, build_eagle3 by default) in a child process: its
    OpenMP threads wait passively (spinning threads on a shared 2-core machine burned ~10x the CPU time
    here), and the gigabytes the data pass allocates go back to the system when it exits. The child
    inherits the terminal, so its progress bar shows (no callback to pass). `data_cache`: the folder of the
    training data kept across builds (datacache.py). `recipe`: recipe fields to override (its `--recipe`)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    cmd = [sys.executable, "-m", module, str(target), str(dest)]
    if minutes is not None:
        cmd += ["--minutes", str(minutes)]
    if data_cache is not None:
        cmd += ["--data-cache", str(data_cache)]
    if recipe:
        cmd += ["--recipe", json.dumps(recipe)]
    proc = subprocess.Popen(cmd, env=env)
    try:
        code = proc.wait()
    except BaseException:
        proc.terminate()
        proc.wait()
        raise
    if code != 0:
        raise UsageError(f"building {module} failed (exit code {code}; see the output above)")
    return {"folder": str(dest)}


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m specbench.demo_models.eagle3",
                                 description="train the smollm2-eagle3 head (use `specbench models prepare`)")
    ap.add_argument("target", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--minutes", type=float, default=None, help="build budget (default: the recipe's)")
    ap.add_argument("--data-cache", type=Path, default=None, help="folder of the data kept across builds")
    ap.add_argument("--recipe", default="{}", help="JSON object of Eagle3Recipe fields to override")
    a = ap.parse_args(argv)
    try:
        recipe = replace(Eagle3Recipe.for_minutes(a.minutes) if a.minutes else Eagle3Recipe(),
                         **json.loads(a.recipe))
        m = build_eagle3(a.target, a.dest, recipe=recipe, data_cache=a.data_cache)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"eagle3: {m['steps']} steps, final loss {m['final_train_loss']}, held-out accuracy per position "
          f"{m['heldout']['full_acc_per_position']}, {m['build_seconds']['total']} s, {m['cpu_seconds']} CPU-s")
    return 0

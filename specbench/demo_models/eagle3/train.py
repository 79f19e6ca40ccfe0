"""3. Training: a small CPU loop around speculators' Eagle3DraftModel (its Trainer assumes an
accelerator): packing, batches in the model's layout, the vocabulary mapping, evaluation, the schedule."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specbench.demo_models.eagle3.data import aux_layer_ids
from specbench.demo_models.eagle3.recipe import Eagle3Recipe, Sequence


def pack(seqs: list[Sequence], limit: int) -> list[list[Sequence]]:
    """Greedy packing in the given order: each pack holds whole sequences, at most `limit` tokens
    (a longer sequence gets a pack of its own)."""
    packs: list[list[Sequence]] = []
    cur: list[Sequence] = []
    size = 0
    for s in seqs:
        n = len(s.input_ids)
        if cur and size + n > limit:
            packs.append(cur)
            cur, size = [], 0
        cur.append(s)
        size += n
    if cur:
        packs.append(cur)
    return packs


def batch_of(seqs: list[Sequence]) -> dict[str, Any]:
    """One packed batch in Eagle3DraftModel.forward's layout, shifted with speculators' shift_batch."""
    import torch
    from speculators.models.eagle3.data import shift_batch

    shifted = []
    for s in seqs:
        n = len(s.input_ids)
        loss_mask = torch.zeros(n, dtype=torch.long)
        loss_mask[s.prompt_len:] = 1  # the response is what the draft learns to predict
        shifted.append(shift_batch({"input_ids": s.input_ids, "hidden_states": s.aux_hidden.float(),
                                    "verifier_last_hidden_states": s.last_hidden.float(), "loss_mask": loss_mask,
                                    "lengths": torch.tensor([n]), "position_ids": torch.arange(n)}))
    doc = torch.cat([torch.full((len(b["input_ids"]),), i) for i, b in enumerate(shifted)])
    return {
        "input_ids": torch.cat([b["input_ids"] for b in shifted]).unsqueeze(0),
        "hidden_states": torch.cat([b["hidden_states"] for b in shifted]).unsqueeze(0),
        "verifier_last_hidden_states": torch.cat([b["verifier_last_hidden_states"] for b in shifted]).unsqueeze(0),
        "loss_mask": torch.cat([b["loss_mask"] for b in shifted]).unsqueeze(0),
        "position_ids": torch.cat([b["position_ids"] for b in shifted]).unsqueeze(0),
        "document_ids": doc.unsqueeze(0),
    }


def vocab_mapping(seqs: list[Sequence], recipe: Eagle3Recipe, vocab_size: int) -> tuple[Any, Any, float]:
    """speculators' d2t/t2d from the response-token frequencies; also the share of response tokens
    the draft vocabulary covers."""
    from collections import Counter

    from speculators.train.vocab_mapping import build_vocab_mappings_from_distribution

    freq: Counter[int] = Counter()
    for s in seqs:
        freq.update(s.input_ids[s.prompt_len:].tolist())
    d2t, t2d = build_vocab_mappings_from_distribution(dict(freq), recipe.draft_vocab_size, vocab_size)
    covered = sum(c for t, c in freq.items() if t2d[t]) / max(1, sum(freq.values()))
    return d2t, t2d, covered


def new_head(target: Path, recipe: Eagle3Recipe, d2t: Any, t2d: Any) -> Any:
    from speculators.models.eagle3 import Eagle3DraftModel
    from transformers import AutoConfig

    layer_config = AutoConfig.from_pretrained(target, local_files_only=True)
    aux = aux_layer_ids(layer_config.num_hidden_layers, recipe)
    # the head's decoder-layer config is the target's with one layer: from_training_args takes its layer
    # count from this config (its num_layers argument is not used), so 30 layers would be built otherwise
    layer_config.num_hidden_layers = 1
    if isinstance(getattr(layer_config, "layer_types", None), list):
        layer_config.layer_types = layer_config.layer_types[:1]
    model = Eagle3DraftModel.from_training_args(
        layer_config, t2d=t2d, d2t=d2t, draft_vocab_size=recipe.draft_vocab_size,
        norm_before_residual=True, ttt_steps=recipe.ttt_steps, verifier_name_or_path=str(target),
        target_layer_ids=aux, draft_attn_impl="eager")
    # train the fc projection, the decoder layer and its norm, and (train_lm_head) the draft lm_head, which
    # speculators initialises from the target's rows for the draft vocabulary; the embeddings and the
    # verifier's lm_head (the loss's targets) stay the target's
    trainable = ("fc.", "layers.", "norm.") + (("lm_head.",) if recipe.train_lm_head else ())
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith(trainable))
    return model.float()


def run_head(model: Any, batch: dict[str, Any], recipe: Eagle3Recipe, loss_config: Any) -> tuple[Any, dict]:
    _, loss, metrics = model(**batch, ttt_steps=recipe.ttt_steps, ttt_step_loss_decay=recipe.ttt_step_loss_decay,
                             loss_config=loss_config)
    return loss, metrics


def evaluate(model: Any, packs: list[list[Sequence]], recipe: Eagle3Recipe, loss_config: Any) -> dict[str, Any]:
    """Held-out loss and per-position accuracy (speculators' metrics, summed over packs).

    full_acc[k]: share of response positions where the draft's first k+1 tokens all match the target's
    greedy tokens (what position k+1's acceptance rate estimates); cond_acc[k]: the same given the first k
    matched."""
    import torch

    sums: dict[str, float] = {}
    with torch.no_grad():
        model.eval()
        for p in packs:
            _, metrics = run_head(model, batch_of(p), recipe, loss_config)
            for k, v in metrics.items():
                sums[k] = sums.get(k, 0.0) + float(v)
        model.train()
    steps = range(recipe.ttt_steps)
    full = [sums[f"full_acc_{k}_sum"] / max(1.0, sums[f"full_acc_{k}_total"]) for k in steps]
    cond = [sums[f"cond_acc_{k}_sum"] / max(1.0, sums[f"cond_acc_{k}_total"]) for k in steps]
    return {"loss": sums["loss_sum"] / max(1.0, sums["loss_total"]),
            "full_acc_per_position": [round(x, 4) for x in full],
            "cond_acc_per_position": [round(x, 4) for x in cond],
            "expected_acceptance_length": round(1 + sum(full), 3)}


def lr_at(step: int, total: int, recipe: Eagle3Recipe) -> float:
    """Linear warmup, then cosine decay to 10%."""
    if step < recipe.warmup_steps:
        return recipe.learning_rate * (step + 1) / recipe.warmup_steps
    t = (step - recipe.warmup_steps) / max(1, total - recipe.warmup_steps)
    return recipe.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def epoch_packs(train_seqs: list[Sequence], recipe: Eagle3Recipe) -> list[list[list[Sequence]]]:
    """Every epoch's packs, in training order: each epoch reshuffles (seeded) and repacks."""
    rng = random.Random(recipe.seed + 1)
    out = []
    for _ in range(recipe.epochs):
        order = list(train_seqs)
        rng.shuffle(order)
        out.append(pack(order, recipe.pack_tokens))
    return out


def train(model: Any, epochs: list[list[list[Sequence]]], recipe: Eagle3Recipe,
          loss_of: Callable[[list[Sequence]], Any], tick: Callable[[int, float], None]) -> list[float]:
    """AdamW over the packs, one optimizer step per pack, the learning rate from lr_at, gradient clipping.
    `loss_of(pack)` is the head's loss on one pack (EAGLE-3's or DFlash's forward)."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=recipe.learning_rate, weight_decay=0.0)
    total = sum(len(e) for e in epochs)
    losses: list[float] = []
    model.train()
    for packs in epochs:
        for p in packs:
            for g in opt.param_groups:
                g["lr"] = lr_at(len(losses), total, recipe)
            loss = loss_of(p)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, recipe.max_grad_norm)
            opt.step()
            losses.append(loss.item())
            tick(1, losses[-1])
    return losses

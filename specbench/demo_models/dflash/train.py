"""The DFlash head (speculators' DFlashDraftModel), its batches and its held-out evaluation; the
optimizer loop is the EAGLE-3 builder's (..eagle3.train.train)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from specbench.demo_models.dflash.recipe import DFlashRecipe
from specbench.demo_models.eagle3.data import aux_layer_ids
from specbench.demo_models.eagle3.recipe import Sequence


def batch_of(seqs: list[Sequence]) -> dict[str, Any]:
    """One packed batch in DFlashDraftModel.forward's layout. Unlike EAGLE-3's, it is not shifted: the
    model itself takes position i's target from the target's last hidden state at i - 1."""
    import torch

    masks, docs = [], []
    for i, s in enumerate(seqs):
        n = len(s.input_ids)
        m = torch.zeros(n, dtype=torch.long)
        m[s.prompt_len:] = 1  # anchors and predicted tokens come from the response
        masks.append(m)
        docs.append(torch.full((n,), i))
    return {
        "input_ids": torch.cat([s.input_ids for s in seqs]).unsqueeze(0),
        "hidden_states": torch.cat([s.aux_hidden.float() for s in seqs]).unsqueeze(0),
        "verifier_last_hidden_states": torch.cat([s.last_hidden.float() for s in seqs]).unsqueeze(0),
        "loss_mask": torch.cat(masks).unsqueeze(0),
        "document_ids": torch.cat(docs).unsqueeze(0),
        "position_ids": torch.cat([torch.arange(len(s.input_ids)) for s in seqs]).unsqueeze(0),
    }


def new_head(target: Path, recipe: DFlashRecipe, vocab: tuple[Any, Any]) -> Any:
    """A one-layer DFlash head over the target's layers (the same three as EAGLE-3's), with speculators'
    draft vocabulary mapping `vocab` = (d2t, t2d) and mask token (the tokenizer's, else one it adds)."""
    from speculators.models.dflash import DFlashDraftModel
    from speculators.train.utils import resolve_mask_token_id
    from transformers import AutoConfig

    layer_config = AutoConfig.from_pretrained(target, local_files_only=True)
    aux = aux_layer_ids(layer_config.num_hidden_layers, recipe)
    with warnings.catch_warnings():  # smollm2's tokenizer has no mask token and no free slot: the pad token
        warnings.simplefilter("ignore", UserWarning)
        mask_id = resolve_mask_token_id(str(target), layer_config.vocab_size)
    layer_config.num_hidden_layers = 1  # from_training_args takes the draft's layer count from here
    if isinstance(getattr(layer_config, "layer_types", None), list):
        layer_config.layer_types = layer_config.layer_types[:1]
    d2t, t2d = vocab
    model = DFlashDraftModel.from_training_args(
        layer_config, t2d=t2d, d2t=d2t, draft_vocab_size=recipe.draft_vocab_size, block_size=recipe.block_size,
        verifier_name_or_path=str(target), target_layer_ids=aux, mask_token_id=mask_id, draft_attn_impl="eager")
    # trained: fc, hidden_norm, the decoder layer, norm and (train_lm_head) the draft lm_head, which
    # speculators initialises from the target's rows; the embeddings and the verifier's head stay frozen
    trainable = ("fc.", "hidden_norm.", "layers.", "norm.") + (("lm_head.",) if recipe.train_lm_head else ())
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith(trainable))
    return model.float()


def loss_kwargs(recipe: DFlashRecipe, loss_config: Any) -> dict[str, Any]:
    return {"loss_config": loss_config, "gamma": recipe.gamma, "max_anchors": recipe.max_anchors}


def run_head(model: Any, pack: list[Sequence], recipe: DFlashRecipe, loss_config: Any) -> tuple[Any, dict]:
    _, loss, metrics = model(**batch_of(pack), **loss_kwargs(recipe, loss_config))
    return loss, metrics


def evaluate(model: Any, packs: list[list[Sequence]], recipe: DFlashRecipe, loss_config: Any) -> dict[str, Any]:
    """Held-out loss, accuracy per block position and expected acceptance length (speculators' metrics,
    summed over packs; anchors drawn with a fixed seed).

    acc_per_position[k]: share of blocks whose token k+1 matches the target's greedy token (each position
    on its own); expected_acceptance_length: speculators' `eal`, 1 + the mean run of correct drafts per
    block, what vLLM's acceptance length estimates."""
    import torch

    sums: dict[str, float] = {}
    torch.manual_seed(recipe.seed + 2)
    with torch.no_grad():
        model.eval()
        for p in packs:
            _, metrics = run_head(model, p, recipe, loss_config)
            for k, v in metrics.items():
                sums[k] = sums.get(k, 0.0) + float(v)
        model.train()
    positions = range(1, recipe.block_size)
    acc = [sums[f"position_{k}_acc_sum"] / max(1.0, sums[f"position_{k}_acc_total"]) for k in positions]
    return {"loss": sums["loss_sum"] / max(1.0, sums["loss_total"]),
            "acc_per_position": [round(x, 4) for x in acc],
            "expected_acceptance_length": round(sums["eal_sum"] / max(1.0, sums["eal_total"]), 3)}

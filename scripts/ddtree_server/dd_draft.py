"""The DFlash draft head (speculators' DFlashDraftModel) at inference: one forward over a block gives the
log-probabilities of every block position at once.

How DFlash is conditioned (speculators 0.9, models/dflash): the target's hidden states at the layers
`aux_hidden_state_layer_ids` are concatenated per position and projected (`fc`, then `hidden_norm`) into the
context. The block is the anchor (the last token the target produced, not yet run through it) followed by
block_size - 1 mask tokens, embedded with the target's embeddings. In every draft layer the block's queries
attend, without a causal mask, to keys and values of the projected context (all positions before the anchor)
and of the block itself; block slot k (k >= 1) predicts the token k positions after the anchor.

The context's keys and values are cached per draft layer (a DynamicCache, as the authors' ddtree_generate
keeps `past_key_values_draft`): each forward projects only the positions added since the last one, and the
block's own entries are cropped off after it, so a draft costs the same at output token 1000 as at token 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

# speculators stores hidden-state layer ids as vLLM does: id k is the residual stream entering decoder
# layer k, i.e. Hugging Face's output_hidden_states[k]. Checkpoints that mean the output of layer k (the
# reference DDTree's own DFlash code reads hidden_states[k + 1]) are served with --aux-offset 1.
DEFAULT_AUX_OFFSET = 0


class DFlashHead:
    """A loaded DFlash head, its context cached per request (one request at a time). `cache=False` recomputes
    every draft layer's keys and values over the whole context at every forward (the reference the cached
    path is checked against)."""

    def __init__(self, model: Any, aux_offset: int = DEFAULT_AUX_OFFSET, cache: bool = True):
        self.model = model
        self.aux_offset = aux_offset
        self.use_cache = cache
        cfg = model.config
        self.block_size = int(cfg.block_size)
        self.layer_ids = list(cfg.aux_hidden_state_layer_ids)
        if cfg.mask_token_id is None:
            raise ValueError("the DFlash head's config has no mask_token_id")
        self.mask_token_id = int(cfg.mask_token_id)
        d2t = getattr(model, "d2t", None)
        # speculators' d2t holds offsets: target id = draft id + d2t[draft id]
        self.token_map = None if not model.use_draft_vocab else \
            (torch.arange(d2t.numel()) + d2t.cpu()).numpy().astype(np.int64)
        self.context: torch.Tensor | None = None  # [1, n, hidden]: projected features not yet in the cache
        self.cache = DynamicCache()  # the draft layers' keys and values of context positions 0..cached-1
        self.cached = 0

    @property
    def horizon(self) -> int:
        """Draft tokens one forward predicts (slots 1..block_size-1)."""
        return self.block_size - 1

    def reset(self) -> None:
        self.context, self.cache, self.cached = None, DynamicCache(), 0

    def append_context(self, hidden_states: tuple[torch.Tensor, ...], keep: torch.Tensor | None = None) -> None:
        """Add the target's hidden states of newly processed positions (only `keep`'s, when given)."""
        feats = torch.cat([hidden_states[k + self.aux_offset] for k in self.layer_ids], dim=-1)
        if keep is not None:
            feats = feats.index_select(1, keep)
        m = self.model
        proj = m.hidden_norm(m.fc(feats.to(m.fc.weight.dtype)))
        self.context = proj if self.context is None else torch.cat([self.context, proj], dim=1)

    def block_log_probs(self, anchor: int) -> np.ndarray:
        """[block_size - 1, draft vocab] log-probabilities for the tokens after `anchor` (float32, numpy)."""
        assert self.context is not None or self.cached, "append_context first"
        m = self.model
        ctx = self.context if self.context is not None else m.fc.weight.new_zeros((1, 0, m.fc.out_features))
        new = ctx.shape[1]  # context positions not in the cache yet (all of them without the cache)
        dev = ctx.device
        block = torch.full((1, self.block_size), self.mask_token_id, dtype=torch.long, device=dev)
        block[0, 0] = anchor
        h = m.embed_tokens(block).to(ctx.dtype)
        positions = torch.arange(self.cached, self.cached + new + self.block_size, device=dev).unsqueeze(0)
        rope = m.rotary_emb(h, positions)
        cache = self.cache if self.use_cache else None
        for layer in m.layers:
            h = layer(hidden_states=h, target_hidden=ctx, attention_mask=None, position_ids=positions,
                      position_embeddings=rope, past_key_value=cache)
        if cache is not None:  # keep the context's entries, drop the block's: the next block replaces it
            self.cached += new
            cache.crop(-self.block_size)  # negative: drop that many from the end (transformers 5's form)
            self.context = None
        logits = m.lm_head(m.norm(h))[0, 1:].float()
        return torch.log_softmax(logits, dim=-1).cpu().numpy()


def load_head(path: str | Path, target: Any, aux_offset: int = DEFAULT_AUX_OFFSET, cache: bool = True) -> DFlashHead:
    """Load a speculators DFlash folder. The weights a DFlash checkpoint leaves out (embeddings, and the LM
    head of a full-vocabulary draft) are taken from the target in memory, never from the verifier path the
    checkpoint's config names (it may not exist on this machine)."""
    from safetensors.torch import load_file
    from speculators.models.dflash import DFlashDraftModel, DFlashSpeculatorConfig

    folder = Path(path)
    config = DFlashSpeculatorConfig.from_pretrained(str(folder))
    if "sliding_attention" in (getattr(config.transformer_layer_config, "layer_types", None) or []):
        raise ValueError(f"{folder}: sliding-window draft layers are not supported by this server")
    config.transformer_layer_config._attn_implementation = "eager"  # no mask needed: the block sees all
    model = DFlashDraftModel(config)
    state: dict[str, torch.Tensor] = {}
    for f in sorted(folder.glob("*.safetensors")):
        state.update(load_file(str(f)))
    if not state:
        raise ValueError(f"{folder}: no *.safetensors weights")
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected:
        raise ValueError(f"{folder}: unexpected weights {unexpected[:3]}")
    with torch.no_grad():
        model.embed_tokens.weight.copy_(target.get_input_embeddings().weight)
        if "lm_head.weight" not in state:
            w = target.get_output_embeddings().weight
            model.lm_head.weight.copy_(w[model.t2d.bool()] if model.use_draft_vocab else w)
    allowed = {"embed_tokens.weight", "lm_head.weight", "verifier_lm_head.weight", "verifier_norm.weight",
               "t2d", "d2t"}
    left = [k for k in missing if k not in allowed]
    if left:
        raise ValueError(f"{folder}: weights missing from the checkpoint: {left[:3]}")
    param = next(target.parameters())
    model.to(device=param.device, dtype=param.dtype).eval()
    return DFlashHead(model, aux_offset, cache)

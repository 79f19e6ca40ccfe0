"""`python random_head.py TARGET DEST [--seed 0] [--block-size 8]`: a DFlash head with seeded random weights.

For developing and testing the server without a trained head: losslessness and the acceptance bookkeeping
do not depend on draft quality (an untrained head's drafts are almost never accepted, so its acceptance
length is about 1). Built with speculators' own DFlash class and config, so its folder loads like a real one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch


def make_random_head(target: str | Path, dest: str | Path, seed: int = 0, block_size: int = 8) -> Path:
    from speculators.models.dflash import DFlashDraftModel
    from transformers import AutoConfig

    torch.manual_seed(seed)
    layer_config = AutoConfig.from_pretrained(str(target))
    layer_config.num_hidden_layers = 1  # one draft layer, as the smallest DFlash heads
    mask_token_id = layer_config.unk_token_id if layer_config.unk_token_id is not None else 0
    model = DFlashDraftModel.from_training_args(
        layer_config, draft_vocab_size=layer_config.vocab_size, block_size=block_size,
        verifier_name_or_path=str(target), mask_token_id=mask_token_id, draft_attn_impl="eager")
    dest = Path(dest)
    model.save_pretrained(str(dest))
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("target")
    ap.add_argument("dest")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--block-size", type=int, default=8)
    a = ap.parse_args()
    print(make_random_head(a.target, a.dest, a.seed, a.block_size))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

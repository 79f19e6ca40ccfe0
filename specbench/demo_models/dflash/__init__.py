"""Demo model "smollm2-dflash": a DFlash draft head for smollm2, trained here on CPU with `speculators`.

DFlash drafts a whole block in one forward: the anchor (the last accepted token) and block_size - 1 mask
tokens attend to the target's hidden states of the context and to each other, and the head predicts the
block's tokens at once. speculators' DFlashDraftModel provides the architecture, config, anchored-block
attention mask, loss (KL to the target's distribution, per-position decay) and metrics; vLLM 0.32 loads
the folder with `speculative_config: {method: dflash, model: <folder>}`.

The data are the EAGLE-3 builder's (..eagle3.data): the same ShareGPT turns with every benchmark prompt
excluded, the dataset's responses teacher-forced through the target, greedy regenerations for the held-out
split, and the hidden states of the same three target layers. The training loop is the EAGLE-3 builder's
too (AdamW, warmup and cosine decay, clipping, seeded); only the model, its batch layout and its metrics
differ (train.py).

    recipe.py  DFlashRecipe (the EAGLE-3 recipe's data fields plus block size, anchors, loss decay)
    train.py   the head, its batches, held-out evaluation
    build.py   build_dflash (data, training, the folder and its manifest), run in a child process
"""

from __future__ import annotations

from specbench.demo_models.dflash.build import MANIFEST, build_dflash
from specbench.demo_models.dflash.recipe import DFlashRecipe

__all__ = ["MANIFEST", "DFlashRecipe", "build_dflash"]

"""What decides the DFlash head: the EAGLE-3 recipe's data and optimizer fields, plus DFlash's own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from specbench.demo_models.eagle3.recipe import Eagle3Recipe


@dataclass(frozen=True)
class DFlashRecipe(Eagle3Recipe):
    """Stored in the manifest. ttt_steps and ttt_step_loss_decay are EAGLE-3's and unused here;
    for_minutes (inherited) scales the training sequences the same way."""

    # the data DFlash's head was measured with (docs/engine-notes.md), kept when EAGLE-3's default changed
    default_minutes: ClassVar[float] = 6.0  # the budget these defaults are sized for (EAGLE-3's is 3)
    train_sequences: int = 360
    regenerated_sequences: int = 0
    heldout_sequences: int = 12
    scan_conversations: int = 4000
    generation_batch: int = 16
    block_size: int = 4  # anchor + 3 mask tokens: vLLM drafts block_size - 1 = 3 tokens per step
    max_anchors: int = 96  # blocks per pack (sampled from the response positions, seeded)
    gamma: float = 4.0  # speculators' per-position loss decay exp(-(k-1)/gamma)


"""What decides the head (Eagle3Recipe, stored in its manifest) and one training example (Sequence)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Eagle3Recipe:
    """Everything that decides the head; stored in the manifest. Defaults fit ~6 minutes on 2 cores."""

    seed: int = 0
    threads: int = 2  # fixed: greedy generation and float reductions depend on the thread count
    train_sequences: int = 80
    heldout_sequences: int = 12
    scan_conversations: int = 4000  # the first N ShareGPT conversations are the candidate pool
    max_prompt_tokens: int = 96
    min_prompt_chars: int = 16
    max_new_tokens: int = 128
    generation_batch: int = 16
    draft_vocab_size: int = 4096
    ttt_steps: int = 3  # training-time-test depth: positions 1..ttt_steps are trained and measured
    pack_tokens: int = 512  # sequences packed per optimizer step (document-masked attention)
    epochs: int = 5
    learning_rate: float = 2e-3
    warmup_steps: int = 8
    max_grad_norm: float = 1.0
    ttt_step_loss_decay: float = 1.0
    aux_layers: tuple[int, ...] | None = None  # None: vLLM's Llama default (2, L/2, L-3)


@dataclass
class Sequence:
    """One training example: chat-templated prompt + greedy response, with the target's hidden states."""

    input_ids: Any  # LongTensor [n]
    prompt_len: int
    aux_hidden: Any  # FloatTensor [n, 3*hidden]
    last_hidden: Any  # FloatTensor [n, hidden] (the last decoder layer's output, before the final norm)

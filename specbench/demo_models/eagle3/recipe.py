"""What decides the head (Eagle3Recipe, stored in its manifest) and one training example (Sequence)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, Self


@dataclass(frozen=True)
class Eagle3Recipe:
    """Everything that decides the head; stored in the manifest. Defaults fit ~3 minutes on 2 cores: the
    learning curve (docs/engine-notes.md) buys no held-out accuracy beyond that."""

    default_minutes: ClassVar[float] = 3.0  # what the default recipe is sized for (2 cores, quiet machine)
    seed: int = 0
    threads: int = 2  # fixed: greedy generation and float reductions depend on the thread count
    train_sequences: int = 180  # the dataset's own responses, teacher-forced through the target (one pass)
    regenerated_sequences: int = 0  # more training sequences, the target's own greedy responses
    heldout_sequences: int = 48  # regenerated greedily: the text the head drafts for when vLLM serves
    scan_conversations: int = 4000  # the first N ShareGPT conversations are the candidate pool
    max_prompt_tokens: int = 96
    min_prompt_chars: int = 16
    max_new_tokens: int = 128
    generation_batch: int = 64  # greedy decoding costs ~4.5 ms CPU per token at 64, ~5.7 at 16
    max_response_tokens: int = 192  # the dataset's responses are cut here (the first tokens are the likely ones)
    forward_batch: int = 8
    draft_vocab_size: int = 4096
    ttt_steps: int = 3  # training-time-test depth: positions 1..ttt_steps are trained and measured
    pack_tokens: int = 512  # sequences packed per optimizer step (document-masked attention)
    epochs: int = 3
    learning_rate: float = 2e-3
    warmup_steps: int = 20
    max_grad_norm: float = 1.0
    ttt_step_loss_decay: float = 1.0
    train_lm_head: bool = True  # the draft lm_head starts as the target's rows for the draft vocabulary
    aux_layers: tuple[int, ...] | None = None  # None: vLLM's Llama default (2, L/2, L-3)
    # the target's dtype in the data pass and the head's on disk: "auto-cpu" is bfloat16 where the CPU has
    # native BF16 (as `--dtype auto-cpu` serves it), float32 otherwise (shared/cpu_dtype.py); or either by name
    dtype: str = "auto-cpu"

    @classmethod
    def for_minutes(cls, minutes: float) -> Self:
        """The default recipe scaled to a build budget: training sequences of both kinds (and so the generation,
        the data pass and the training steps) grow in proportion; the held-out set stays the same, so heads compare."""
        base = cls()
        scale = minutes / cls.default_minutes
        own, read = round(base.regenerated_sequences * scale), round(base.train_sequences * scale)
        if own + read == 0:
            own, read = (1, 0) if base.regenerated_sequences else (0, 1)
        return replace(base, train_sequences=read, regenerated_sequences=own,
                       scan_conversations=max(base.scan_conversations, 8 * (own + read)))




@dataclass
class Sequence:
    """One training example: chat-templated prompt + greedy response, with the target's hidden states."""

    input_ids: Any  # LongTensor [n]
    prompt_len: int
    aux_hidden: Any  # FloatTensor [n, 3*hidden]
    last_hidden: Any  # FloatTensor [n, hidden] (the last decoder layer's output, before the final norm)


@dataclass(frozen=True)
class Turn:
    """One ShareGPT first turn: the user's prompt and the dataset's response."""

    prompt: str
    response: str

"""`sweep.output_lens: [natural]`: each request's max_tokens is its prompt's reference answer length in the
target's tokens, as vLLM's ShareGPT sampling does (the cell's output_len is `records.NATURAL_OUTPUT`)."""

from __future__ import annotations

from collections.abc import Callable

from specbench.config import SweepConfig
from specbench.plan.prompts import Prompt
from specbench.shared.errors import ConfigError


def natural_lengths(sweep: SweepConfig, prompts: list[Prompt], count: Callable[[str], int] | None,
                    context: int | None) -> dict[str, int]:
    """Prompt id -> max_tokens for `output_lens: natural`: its reference answer's length in the target's
    tokens (as vLLM's ShareGPT sampling takes the recorded reply's), capped so that prompt and answer fit
    `context` (the prompt at its longest input length), and at least 1."""
    if count is None:
        raise ConfigError("model.tokenizer", "sweep.output_lens natural needs a local tokenizer folder to count "
                          "the reference answers' tokens")
    longest_in = max(sweep.input_lens or [0])
    out: dict[str, int] = {}
    for p in prompts:
        if p.reference is None:
            raise ConfigError("sweep.output_lens", f"natural needs every prompt's reference answer; {p.id} has "
                              "none (a set: file line gives it as \"reference\")")
        n = count(p.reference)
        if context is not None:
            n = min(n, context - max(longest_in, count(p.text)))
        out[p.id] = max(1, n)
    return out


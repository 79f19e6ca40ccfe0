"""Deterministic generation: token ids derived from the prompt (greedy outputs reproduce exactly), and a
simulated speculative verify loop whose acceptance follows a fixed per-request random sequence."""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field

VOCAB = 32000


def prompt_key(obj: object, temperature: float = 0.0, seed: int | None = None) -> str:
    """Greedy ignores the seed (same output every time); sampling depends on it."""
    extra = "" if not temperature else f"|t{temperature}|s{seed}"
    return hashlib.sha256(f"{obj!r}{extra}".encode()).hexdigest()


def token_id(key: str, i: int) -> int:
    return int(hashlib.blake2b(f"{key}:{i}".encode(), digest_size=4).hexdigest(), 16) % VOCAB


def token_text(tid: int) -> str:
    return f" t{tid}"


def eos_position(key: str) -> int:
    """Where the stand-in 'model' would stop when ignore_eos is false (32..231 tokens)."""
    return 32 + int(key[:6], 16) % 200


@dataclass
class SpecStats:
    verify_steps: int = 0
    accepted: int = 0
    proposed: int = 0
    histogram: list[int] = field(default_factory=list)
    per_step: list[int] = field(default_factory=list)  # accepted drafts of each step, in order

    def add(self, accepted: int, proposed: int) -> None:
        self.per_step.append(accepted)
        self.verify_steps += 1
        self.accepted += accepted
        self.proposed += proposed
        while len(self.histogram) <= accepted:
            self.histogram.append(0)
        self.histogram[accepted] += 1


def table_steps(n_tokens: int, accepted_per_step: float, drafts_per_step: int) -> tuple[list[int], SpecStats]:
    """Speculation with a set mean: step j accepts floor((j+1)a) - floor(ja) drafts (at most k), so every
    request accepts a = `accepted_per_step` drafts per step on average, whatever its prompt."""
    stats = SpecStats()
    steps: list[int] = []
    left, j = n_tokens, 0
    while left > 0:
        acc = min(drafts_per_step, math.floor((j + 1) * accepted_per_step) - math.floor(j * accepted_per_step))
        produced = min(acc + 1, left)
        stats.add(produced - 1, drafts_per_step)
        steps.append(produced)
        left -= produced
        j += 1
    return steps, stats


def plan_steps(key: str, n_tokens: int, accept_rate: float | None, drafts_per_step: int,
               tokens_per_chunk: int) -> tuple[list[int], SpecStats | None]:
    """Tokens produced by each target step. Without speculation a step is `tokens_per_chunk` tokens (one
    chunk); with it, each step accepts a run of drafts (each with probability accept_rate) plus the bonus."""
    if accept_rate is None:
        k = max(1, tokens_per_chunk)
        return [min(k, n_tokens - i) for i in range(0, n_tokens, k)], None
    rng = random.Random(int(key[:16], 16))
    stats = SpecStats()
    steps: list[int] = []
    left = n_tokens
    while left > 0:
        acc = 0
        while acc < drafts_per_step and rng.random() < accept_rate:
            acc += 1
        produced = min(acc + 1, left)
        stats.add(produced - 1, drafts_per_step)
        steps.append(produced)
        left -= produced
    return steps, stats

"""Deterministic generation: token ids derived from the prompt (greedy outputs reproduce exactly), and a
simulated speculative verify loop whose acceptance follows a fixed per-request random sequence."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Iterator
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


class TableSteps:
    """Speculation with a set mean, step by step: each step drafts k = k_now() tokens (the server's state
    then: its draft length, or vLLM's dynamic schedule at the requests in flight) and the j-th step at
    that k accepts floor((j+1)a) - floor(ja) of them (at most k), a = table[k]: on average a per step,
    whatever the prompt. k = 0 is a plain step (one token, no drafts)."""

    def __init__(self, n_tokens: int, table: dict[int, float], k_now: Callable[[], int]):
        self.n, self.table, self.k_now = n_tokens, table, k_now
        self.stats = SpecStats()
        self.taken = 0  # steps so far
        self._j: dict[int, int] = {}

    def __len__(self) -> int:
        return self.taken

    def __iter__(self) -> Iterator[int]:
        left = self.n
        while left > 0:
            k = self.k_now()
            if k == 0:
                produced = 1
            else:
                a, j = self.table[k], self._j.get(k, 0)
                self._j[k] = j + 1
                produced = min(min(k, math.floor((j + 1) * a) - math.floor(j * a)) + 1, left)
                self.stats.add(produced - 1, k)
            left -= produced
            self.taken += 1
            yield produced

    def final_stats(self) -> SpecStats | None:
        return self.stats if self.stats.verify_steps else None


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

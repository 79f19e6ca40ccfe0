"""Losslessness: comparing a variant's outputs with the baseline's (token ids, else text), and the
cell's lossless match, any-match and prefix rates."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from specbench.metrics.common import NAN
from specbench.metrics.requests import MeasuredRequest, OutputDigest


def common_prefix_len(a: Sequence[Any], b: Sequence[Any]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def compare_outputs(
    ids: Sequence[int] | np.ndarray | None, text: str | None, base_ids: Sequence[int] | np.ndarray | None,
    base_text: str | None, shorter: bool = False
) -> tuple[bool, float] | None:
    """(exact match, common prefix / max(len)) comparing token ids, else text (characters); None if
    neither is available on both sides. Two empty outputs match with prefix fraction 1.0. `shorter`
    (sweep.stop_at_eos: each output ends where its model ended): only the shorter output's length is
    compared, match = it is a prefix of the other, fraction = common prefix / min(len)."""
    if ids is not None and base_ids is not None:
        x, y = np.asarray(ids, dtype=np.int64), np.asarray(base_ids, dtype=np.int64)
        n = min(x.size, y.size)
        differ = np.flatnonzero(x[:n] != y[:n])
        prefix = int(differ[0]) if differ.size else n
        span = n if shorter else max(x.size, y.size)
        return (prefix == n and (shorter or x.size == y.size)), (1.0 if span == 0 else prefix / span)
    if text is None or base_text is None:
        return None
    common = common_prefix_len(text, base_text)
    span = min(len(text), len(base_text)) if shorter else max(len(text), len(base_text))
    frac = 1.0 if span == 0 else common / span  # prefix fraction of the output
    return (common == span if shorter else text == base_text), frac


def output_digest(ids: Sequence[int] | np.ndarray | None, text: str | None) -> OutputDigest:
    """Digests of an output's token ids and text: equal digests <=> equal outputs (compare_outputs' exact
    match), so a baseline output that is only ever tested for equality need not be kept whole."""
    def h(b: bytes) -> bytes:
        return hashlib.blake2b(b, digest_size=16).digest()

    return (None if ids is None else h(np.asarray(ids, dtype=np.int64).tobytes()),
            None if text is None else h(text.encode("utf-8", "surrogatepass")))


def _digest(r: MeasuredRequest) -> OutputDigest:
    return r.digest if r.digest is not None else output_digest(r.token_ids, r.text)


def same_output(a: OutputDigest, b: OutputDigest) -> bool:
    """compare_outputs' exact match on digests: token ids when both sides have them, else text."""
    if a[0] is not None and b[0] is not None:
        return a[0] == b[0]
    return a[1] is not None and b[1] is not None and a[1] == b[1]


def cell_lossless(
    reqs: Sequence[MeasuredRequest], lengths: tuple[Any, Any], base: Sequence[MeasuredRequest] | None,
    base_by_prompt: dict[tuple[Any, ...], list[MeasuredRequest]], shorter: bool = False,
) -> tuple[float, float, float]:
    """(match rate, any-match rate, mean prefix fraction) against the baseline's outputs.

    `lengths` is the cell's (input_len, output_len). match: equal to the baseline's output for the same
    request (same cell, launch, repeat and index, else the same cell's output for the prompt, else the
    same prompt and lengths); any-match: equal to the baseline's
    output for the same prompt and lengths at any concurrency (the baseline's own outputs can differ between
    batch shapes). Entries of `base_by_prompt` after the first of each prompt need only their `digest`."""
    exact = {(r.launch, r.repeat, r.index): r for r in base if r.ok} if base else {}
    cell_prompt: dict[str, MeasuredRequest] = {}  # the same cell's first baseline output of each prompt
    for r in base or []:
        if r.ok:
            cell_prompt.setdefault(r.prompt_id, r)
    matches: list[bool] = []
    any_matches: list[bool] = []
    prefixes: list[float] = []
    for r in reqs:
        if not r.ok:
            continue
        same_prompt = base_by_prompt.get((r.prompt_id, *lengths), [])
        b = exact.get((r.launch, r.repeat, r.index))
        if b is None or b.prompt_id != r.prompt_id:  # launches rotate the order (plan.window_prompts)
            b = cell_prompt.get(r.prompt_id) or (same_prompt[0] if same_prompt else None)
        if b is None:
            continue
        res = compare_outputs(r.token_ids, r.text, b.token_ids, b.text, shorter)
        if res is None:
            continue
        matches.append(res[0])
        prefixes.append(res[1])
        if res[0]:
            any_matches.append(True)
        else:
            mine = _digest(r)
            any_matches.append(any(same_output(mine, _digest(o)) for o in same_prompt))
    if not matches:
        return NAN, NAN, NAN
    return float(np.mean(matches)), float(np.mean(any_matches)), float(np.mean(prefixes))

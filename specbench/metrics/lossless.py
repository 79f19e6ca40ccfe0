"""Losslessness: comparing a variant's outputs with the baseline's (token ids, else text), and the
cell's lossless match, any-match and prefix rates."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from specbench.metrics.common import NAN, key_nan
from specbench.metrics.requests import MeasuredRequest, OutputDigest, to_measured_requests
from specbench.metrics.source import OUTPUT_COLUMNS, CellSource
from specbench.metrics.speedup import MeasuredCell


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


def _lengths(c: MeasuredCell) -> tuple[Any, Any]:
    return key_nan(c.row["input_len"]), c.row["output_len"]


def drafter_losslessness(cells: list[MeasuredCell], source: CellSource, forced: frozenset[str],
              shorter: bool = False) -> dict[str, tuple[float, float, float]]:
    """Lossless rates of every drafter cell at temperature 0, one category and length group at a time. In
    memory at once: the drafter cell's outputs, its baseline cell's, and the first baseline output of each
    prompt of the group (the rest of the group's baseline outputs only as digests, for the any-match)."""
    out: dict[str, tuple[float, float, float]] = {}
    # a prompt belongs to one category (plan/prompts.py), so a category's drafter cells need only that category's
    # baseline outputs; if some prompt id shows up in two categories, the whole length group is read at once
    categories: dict[str, set[Any]] = {}
    for c in cells:
        if c.row["is_baseline"]:
            categories.setdefault(c.row["category"], set()).update(r.prompt_id for r in c.reqs)
    by_category = sum(map(len, categories.values())) == len(set().union(*categories.values()))

    def group_key(c: MeasuredCell) -> tuple[Any, ...]:
        return (*_lengths(c), c.row["category"] if by_category else None)

    groups: dict[tuple[Any, ...], list[MeasuredCell]] = {}
    for c in cells:
        if not c.row["is_baseline"] and c.row["temperature"] == 0 and c.row["variant"] not in forced:
            groups.setdefault(group_key(c), []).append(c)
    for gkey, group in groups.items():
        lengths = gkey[:2]
        bases = sorted((c for c in cells if c.row["is_baseline"] and c.row["temperature"] == 0
                        and group_key(c) == gkey), key=lambda c: c.row["concurrency"])
        base_by_prompt: dict[tuple[Any, ...], list[MeasuredRequest]] = {}
        for c in bases:
            for r in to_measured_requests(source.cell_frame(c.cell_id, OUTPUT_COLUMNS)):
                if r.ok:
                    same = base_by_prompt.setdefault((r.prompt_id, *lengths), [])
                    if same:  # only the first of a prompt is compared whole; the others only for equality
                        r.digest, r.token_ids, r.text = output_digest(r.token_ids, r.text), None, None
                    same.append(r)
        base_cells = {c.row["point_id"]: c for c in bases}
        for c in group:
            reqs = to_measured_requests(source.cell_frame(c.cell_id, OUTPUT_COLUMNS))
            b = base_cells.get(c.row["point_id"])
            base = to_measured_requests(source.cell_frame(b.cell_id, OUTPUT_COLUMNS)) if b else None
            out[c.cell_id] = cell_lossless(reqs, lengths, base, base_by_prompt, shorter)
    return out

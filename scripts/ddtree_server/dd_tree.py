"""The draft tree: built best-first from per-depth log-probabilities under a node budget, and the greedy walk
that accepts the longest path the target agrees with. Pure numpy: no model, no torch.

Node 0 is the root (the token the previous verify step produced, not yet seen by the target); node i >= 1
holds one draft token at depth >= 1. Depth d is block slot d of the DFlash forward, which predicts the token
d positions after the root.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass
class DraftTree:
    tokens: list[int] = field(default_factory=list)  # tokens[i - 1]: node i's token (i >= 1)
    depths: list[int] = field(default_factory=list)  # depths[i - 1]: node i's depth (1 = the root's child)
    parents: list[int] = field(default_factory=lambda: [-1])  # parents[i]: node i's parent (root: -1)
    children: list[dict[int, int]] = field(default_factory=lambda: [{}])  # children[i]: token -> child node

    @property
    def size(self) -> int:
        """Nodes including the root: the number of positions the target verifies."""
        return len(self.parents)

    def visibility(self) -> np.ndarray:
        """[size, size] bool: row i sees column j when j is i or one of its ancestors (the tree mask)."""
        n = self.size
        vis = np.zeros((n, n), dtype=bool)
        for i in range(n):
            p = self.parents[i]
            if p >= 0:
                vis[i, :i] = vis[p, :i]  # parents come before children: row p is complete
            vis[i, i] = True
        return vis


def build_tree(log_probs: np.ndarray, budget: int, token_map: np.ndarray | None = None) -> DraftTree:
    """Best-first over cumulative log-probability: the `budget` most probable draft prefixes, as a tree.

    log_probs: [depth, vocab] per-position log-probabilities (row d-1 for depth d). Each candidate is a path
    of per-depth ranks; popping one pushes its next sibling (same depth, next rank) and its first child (next
    depth, rank 0), so every pushed prefix is dominated by its parent and the heap pops in order of
    probability. token_map (optional): vocabulary index -> token id (a draft vocabulary smaller than the
    target's). Ties pop in push order, so the tree is deterministic.
    """
    tree = DraftTree()
    depth_limit, vocab = log_probs.shape if log_probs.ndim == 2 else (0, 0)
    if budget <= 0 or depth_limit == 0:
        return tree
    topk = min(budget, vocab)
    order = np.argpartition(-log_probs, topk - 1, axis=-1)[:, :topk] if topk < vocab else \
        np.broadcast_to(np.arange(vocab), log_probs.shape).copy()
    part = np.take_along_axis(log_probs, order, axis=-1)
    order = np.take_along_axis(order, np.argsort(-part, axis=-1, kind="stable"), axis=-1)  # [depth, topk]
    top = np.take_along_axis(log_probs, order, axis=-1).astype(np.float64)
    ids = order if token_map is None else token_map[order]
    seq = 0
    heap: list[tuple[float, int, int, int, int]] = [(-top[0, 0], seq, 0, 1, 0)]  # (-logw, seq, parent, depth, rank)
    while heap and tree.size - 1 < budget:
        neg, _, parent, depth, rank = heapq.heappop(heap)
        logw = -neg
        token = int(ids[depth - 1, rank])
        node = tree.size
        tree.tokens.append(token)
        tree.depths.append(depth)
        tree.parents.append(parent)
        tree.children.append({})
        tree.children[parent][token] = node
        if rank + 1 < topk:
            seq += 1
            sibling = logw - top[depth - 1, rank] + top[depth - 1, rank + 1]
            heapq.heappush(heap, (-sibling, seq, parent, depth, rank + 1))
        if depth < depth_limit:
            seq += 1
            heapq.heappush(heap, (-(logw + top[depth, 0]), seq, node, depth + 1, 0))
    return tree


class Greedy(Protocol):
    """greedy[i]: the target's argmax at node i (a list, or computed when read: dd_generate.LazyGreedy)."""

    def __getitem__(self, i: int, /) -> int: ...


def follow(tree: DraftTree, greedy: Greedy) -> tuple[list[int], int]:
    """Walk from the root while the target's greedy token (greedy[i]: its argmax at node i) is a child.

    Returns the accepted nodes (root first) and the bonus token: the target's choice after the last one.
    """
    path = [0]
    nxt = int(greedy[0])
    while nxt in tree.children[path[-1]]:
        path.append(tree.children[path[-1]][nxt])
        nxt = int(greedy[path[-1]])
    return path, nxt

"""A seeded stratified prompt subset for the slow levels (`sweep.subset: {up_to: C, per_category: N}`).

At concurrency <= C a window sends N prompts of each category instead of the whole set: at C = 1 a window is
one request after another, so the slow levels are most of a sweep's time (docs/guide.md, "Planning for a
budget"). The subset is drawn per category from the sweep's seed alone, never the variant, launch, repeat or
level, so every variant and every subset level sends the same prompts, and the levels above C send a superset
of them: a comparison across levels is made on the prompts they share (`common_prompts`). What the subset
costs in precision (its sampling variance) is decide.sampling's.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from specbench.config import SubsetConfig
from specbench.plan.prompts import Prompt


def stratified_subset(prompts: Mapping[str, Sequence[Prompt]], per_category: int, seed: int,
                      ) -> dict[str, list[Prompt]]:
    """Per category, `per_category` of its prompts drawn without replacement (all of them when it has no
    more), seeded by the sweep's seed and the category, kept in the set's own order."""
    out: dict[str, list[Prompt]] = {}
    for category, ps in prompts.items():
        if len(ps) <= per_category:
            out[category] = list(ps)
            continue
        keep = set(random.Random(f"subset|{seed}|{category}").sample(range(len(ps)), per_category))
        out[category] = [p for i, p in enumerate(ps) if i in keep]
    return out


def applies(subset: SubsetConfig | None, concurrency: int) -> bool:
    """Whether a closed-loop level at `concurrency` sends the subset."""
    return subset is not None and concurrency <= subset.up_to


def level_prompt_count(subset: SubsetConfig | None, prompts: int, concurrency: int) -> int:
    """The prompts of a category (of `prompts`) a window at `concurrency` sends."""
    return min(prompts, subset.per_category) if subset is not None and applies(subset, concurrency) else prompts


def common_prompts(subset_prompts: Mapping[str, Sequence[Prompt]], full: Mapping[str, Sequence[Prompt]],
                   ) -> dict[str, list[str]]:
    """Per category, the prompt ids a subset level and a full level both send (the subset's: it is drawn from
    the full set), in the set's order: what a comparison across levels reads."""
    return {c: [p.id for p in full[c] if p.id in {q.id for q in subset_prompts.get(c, [])}] for c in full}

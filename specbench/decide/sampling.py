"""The sampling variance of a prompt subset (docs/metrics.md, "Subset sampling variance").

A level measured on a seeded subset of n of each category's N prompts (plan.subset) estimates the speedup
on those n prompts, not on the whole set the full levels measure: which prompts were drawn is a third
source of error beside launches and repeats. The subset is the same for every variant, so the error is the
drafter's speedup's own (one prompt's acceptance is higher than another's), not the throughput's. Per
category, the mean of ln speedup over a simple random sample of n of N prompts has variance
(1 - n / N) s_P^2 / n (the finite-population correction: a subset of the whole set has none); over K
categories weighing a_k in ln S (sum 1) the mix has sum_k a_k^2 (1 - n_k / N_k) s_P^2 / n_k. Every output
length of a category sends the same prompts, so a category's lengths share the one draw: the lengths do not
average it down. s_P is the CV of one prompt's speedup around its category's, `estimates.prompt_cv` (stated,
not measured): it enters the interval as a component on infinite df, as the config's other estimates do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specbench.decide.stats import Component


def subset_variance(prompt_cv: float, kept: Sequence[int], total: Sequence[int],
                    weights: Sequence[float] | None = None) -> float:
    """var(ln S) from the subset: sum_k a_k^2 (1 - n_k / N_k) s_P^2 / n_k over the categories (kept n_k of
    total N_k; `weights` a_k, equal when None). 0 when every category is sent whole."""
    k = len(kept)
    if k == 0 or len(total) != k:
        raise ValueError(f"subset_variance: {k} kept counts and {len(total)} totals")
    a = [1.0 / k] * k if weights is None else list(weights)
    out = 0.0
    for ak, n, big in zip(a, kept, total):
        if not 1 <= n <= big:
            raise ValueError(f"subset_variance: kept {n} of {big} prompts")
        out += ak * ak * (1 - n / big) * prompt_cv ** 2 / n
    return out


def subset_component(prompt_cv: float | None, kept: Sequence[int], total: Sequence[int],
                     weights: Sequence[float] | None = None) -> Component | None:
    """The subset's term of a mix interval, (variance, df) with df infinite (a stated CV); None when nothing
    is subsetted. A subset with no stated prompt CV cannot be priced: ValueError names the setting."""
    if all(n >= big for n, big in zip(kept, total)):
        return None
    if prompt_cv is None:
        raise ValueError("a prompt subset needs estimates.prompt_cv (the CV of one prompt's speedup)")
    return subset_variance(prompt_cv, kept, total, weights), math.inf


@dataclass(frozen=True)
class SubsetSampling:
    """A run's subset as its mix intervals need it: the levels it covers, the stated prompt CV and, per
    category, the prompts kept and the prompts in the whole set."""

    up_to: int
    prompt_cv: float | None
    kept: Mapping[str, int]
    total: Mapping[str, int]

    def component(self, concurrency: float, categories: Sequence[str],
                  weights: Sequence[float] | None = None) -> Component | None:
        """The subset's term of the mix interval of one level over points of `categories` (one per point,
        weighing `weights`, equal when None: a category's weight is its points' sum); None above up_to."""
        if not concurrency <= self.up_to or not categories:
            return None
        w = [1.0 / len(categories)] * len(categories) if weights is None else list(weights)
        by_cat: dict[str, float] = {}
        for c, x in zip(categories, w):
            by_cat[c] = by_cat.get(c, 0.0) + x
        total = math.fsum(by_cat.values())
        cats = [c for c in by_cat if c in self.kept and c in self.total]
        return subset_component(self.prompt_cv, [self.kept[c] for c in cats], [self.total[c] for c in cats],
                                [by_cat[c] / total for c in cats])

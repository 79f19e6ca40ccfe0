"""The prompt subset's sampling variance (docs/metrics.md, "Subset sampling variance")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.decide.primary import mix_interval
from specbench.decide.sampling import SubsetSampling, subset_component, subset_variance


def test_formula_matches_sampling_without_replacement() -> None:
    """The variance of the mean over n of N fixed values, drawn without replacement, is (1 - n/N) s^2 / n."""
    rng = np.random.default_rng(3)
    population = rng.normal(0.0, 0.1, 32)
    population -= population.mean()
    s = float(population.std(ddof=1))
    means = [rng.choice(population, 6, replace=False).mean() for _ in range(40_000)]
    want = subset_variance(s, [6], [32])
    assert want == pytest.approx((1 - 6 / 32) * s * s / 6)
    assert float(np.var(means)) == pytest.approx(want, rel=0.03)


def test_categories_weigh_in_squared_and_whole_sets_add_nothing() -> None:
    assert subset_variance(0.1, [32, 32], [32, 32]) == 0.0
    equal = subset_variance(0.1, [4, 4], [32, 32])
    assert equal == pytest.approx(2 * 0.25 * (1 - 4 / 32) * 0.01 / 4)
    assert subset_variance(0.1, [4, 4], [32, 32], [0.9, 0.1]) > equal
    assert subset_component(0.1, [32], [32]) is None
    with pytest.raises(ValueError, match="estimates.prompt_cv"):
        subset_component(None, [4], [32])


def test_component_per_level_and_the_mix_interval_widens() -> None:
    sub = SubsetSampling(up_to=4, prompt_cv=0.1, kept={"chat": 4, "code": 4}, total={"chat": 32, "code": 32})
    assert sub.component(8, ["chat", "code"]) is None
    # two lengths per category share the category's draw: the weights of a category add up
    comp = sub.component(1, ["chat", "chat", "code", "code"])
    assert comp is not None and comp[0] == pytest.approx(subset_variance(0.1, [4, 4], [32, 32]))
    assert math.isinf(comp[1])
    windows = {(1, 1): 100.0, (1, 2): 102.0, (1, 3): 98.0}
    base = {(1, 1): 80.0, (1, 2): 81.0, (1, 3): 79.0}
    plain = mix_interval([(1.25, windows, base)], None)
    wide = mix_interval([(1.25, windows, base)], None, extra=[comp])
    assert wide.low < plain.low and wide.high > plain.high and wide.speedup == plain.speedup

"""specbench.stats: hand-computed examples; each assertion fails if the formula changes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench import stats


def test_percentile_linear_and_empty_is_nan() -> None:
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([0, 10], 90) == pytest.approx(9.0)
    assert math.isnan(stats.percentile([], 50))
    assert stats.percentile([1.0, math.nan, 3.0], 50) == 2.0  # NaN dropped, not counted as 0


def test_cv_needs_two_values() -> None:
    assert stats.coefficient_of_variation([10.0, 12.0]) == pytest.approx(np.std([10, 12], ddof=1) / 11)
    assert math.isnan(stats.coefficient_of_variation([10.0]))


@pytest.mark.parametrize("samples", [[], [3.0], [math.nan, 2.0]])
def test_bootstrap_ci_fewer_than_two_samples_is_none(samples: list[float]) -> None:
    assert stats.bootstrap_ci(samples) == (None, None)


def test_paired_ratio_ci_one_pair_is_none() -> None:
    assert stats.paired_ratio_ci([2.0], [1.0]) == (None, None)
    assert stats.paired_ratio_ci([2.0, math.nan], [1.0, 1.0]) == (None, None)


def test_bootstrap_ci_contains_truth_and_is_deterministic() -> None:
    rng = np.random.default_rng(42)
    x = rng.normal(loc=5.0, scale=1.0, size=200)
    lo, hi = stats.bootstrap_ci(x, np.mean)
    assert lo is not None and hi is not None
    assert lo < 5.0 < hi
    # half-width close to the normal-theory 1.96 * s / sqrt(n)
    assert (hi - lo) / 2 == pytest.approx(1.96 * x.std(ddof=1) / math.sqrt(x.size), rel=0.2)
    assert stats.bootstrap_ci(x, np.mean) == (lo, hi)  # fixed seed


def test_bootstrap_ci_coverage_near_nominal() -> None:
    """Over 200 synthetic samples of n=40 (exponential, skewed), a 95% interval covers the mean ~95%."""
    rng = np.random.default_rng(7)
    hits = 0
    trials = 200
    for i in range(trials):
        x = rng.exponential(scale=2.0, size=40)
        lo, hi = stats.bootstrap_ci(x, np.mean, n_resamples=1000, seed=i)
        hits += lo is not None and hi is not None and lo <= 2.0 <= hi
    assert 0.88 <= hits / trials <= 0.99


def test_bootstrap_ci_identical_samples_zero_width() -> None:
    assert stats.bootstrap_ci([4.0, 4.0, 4.0]) == (4.0, 4.0)


def test_paired_ratio_ci_constant_ratio_and_pairing_helps() -> None:
    # variant = 2 x baseline for every key: the ratio is exactly 2 in every resample
    base = [10.0, 20.0, 30.0, 40.0, 50.0]
    lo, hi = stats.paired_ratio_ci([2 * b for b in base], base)
    assert lo == pytest.approx(2.0) and hi == pytest.approx(2.0)

    # shared per-key variation cancels when paired: paired interval much narrower than unpaired
    rng = np.random.default_rng(3)
    shared = rng.uniform(5, 50, size=30)
    var = 1.5 * shared * rng.normal(1, 0.01, size=30)
    plo, phi = stats.paired_ratio_ci(var, shared)
    vlo, vhi = stats.bootstrap_ci(var)
    blo, bhi = stats.bootstrap_ci(shared)
    assert plo is not None and phi is not None and vlo is not None and blo is not None
    assert plo < 1.5 < phi
    assert (phi - plo) < 0.2 * (vhi / blo - vlo / bhi)  # type: ignore[operator]


def test_mad_outliers() -> None:
    assert stats.mad_outliers([10.0, 10.5, 9.5, 10.2, 9.8, 30.0]) == [5]
    assert stats.mad_outliers([-0.2, 0.0, 0.2]) == []
    assert stats.mad_outliers([1.0, 100.0]) == []  # too few samples to call anything an outlier
    # zero MAD (most samples identical): the differing one is an outlier, as in hyperfine
    assert stats.mad_outliers([10.0] * 7 + [100.0]) == [7]
    # NaN is skipped, indices still refer to the input
    assert stats.mad_outliers([math.nan, 10.0, 10.5, 9.5, 10.2, 9.8, 30.0]) == [6]
    # median 10.25, MAD 0.75: 30 -> 0.6745 * 19.75 / 0.75 = 17.8 > 10; 20 -> 8.8, not flagged (3.5 would)
    assert stats.mad_outliers([9.5, 10.0, 10.5, 11.0, 9.0, 30.0]) == [5]
    assert stats.mad_outliers([9.5, 10.0, 10.5, 11.0, 9.0, 20.0]) == []
    assert stats.mad_outliers([9.5, 10.0, 10.5, 11.0, 9.0, 20.0], threshold=3.5) == [5]
    # a tight wave: 0.4% off is many MADs but not practically an outlier; 20% off is
    assert stats.mad_outliers([16.03] * 15 + [16.04, 16.10]) == []
    assert stats.mad_outliers([16.03] * 15 + [16.04, 12.8]) == [16]


def test_break_even_interpolates_in_log2() -> None:
    be = stats.break_even([1, 4, 16], [1.8, 1.3, 0.8], [1.6, 1.1, 0.7], [2.0, 1.5, 0.9])
    # log2 C* = 2 + (1.3 - 1) / (1.3 - 0.8) * (4 - 2) = 3.2
    assert be.status == "pays_up_to"
    assert be.break_even_concurrency == pytest.approx(2**3.2)
    assert 4 < be.break_even_concurrency < 16  # type: ignore[operator]
    assert be.uncertain_from == 16 and be.last_confident == 4
    assert be.verdict == "pays up to C≈9.2 (interval crosses 1.0 between 4 and 16)"


def test_break_even_unsorted_input_and_interval_earlier_than_point() -> None:
    be = stats.break_even([16, 8, 1, 2, 4], [0.9, 1.05, 1.9, 1.7, 1.3], [0.8, 0.95, 1.7, 1.5, 1.1], [1.0] * 5)
    assert be.status == "pays_up_to"
    # crossing between 8 (1.05) and 16 (0.9): 3 + 0.05/0.15 = 3.333
    assert be.break_even_concurrency == pytest.approx(2 ** (3 + 1 / 3))
    assert be.verdict.startswith("pays up to C≈10 (interval crosses 1.0 between 4 and 8)")


def test_break_even_other_outcomes() -> None:
    every = stats.break_even([1, 2, 4], [2.0, 1.5, 1.1])
    assert every.status == "pays_everywhere" and every.break_even_concurrency is None
    assert every.verdict.startswith("pays at every measured level (beyond the sweep")

    never = stats.break_even([1, 4], [0.7, 0.5], [0.6, 0.4], [0.8, 0.6])
    assert never.status == "never_pays" and never.verdict.startswith("never pays")

    unsure = stats.break_even([1, 4], [1.05, 0.8], [0.95, 0.7], [1.15, 0.9])
    assert unsure.status == "inconclusive"
    assert unsure.verdict == "inconclusive: interval contains 1.0 at C=1"

    empty = stats.break_even([1, 4], [math.nan, math.nan])
    assert empty.status == "no_data" and empty.break_even_concurrency is None


def test_break_even_exact_one_counts_as_paying() -> None:
    be = stats.break_even([1, 2, 4], [1.5, 1.0, 0.5])
    # the crossing is between 2 (1.0) and 4: at exactly 1.0 the interpolation gives C* = 2
    assert be.break_even_concurrency == pytest.approx(2.0)

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
def test_t_intervals_need_two_units(samples: list[float]) -> None:
    assert stats.mean_ci(samples) == stats.UNDEFINED_T
    assert stats.ratio_ci(samples, [1.0, 2.0]) == stats.UNDEFINED_T
    assert stats.ratio_estimator_ci(samples, [1.0] * len(samples)) == stats.UNDEFINED_T


def test_mean_ci_is_student_t() -> None:
    ci = stats.mean_ci([10.0, 12.0, 14.0])  # mean 12, s = 2, t_{2, 0.975} = 4.302653
    assert ci.df == 2
    assert ci.low == pytest.approx(12 - 4.302653 * 2 / math.sqrt(3), rel=1e-6)
    assert ci.high == pytest.approx(12 + 4.302653 * 2 / math.sqrt(3), rel=1e-6)
    centred = stats.mean_ci([10.0, 12.0, 14.0], point=11.0)  # a pooled point keeps the width
    assert centred.high - centred.low == pytest.approx(ci.high - ci.low) and centred.low < 11 < centred.high
    assert stats.mean_ci([4.0, 4.0, 4.0]).bounds == (4.0, 4.0)


def test_mean_ci_adds_a_calibrated_component_with_satterthwaite_df() -> None:
    # variance of the mean 4/3 (df 2) plus a launch component 4/3 with df 2: df = (8/3)^2 / (2 (4/3)^2 / 2) = 4
    ci = stats.mean_ci([10.0, 12.0, 14.0], extra=[(4 / 3, 2.0)])
    assert ci.df == pytest.approx(4.0)
    assert ci.high - 12 == pytest.approx(2.776445 * math.sqrt(8 / 3), rel=1e-6)
    assert stats.satterthwaite_df([(1.0, 3.0)]) == pytest.approx(3.0)
    assert stats.satterthwaite_df([(0.0, 3.0)]) is None


def test_ratio_ci_is_welch_on_the_log_ratio() -> None:
    ci = stats.ratio_ci([12.0, 12.0, 12.0], [10.0, 10.0, 10.0])
    assert ci.bounds == pytest.approx((1.2, 1.2))
    x, y = [11.0, 12.0, 13.0], [9.0, 10.0, 11.0, 10.0]
    v1, v2 = 1.0 / (3 * 144), (2 / 3) / (4 * 100)
    df = (v1 + v2) ** 2 / (v1**2 / 2 + v2**2 / 3)
    ci = stats.ratio_ci(x, y)
    assert ci.df == pytest.approx(df)
    import scipy.stats

    half = scipy.stats.t.ppf(0.975, df) * math.sqrt(v1 + v2)
    assert ci.low == pytest.approx(1.2 * math.exp(-half)) and ci.high == pytest.approx(1.2 * math.exp(half))
    assert stats.ratio_ci([1.0, 2.0], [-1.0, -2.0]) == stats.UNDEFINED_T


def test_ratio_ci_covers_at_small_n() -> None:
    """The reason for the method: with n = 3 independent launches per side, a nominal 95% interval holds
    the true ratio about 95% of the time (the former paired bootstrap: about 71%)."""
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(1000):
        ci = stats.ratio_ci(rng.normal(120, 6, 3), rng.normal(100, 5, 3))
        hits += ci.low <= 1.2 <= ci.high  # type: ignore[operator]
    assert 0.93 <= hits / 1000 <= 0.985


def test_ratio_estimator_ci() -> None:
    # tokens and steps of 3 windows: R = 300 / 120 = 2.5; residuals 0, 5, -5; var = 50 / (2 * 3 * 40^2)
    ci = stats.ratio_estimator_ci([100.0, 105.0, 95.0], [40.0, 40.0, 40.0])
    assert ci.df == 2
    assert ci.high - 2.5 == pytest.approx(4.302653 * math.sqrt(50 / (2 * 3 * 1600)), rel=1e-6)
    assert stats.ratio_estimator_ci([2.0, math.nan, 4.0], [1.0, 1.0, 2.0]).bounds == (2.0, 2.0)
    with pytest.raises(ValueError, match="differ in length"):
        stats.ratio_estimator_ci([1.0], [1.0, 2.0])


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
    assert every.verdict.startswith("pays at all 3 measured levels (beyond the sweep")

    never = stats.break_even([1, 4], [0.7, 0.5], [0.6, 0.4], [0.8, 0.6])
    assert never.status == "never_pays"
    assert never.verdict == "never pays: interval below 1.0 at all 2 measured levels"

    unsure = stats.break_even([1, 4], [1.05, 0.8], [0.95, 0.7], [1.15, 0.9])
    assert unsure.status == "inconclusive"
    assert unsure.verdict == "inconclusive: interval contains 1.0 at C=1 (below 1.0 at 1 of 2 levels)"

    empty = stats.break_even([1, 4], [math.nan, math.nan])
    assert empty.status == "no_data" and empty.break_even_concurrency is None


def test_never_pays_only_when_every_level_is_below_one() -> None:
    # below 1.0 at the lowest level, clearly above at the highest: the old rule (lowest level alone) said
    # "never pays"; the statement must hold at every measured level
    rising = stats.break_even([1, 4, 16], [0.8, 0.95, 1.3], [0.7, 0.85, 1.2], [0.9, 1.05, 1.4])
    assert rising.status == "inconclusive"
    assert rising.verdict == "inconclusive: speedup 0.80 at C=1, but below 1.0 at only 1 of 3 levels"
    # point below 1.0 everywhere but an interval reaching above 1.0 at C=4: not "never"
    touching = stats.break_even([1, 4], [0.8, 0.95], [0.7, 0.85], [0.9, 1.05])
    assert touching.status == "inconclusive"
    # no intervals: the point estimates decide, and the verdict says so
    points = stats.break_even([1, 4], [0.8, 0.7])
    assert points.status == "never_pays" and "without an interval: indicative" in points.verdict


def test_break_even_exact_one_counts_as_paying() -> None:
    be = stats.break_even([1, 2, 4], [1.5, 1.0, 0.5])
    # the crossing is between 2 (1.0) and 4: at exactly 1.0 the interpolation gives C* = 2
    assert be.break_even_concurrency == pytest.approx(2.0)

"""specbench.decide.stats: hand-computed examples; each assertion fails if the formula changes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.decide import crossing, stats

NAN = math.nan


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
    assert stats.positive_mean_ci(samples) == stats.UNDEFINED_T
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


def test_positive_mean_ci_is_student_t_on_the_log_scale() -> None:
    # mean 12, s = 2, n = 3: var(log mean) = 4 / (3 * 144), t_{2, 0.975} = 4.302653
    ci = stats.positive_mean_ci([10.0, 12.0, 14.0])
    half = 4.302653 * math.sqrt(4 / (3 * 144))
    assert ci.df == 2
    assert ci.bounds == pytest.approx((12 * math.exp(-half), 12 * math.exp(half)), rel=1e-6)
    # a pooled point is the centre and sets the scale: var(log 11) = (4 / 3) / 11^2
    centred = stats.positive_mean_ci([10.0, 12.0, 14.0], point=11.0)
    h = 4.302653 * math.sqrt(4 / 3) / 11
    assert centred.bounds == pytest.approx((11 * math.exp(-h), 11 * math.exp(h)), rel=1e-6)
    # a calibrated launch variance (CV^2 = 0.01, df 2) joins with Satterthwaite df
    v = 4 / (3 * 144)
    cal = stats.positive_mean_ci([10.0, 12.0, 14.0], extra_log=[(0.01, 2.0)])
    assert cal.df == pytest.approx((v + 0.01) ** 2 / (v * v / 2 + 0.01 ** 2 / 2))
    assert stats.positive_mean_ci([4.0, 4.0, 4.0]).bounds == pytest.approx((4.0, 4.0))
    assert stats.positive_mean_ci([-1.0, 1.0]) == stats.UNDEFINED_T  # no log of a mean that is not positive
    assert stats.positive_mean_ci([1.0, 2.0], point=0.0) == stats.UNDEFINED_T


def test_intervals_of_positive_figures_stay_positive() -> None:
    # the report's example: units 2.6, 12.6, 36.7 tok/s; Student t on the natural scale goes below 0
    units = [2.6, 12.6, 36.7]
    assert stats.mean_ci(units).low < 0  # type: ignore[operator]
    for ci in (stats.positive_mean_ci(units), stats.positive_mean_ci([1.0, 100.0]),
               stats.ratio_estimator_ci([10.0, 300.0], [9.0, 100.0]),
               stats.ratio_estimator_ci([10.0, 11.0, 300.0], [10.0, 10.0, 100.0])):
        assert ci.low is not None and ci.high is not None and 0 < ci.low < ci.high


def test_ratio_estimator_ci() -> None:
    # tokens and steps of 3 windows: R = 300 / 120 = 2.5; residuals 0, 5, -5; var = 50 / (2 * 3 * 40^2);
    # on the log scale var(log R) = var / R^2, bounds R exp(+-t sqrt(var(log R)))
    ci = stats.ratio_estimator_ci([100.0, 105.0, 95.0], [40.0, 40.0, 40.0])
    assert ci.df == 2
    half = 4.302653 * math.sqrt(50 / (2 * 3 * 1600)) / 2.5
    assert ci.bounds == pytest.approx((2.5 * math.exp(-half), 2.5 * math.exp(half)), rel=1e-6)
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
    be = crossing.break_even([1, 4, 16], [1.8, 1.3, 0.8], [1.6, 1.1, 0.7], [2.0, 1.5, 0.9])
    # log2 C* = 2 + (1.3 - 1) / (1.3 - 0.8) * (4 - 2) = 3.2
    assert be.status == "pays_up_to"
    assert be.break_even_concurrency == pytest.approx(2**3.2)
    assert 4 < be.break_even_concurrency < 16  # type: ignore[operator]
    assert be.uncertain_from == 16 and be.last_confident == 4
    assert be.verdict == "pays up to C≈9.2 (interval crosses 1.0 between 4 and 16)"


def test_break_even_unsorted_input_and_interval_earlier_than_point() -> None:
    be = crossing.break_even([16, 8, 1, 2, 4], [0.9, 1.05, 1.9, 1.7, 1.3], [0.8, 0.95, 1.7, 1.5, 1.1], [1.0] * 5)
    assert be.status == "pays_up_to"
    # crossing between 8 (1.05) and 16 (0.9): 3 + 0.05/0.15 = 3.333
    assert be.break_even_concurrency == pytest.approx(2 ** (3 + 1 / 3))
    assert be.verdict.startswith("pays up to C≈10 (interval crosses 1.0 between 4 and 8)")


def test_break_even_other_outcomes() -> None:
    every = crossing.break_even([1, 2, 4], [2.0, 1.5, 1.1])
    assert every.status == "pays_everywhere" and every.break_even_concurrency is None
    assert every.verdict.startswith("pays at all 3 measured levels (beyond the sweep")

    never = crossing.break_even([1, 4], [0.7, 0.5], [0.6, 0.4], [0.8, 0.6])
    assert never.status == "never_pays"
    assert never.verdict == "never pays: interval below 1.0 at all 2 measured levels"

    unsure = crossing.break_even([1, 4], [1.05, 0.8], [0.95, 0.7], [1.15, 0.9])
    assert unsure.status == "inconclusive"
    assert unsure.verdict == "inconclusive: interval contains 1.0 at C=1 (below 1.0 at 1 of 2 levels)"

    empty = crossing.break_even([1, 4], [math.nan, math.nan])
    assert empty.status == "no_data" and empty.break_even_concurrency is None


def test_never_pays_only_when_every_level_is_below_one() -> None:
    # below 1.0 at the lowest level, clearly above at the highest: the old rule (lowest level alone) said
    # "never pays"; the statement must hold at every measured level
    rising = crossing.break_even([1, 4, 16], [0.8, 0.95, 1.3], [0.7, 0.85, 1.2], [0.9, 1.05, 1.4])
    assert rising.status == "inconclusive"
    assert rising.verdict == "inconclusive: speedup 0.80 at C=1, but below 1.0 at only 1 of 3 levels"
    # point below 1.0 everywhere but an interval reaching above 1.0 at C=4: not "never"
    touching = crossing.break_even([1, 4], [0.8, 0.95], [0.7, 0.85], [0.9, 1.05])
    assert touching.status == "inconclusive"
    # no intervals: the point estimates decide, and the verdict says so
    points = crossing.break_even([1, 4], [0.8, 0.7])
    assert points.status == "never_pays" and "without an interval: indicative" in points.verdict


def test_break_even_exact_one_counts_as_paying() -> None:
    be = crossing.break_even([1, 2, 4], [1.5, 1.0, 0.5])
    # the crossing is between 2 (1.0) and 4: at exactly 1.0 the interpolation gives C* = 2
    assert be.break_even_concurrency == pytest.approx(2.0)


# -- NaN, None and the edges of each definition --------------------------------------------------------------
def test_none_is_dropped_like_nan() -> None:
    assert stats.mean([1.0, None, 3.0]) == 2.0  # type: ignore[list-item]
    assert stats.mad_outliers([None, 10.0, 10.5, 9.5, 10.2, 9.8, 30.0]) == [6]  # type: ignore[list-item]
    # a window without counters: the unit is dropped on either side, as with NaN
    for tokens, steps in (([2.0, None, 4.0], [1.0, 1.0, 2.0]), ([2.0, 5.0, 4.0], [1.0, None, 2.0])):
        assert stats.ratio_estimator_ci(tokens, steps).bounds == (2.0, 2.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("values, cv", [
    ([0.0, 2.0], math.sqrt(2)),  # mean 1: s = sqrt(2), cv = sqrt(2) / 1
    ([-1.0, 1.0], math.nan),  # zero mean: undefined, not inf
    ([5.0], math.nan),
])
def test_cv_edges(values: list[float], cv: float) -> None:
    assert stats.coefficient_of_variation(values) == pytest.approx(cv, nan_ok=True)


def test_mean_ci_two_units_and_its_df() -> None:
    # two units are enough (the default min_units): mean 11, s = sqrt(2), t_{1, 0.975} = 12.706205
    ci = stats.mean_ci([10.0, 12.0])
    assert ci.df == 1 and ci.high == pytest.approx(11 + 12.706205, rel=1e-6)
    assert stats.mean_ci([10.0, 12.0], min_units=3) == stats.UNDEFINED_T
    # the pooled point is the centre, the units' spread the width
    centred = stats.mean_ci([10.0, 12.0, 14.0], point=11.0)
    assert (centred.low + centred.high) / 2 == pytest.approx(11.0)  # type: ignore[operator]
    # identical units: a zero-width interval still reports n - 1 df
    assert stats.mean_ci([4.0, 4.0, 4.0]).df == 2


def test_interval_df_do_not_depend_on_the_unit_scale() -> None:
    # the Satterthwaite example above in tok/s / 10 (a variance below 1): df 4 still, width / 10
    big = stats.mean_ci([10.0, 12.0, 14.0], extra=[(4 / 3, 2.0)])
    small = stats.mean_ci([1.0, 1.2, 1.4], extra=[(4 / 300, 2.0)])
    assert small.df == pytest.approx(4.0)
    assert small.high - small.low == pytest.approx((big.high - big.low) / 10)  # type: ignore[operator]
    # ratios of means below 1 tok/s are ratios like any other
    assert stats.ratio_ci([0.5, 0.5], [0.25, 0.25]).bounds == pytest.approx((2.0, 2.0))
    assert stats.ratio_estimator_ci([0.2, 0.4], [0.1, 0.2]).bounds == pytest.approx((2.0, 2.0))


@pytest.mark.parametrize("extra, point", [([(math.nan, 2.0)], None), ([(math.inf, 2.0)], None),
                                          ((), math.nan), ((), math.inf)])
def test_mean_ci_undefined_variance_or_point_gives_no_interval(extra: list[stats.Component],
                                                               point: float | None) -> None:
    assert stats.mean_ci([10.0, 12.0, 14.0], extra=extra, point=point) == stats.UNDEFINED_T


def test_ratio_ci_zero_variance_df_and_zero_means() -> None:
    # identical units on each side (3 and 4 of them): no Welch df to compute, min(n) - 1 = 2
    ci = stats.ratio_ci([12.0] * 3, [10.0] * 4)
    assert ci.bounds == pytest.approx((1.2, 1.2)) and ci.df == 2
    # a zero mean on either side: no log ratio
    assert stats.ratio_ci([0.0, 0.0], [1.0, 2.0]) == stats.UNDEFINED_T
    assert stats.ratio_ci([1.0, 2.0], [0.0, 0.0]) == stats.UNDEFINED_T
    # no steps at all: no acceptance length
    assert stats.ratio_estimator_ci([1.0, 2.0], [0.0, 0.0]) == stats.UNDEFINED_T


@pytest.mark.parametrize("components, df", [
    ([(1.0, 1.0)], 1.0),
    # a component known exactly (df inf, 0 or no variance) adds variance only: (1 + 1)^2 / (1 / 3) = 12
    ([(1.0, 3.0), (1.0, math.inf)], 12.0),
    ([(1.0, 3.0), (1.0, 0.0)], 12.0),
    ([(1.0, 3.0), (0.0, 0.0)], 3.0),
    ([(1.0, math.inf)], math.inf),
])
def test_satterthwaite_df_known_answers(components: list[stats.Component], df: float) -> None:
    assert stats.satterthwaite_df(components) == pytest.approx(df)


def test_mad_outliers_boundaries() -> None:
    # three finite values are enough: median 10, MAD 0 -> machine epsilon, 100 is an outlier
    assert stats.mad_outliers([10.0, 10.0, 100.0]) == [2]
    # exactly 10% from the median is not "at least 10% away" (strictly more is needed): 11 vs 10
    assert stats.mad_outliers([10.0] * 7 + [11.0]) == []
    assert stats.mad_outliers([10.0] * 7 + [11.5]) == [7]
    # median 10, MAD 1: 30 has modified Z = 0.6745 * 20 exactly; flagged only above the threshold
    values = [9.0, 10.0, 11.0, 30.0, 10.0]
    assert stats.mad_outliers(values, threshold=stats.MAD_TO_Z * 20.0) == []
    assert stats.mad_outliers(values, threshold=stats.MAD_TO_Z * 19.9) == [3]
    # a zero MAD is machine epsilon, not 0: around a zero median 1e-16 is Z = 0.6745 * 1e-16 / 2.2e-16 = 0.3
    # (rounding, not an outlier); 1e-14 is Z = 30
    assert stats.mad_outliers([0.0] * 5 + [1e-16]) == []
    assert stats.mad_outliers([0.0] * 5 + [1e-14]) == [5]


# -- break_even: the fields behind each verdict --------------------------------------------------------------
def test_break_even_hi_exactly_one_contains_one() -> None:
    be = crossing.break_even([1, 2], [0.9, 1.3], [0.8, 1.2], [1.0, 1.4])
    assert be.verdict == "inconclusive: interval contains 1.0 at C=1 (below 1.0 at 0 of 2 levels)"


def test_break_even_uncertain_from_is_kept_in_every_status() -> None:
    rising = crossing.break_even([1, 4, 16], [0.8, 0.95, 1.3], [0.7, 0.85, 1.2], [0.9, 1.05, 1.4])
    assert (rising.status, rising.uncertain_from) == ("inconclusive", 1)
    # pays at every level by its point estimate, but the interval at C=2 reaches below 1.0: "pays everywhere"
    # is a claim about every level, so it is not made (issue 50 item 6)
    every = crossing.break_even([1, 2], [1.5, 1.2], [1.3, 0.9], [1.7, 1.5])
    assert (every.status, every.uncertain_from, every.last_confident) == ("inconclusive", 2, 1)
    assert every.verdict == ("inconclusive: speedup >= 1.0 at all 2 measured levels, but the interval contains 1.0 "
                             "from C=2")


def test_never_pays_with_some_intervals_missing_says_which() -> None:
    be = crossing.break_even([1, 4, 16], [0.8, 0.7, 0.6], [0.7, NAN, NAN], [0.9, NAN, NAN])
    assert be.verdict == ("never pays: interval or, without one, point estimate below 1.0 at all 3 measured "
                          "levels; 2 without an interval: indicative")


@pytest.mark.parametrize("target, shown", [(9.6, "9.6"), (9.96, "10"), (40.0, "40")])
def test_break_even_concurrency_as_printed(target: float, shown: str) -> None:
    # between (8, 1 + t) and (16, t): log2 C* = 3 + t, so t = log2(target / 8) puts C* at the target (up to
    # rounding)
    t = math.log2(target / 8)
    be = crossing.break_even([8, 16] if target < 16 else [32, 64], [1 + t, t] if target < 16 else [1 + t - 2, t - 2])
    assert be.break_even_concurrency == pytest.approx(target)
    assert be.verdict == f"pays up to C≈{shown} (no interval)"


def test_break_even_at_a_measured_level_of_ten_reads_ten() -> None:
    # 1.0 exactly at C=10: C* = 2 ** log2(10) = 9.999999999999998, printed as "10", not "10.0"
    assert crossing.break_even([10, 20], [1.0, 0.5]).verdict == "pays up to C≈10 (no interval)"


# -- metrics.intervals: which windows are units, and the variance at each level ---------------------------------
def test_units_are_launches_from_two_launches_on() -> None:
    from specbench.decide.intervals import group_units, unit_key, unit_means

    # two launches: each launch is one unit, the mean of its windows
    assert unit_means({(2, 1): 20.0, (1, 1): 10.0, (1, 2): 12.0, (2, 2): 22.0}) == [11.0, 21.0]
    assert unit_key(3, 1, 2) == 3
    # one launch: every window is a unit; a non-finite window is dropped
    assert unit_means({(1, 1): 10.0, (1, 2): 12.0, (1, 3): NAN}) == [10.0, 12.0]
    assert unit_key(1, 2, 1) == (1, 2)
    requests = [("l1", 10.0), ("l2", 20.0), ("l1", 12.0)]
    assert group_units(requests, lambda r: r[0]) == [[("l1", 10.0), ("l1", 12.0)], [("l2", 20.0)]]


def test_launch_components() -> None:
    from specbench.decide.intervals import LaunchVariance, launch_components

    cal = LaunchVariance(rel_var=0.01, df=3.0, source="measured")  # launch CV 10%
    # on the log scale the relative variance itself, once per single-launch variant (one by default)
    assert launch_components(cal) == [(0.01, 3.0)]
    assert launch_components(cal, n_variants=2) == [(0.02, 3.0)]
    assert launch_components(None) == []
    assert launch_components(LaunchVariance(NAN, 3.0, "measured")) == []


def test_variance_levels_unequal_windows_per_launch() -> None:
    from specbench.decide.intervals import variance_levels

    # launch 1: 98, 102 (variance 8, 1 df); launch 2: 117, 120, 123 (variance 9, 2 df): pooled S2^2 =
    # (8 * 1 + 9 * 2) / 3 = 26/3; overall mean 560 / 5 = 112; launch means 100 and 120: S1^2 = 200; n2 = 2.5
    w = {(1, 1): 98.0, (1, 2): 102.0, (2, 1): 117.0, (2, 2): 120.0, (2, 3): 123.0}
    # requests: [10, 12] (variance 2, 1 df) and [9, 10, 14] (variance 7, 2 df): pooled 16/3, mean 55 / 5 = 11
    reqs = [[10.0, 12.0], [9.0, 10.0, 14.0, NAN]]
    lv = variance_levels(w, reqs)
    expected = {"launch_cv": math.sqrt(200 - 26 / 3 / 2.5) / 112, "repeat_cv": math.sqrt(26 / 3) / 112,
                "request_cv": math.sqrt(16 / 3) / 11}
    assert lv == pytest.approx(expected)
    # a CV has no unit: the same run in tok/ms gives the same figures
    scaled = variance_levels({k: v / 1000 for k, v in w.items()}, [[x / 1000 for x in g] for g in reqs])
    assert scaled == pytest.approx(expected)


def test_variance_levels_undefined_levels_are_nan() -> None:
    from specbench.decide.intervals import variance_levels

    nan3 = {"launch_cv": NAN, "repeat_cv": NAN, "request_cv": NAN}
    assert variance_levels({(1, 1): 100.0}, []) == pytest.approx(nan3, nan_ok=True)  # one window: nothing
    assert variance_levels({}, [[]]) == pytest.approx(nan3, nan_ok=True)
    # nothing generated at all: a zero mean gives no CV (and no division by zero)
    zeros = {(1, 1): 0.0, (1, 2): 0.0, (2, 1): 0.0, (2, 2): 0.0}
    assert variance_levels(zeros, [[0.0, 0.0]]) == pytest.approx(nan3, nan_ok=True)
    # one window per launch: the launch variance is S1^2 alone (no within-launch part to subtract)
    one_each = variance_levels({(1, 1): 100.0, (2, 1): 120.0}, [])
    assert one_each == pytest.approx({**nan3, "launch_cv": math.sqrt(200) / 110}, nan_ok=True)


def test_log_scale_interval_of_a_huge_spread_is_unbounded_above_not_an_overflow() -> None:
    """A unit near zero next to ordinary ones (a killed step's partial launch) makes the log-scale
    variance huge: exp(high) would overflow, so the high end is +inf (bounds nothing), the low end stays."""
    ci = stats.positive_mean_ci([1e-3, 10.0, 10.0], point=1e-3)  # half-width about 14,000 on the log scale
    assert ci.high == math.inf and ci.low == 0.0 and ci.df == 2

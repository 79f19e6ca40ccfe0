"""Known answers for decide/decision.py: the four outcomes, the units that would decide, pooling and
its refusal, the component interval, the cost-optimal design and the always-valid stopping rule."""

from __future__ import annotations

import math

import pytest

from specbench.decide.decision import (
    Components,
    Design,
    Estimate,
    MeasuredInterval,
    Outcome,
    classify,
    component_interval,
    consistent,
    decisive_half_width,
    look_alpha,
    optimal_design,
    optimal_repeats,
    pool,
    summary_word,
    units_to_decide,
)

M = 1.05


@pytest.mark.parametrize("low, high, outcome", [
    (1.06, 1.30, Outcome.ADOPT),  # clears m
    (1.04, 1.30, Outcome.UNDECIDED),  # faster than 1, not surely by m
    (0.97, 1.03, Outcome.NO_DIFFERENCE),  # inside [1/m, m]
    (1 / M, M, Outcome.NO_DIFFERENCE),  # the closed bounds are inside
    (0.96, 0.99, Outcome.NO_DIFFERENCE),  # measurably slower, but by less than the margin
    (0.80, 0.99, Outcome.SLOWER),  # below 1 and reaching past 1/m
    (0.90, 1.01, Outcome.UNDECIDED),
    (0.99, 1.06, Outcome.UNDECIDED),  # reaches past m
    (math.nan, 1.2, Outcome.UNDECIDED),  # no interval decides nothing
    (math.nan, math.nan, Outcome.UNDECIDED),
])
def test_classify(low: float, high: float, outcome: Outcome) -> None:
    assert classify(low, high, M) is outcome


def test_min_speedup_one_has_no_equivalence_margin() -> None:
    assert classify(0.99, 1.01, 1.0) is Outcome.UNDECIDED
    assert classify(1.01, 1.02, 1.0) is Outcome.ADOPT


def test_summary_word() -> None:
    assert summary_word([Outcome.ADOPT, Outcome.ADOPT]) == "adopt"
    assert summary_word([Outcome.NO_DIFFERENCE]) == "same"
    assert summary_word([Outcome.ADOPT, Outcome.SLOWER]) == "mixed"
    assert summary_word([Outcome.ADOPT, Outcome.UNDECIDED]) == "undecided"
    assert summary_word([]) == "undecided"


def test_decisive_half_width() -> None:
    lm = math.log(M)
    assert decisive_half_width(0.0, M) == pytest.approx(lm)  # A/A: equivalence with h < ln m
    assert decisive_half_width(math.log(1.2), M) == pytest.approx(math.log(1.2) - lm)
    assert decisive_half_width(math.log(0.9), M) == pytest.approx(-math.log(0.9))
    assert decisive_half_width(lm, M) == pytest.approx(0.0)  # exactly at m: no interval decides


def test_units_to_decide_known_answer() -> None:
    # df = inf: z = 1.96; se = 0.1 with 1 unit; need ln(1.2/1.05) = 0.1335: 1.96 * 0.1 / sqrt(n) < 0.1335
    # -> sqrt(n) > 1.468 -> n = 3
    z = 1.959963984540054
    s = 1.2
    low, high = s * math.exp(-z * 0.1), s * math.exp(z * 0.1)
    assert units_to_decide(MeasuredInterval(low, high, math.inf, 1), M).units == 3
    # the same se at finite df: t falls as df grow by 2 per added unit (t_4 = 2.776, t_6 = 2.447 ...):
    # n = 4: t_{2+6} = 2.306 * 0.1 / 2 = 0.115 < 0.1335, n = 3: t_6 = 2.447 * 0.1 / sqrt(3) = 0.141 > 0.1335
    t2 = 4.302652729911275
    ci = MeasuredInterval(s * math.exp(-t2 * 0.1), s * math.exp(t2 * 0.1), 2.0, 1)
    assert units_to_decide(ci, M).units == 4
    assert units_to_decide(MeasuredInterval(M * 0.9, M / 0.9, 4.0, 2), M).units is None  # at m itself: undecidable
    assert units_to_decide(MeasuredInterval(0.5, 3.0, 2.0, 2), M, cap=3).units is None  # more than the cap


def test_units_to_decide_at_a_stated_power() -> None:
    """(z_0.975 + z_0.8) x 0.1 / sqrt(n) < ln(1.2/1.05) = 0.1335 -> sqrt(n) > 2.0985 -> n = 5 (3 at 50%)."""
    z = 1.959963984540054
    ci = MeasuredInterval(1.2 * math.exp(-z * 0.1), 1.2 * math.exp(z * 0.1), math.inf, 1)
    assert units_to_decide(ci, M, power=0.8).units == 5
    assert units_to_decide(ci, M).units == 3


def test_pool_known_answer() -> None:
    p = pool([Estimate(0.01, 2), Estimate(0.04, 2), Estimate(9.0, 0)])  # df 0 carries nothing
    assert p == Estimate(pytest.approx(0.025), 4)
    assert pool([Estimate(0.01, 0)]) is None


def test_consistency_f_test() -> None:
    # F_{0.995}(10, 10) = 5.847: a ratio of 6 is refused at alpha 0.01, 5.5 is not
    assert not consistent(Estimate(6.0, 10), Estimate(1.0, 10)).ok
    assert consistent(Estimate(5.5, 10), Estimate(1.0, 10)).ok
    assert not consistent(Estimate(1 / 6, 10), Estimate(1.0, 10)).ok  # two-sided: a drop is refused too
    assert consistent(Estimate(1.0, 10), None).ok  # nothing to compare with
    assert consistent(Estimate(1.0, 10), Estimate(1.0, 10)).p == pytest.approx(1.0)
    assert consistent(Estimate(0.01, 4), Estimate(0.0, 10)).ok  # a truncated (zero) estimate: not testable


def test_component_interval_known_answer() -> None:
    # launch variance 0.0004 (df 10) per variant, no repeat variance: var = 2 * 0.0004, t_10 = 2.228
    lo, hi, df = component_interval(1.0, Components(Estimate(0.0004, 10), Estimate(0.0, 0)), Design(1, 1), Design(1, 1))
    half = 2.228138851986274 * math.sqrt(0.0008)
    assert (lo, hi, df) == (pytest.approx(math.exp(-half)), pytest.approx(math.exp(half)), 10)
    # more launches narrow it by sqrt(n)
    components = Components(Estimate(0.0004, 10), Estimate(0.0, 0))
    lo3, hi3, _ = component_interval(1.0, components, Design(4, 1), Design(4, 1))
    assert math.log(hi3) == pytest.approx(half / 2)


def test_optimal_repeats_kalibera_jones() -> None:
    # r* = sqrt(c_L / c_R * s_R^2 / s_L^2) = sqrt(600 / 100 * 0.0016 / 0.0004) = sqrt(24) = 4.9 -> 5
    assert optimal_repeats(600, 100, Components(Estimate(0.0004, 5), Estimate(0.0016, 5))) == 5
    assert optimal_repeats(600, 100, Components(Estimate(0.0, 5), Estimate(0.0016, 5))) == 20  # the cap
    assert optimal_repeats(600, 100, Components(Estimate(0.0004, 5), Estimate(0.0, 5))) == 1


def test_optimal_design_known_answer() -> None:
    comps = Components(Estimate(0.0004, 10), Estimate(0.0001, 10))
    plan = optimal_design(comps, 600, 100, M)
    # r* = sqrt(6 * 0.25) = 1.2 -> 1; with r = 1: var = 2 * 0.0005 / n, t_{2(n-1)} sqrt(var) <= ln(1.05) / 2
    # n = 7: t_12 = 2.179, sqrt(0.001 / 7) = 0.01195 -> 0.0260 > 0.0244; n = 8: t_14 = 2.145 * 0.01118 = 0.0240
    assert plan is not None and plan.design == Design(8, 1) and plan.cost == 8 * 700
    assert optimal_design(Components(Estimate(0.04, 10), Estimate(0.0, 0)), 600, 100, M, max_launches=5) is None


def test_look_alpha() -> None:
    assert look_alpha(5) == pytest.approx(0.005) and look_alpha(0) == pytest.approx(0.025)


def test_pooled_ratio_ci_known_answer() -> None:
    from specbench.decide.stats import pooled_ratio_ci

    # units 1.0/1.1 (v_x = var / mean^2 = 0.005 / 1.1025) and 1.0/1.0 (v_y = 0); prior v 0.001 on 10 df
    x, y = [1.0, 1.1], [1.0, 1.0]
    vx = 0.005 / 1.05 ** 2
    v = (10 * 0.001 + 1 * vx + 0) / 12
    ci = pooled_ratio_ci(x, y, (0.001, 10))
    half = 2.178812829667228 * math.sqrt(v * (1 / 2 + 1 / 2))  # t_12(0.975)
    assert ci.df == 12
    assert (ci.low, ci.high) == (pytest.approx(1.05 * math.exp(-half)), pytest.approx(1.05 * math.exp(half)))
    assert pooled_ratio_ci(x, y, (0.001, 0)).df is None  # a prior without df: nothing to pool


def _aa_paths(looks: int, alpha_side: float, paths: int = 3000) -> float:
    """Fraction of A/A paths (true speedup 1) whose interval excludes 1 at some look; look k compares k + 1
    launch means a side (log CV 5%, variance known from a history of 1000 df)."""
    import numpy as np

    from specbench.decide.stats import pooled_ratio_ci

    rng = np.random.default_rng(7)
    misses = 0
    for _ in range(paths):
        x, y = np.exp(rng.normal(0, 0.05, looks + 1)), np.exp(rng.normal(0, 0.05, looks + 1))
        for k in range(1, looks + 1):
            ci = pooled_ratio_ci(x[:k + 1], y[:k + 1], (0.0025, 1000), confidence=1 - 2 * alpha_side)
            assert ci.low is not None and ci.high is not None
            if ci.low > 1 or ci.high < 1:
                misses += 1
                break
    return misses / paths


def test_alpha_spending_keeps_the_error_rate_however_often_one_looks() -> None:
    """Stopping at the first look that excludes 1: at 95% every look, the error rate of 6 looks is far above
    5% (two sides); at 2.5% / 6 per side it stays below 5% (union bound; seeded, so deterministic)."""
    naive, spent = _aa_paths(6, 0.025), _aa_paths(6, look_alpha(6))
    assert naive > 0.10 and spent <= 0.05


def test_optimal_design_counts_the_pooled_history_df() -> None:
    """With a history pooled into the launch means (launch+history), t has the history's df too: the
    cost-optimal design needs no more launches, and with a small run fewer (specbench plan)."""
    comps = Components(Estimate(0.02 ** 2, 4), Estimate(0.01 ** 2, 8))
    alone = optimal_design(comps, 600, 100, M)
    pooled = optimal_design(comps, 600, 100, M, prior_df=40)
    assert alone is not None and pooled is not None
    assert pooled.design.launches < alone.design.launches and pooled.cost < alone.cost

"""The family's level from how its claims co-vary (issue 50 item 1): decide/family.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specbench.decide import family
from specbench.decide.decision import ALPHA, Outcome, t_quantile
from specbench.decide.primary import family_outcome

DEMO = [family.ClaimShape(d, c, 4.0, 1, 1) for d in ("ngram", "draft") for c in (1, 4, 16)]
CALIBRATED = family.HistoryShape(launch_var=0.042**2, launch_df=2.0, repeat_var=0.01**2, repeat_df=4.0)


def test_one_launch_and_a_df2_history_spends_the_error_bonferroni_wastes() -> None:
    """The demo's table after one calibration: Bonferroni reads each claim at t_2(2.5% / 6) = 10.9; the
    claims share the history's launch estimate (one chi^2) and their launch effects, so the family's max is
    far closer to one claim's t_2(2.5%) = 4.3."""
    level = family.family_level(DEMO, ALPHA, None, CALIBRATED)
    assert level.method.startswith("max-t")
    assert t_quantile(2.0) < level.one < 6.0 < t_quantile(2.0, ALPHA / 6)
    assert level.one < level.two < t_quantile(2.0, ALPHA / 6)
    assert family.family_level(DEMO, ALPHA, None, CALIBRATED) == level  # seeded: the same every time


def test_launch_units_use_the_runs_sharing_at_its_lower_bound() -> None:
    claims = [family.ClaimShape(d, c, 6.0, 3, 3) for d in ("a", "b") for c in (1, 4)]
    shared = family.family_level(claims, ALPHA, family.Sharing(0.95, 200.0), None)
    weak = family.family_level(claims, ALPHA, family.Sharing(0.30, 200.0), None)
    assert "rho 0.90" in shared.method and "rho 0.15" in weak.method
    assert shared.one < weak.one  # less sharing: less dependence, a larger level
    unshown = family.family_level(claims, ALPHA, family.Sharing(0.6, 6.0), None)  # lower bound -0.28
    assert unshown.method.startswith("Bonferroni") and math.isnan(unshown.one)
    assert unshown.quantile(4.0) == pytest.approx(t_quantile(4.0, ALPHA / 4))


def test_mixed_regimes_fall_back_to_bonferroni() -> None:
    mixed = [family.ClaimShape("a", 1, 4.0, 3, 3), family.ClaimShape("b", 1, 4.0, 1, 1)]
    assert family.family_level(mixed, ALPHA, family.Sharing(0.99, 100.0), CALIBRATED).method.startswith("Bonferroni")
    assert family.family_level(DEMO, ALPHA, None, None).method.startswith("Bonferroni")  # one launch, no history


def test_launch_sharing_of_a_fully_shared_and_of_an_unshared_launch_effect() -> None:
    def windows(effects: list[float]) -> dict[tuple[int, int], float]:
        return {(la + 1, 1): 100.0 * e for la, e in enumerate(effects)}

    same = [windows([1.0, 1.1, 0.9]), windows([1.0, 1.1, 0.9])]
    got = family.launch_sharing([same])
    assert got is not None and got.rho == pytest.approx(1.0) and got.df == 2
    opposite = [windows([1.0, 1.1, 0.9]), windows([1.0, 0.9, 1.1])]
    got = family.launch_sharing([opposite, same])
    assert got is not None and got.df == 4 and got.rho < 0.1
    assert family.launch_sharing([[windows([1.0])]]) is None


def test_same_is_read_at_the_two_sided_level_adopt_at_the_one_sided() -> None:
    level = family.FamilyLevel(one=3.0, two=4.0, method="test")
    t = t_quantile(10.0)
    # half-width 0.03 at 95%: 0.03 * 3 / t at the one-sided level, 0.03 * 4 / t at the two-sided one
    lo, hi = math.exp(-0.03), math.exp(0.03)
    assert family_outcome(lo, hi, 10.0, level, math.exp(0.03 * 4 / t + 0.001)) is Outcome.NO_DIFFERENCE
    assert family_outcome(lo, hi, 10.0, level, math.exp(0.03 * 3.5 / t)) is Outcome.UNDECIDED
    up = math.exp(0.1)
    assert family_outcome(up * lo, up * hi, 10.0, level, math.exp(0.1 - 0.03 * 3 / t - 0.001)) is Outcome.ADOPT


def _model_max_t(history: family.HistoryShape, points: float, draws: int = 200_000) -> float:
    """The family's one-sided level for DEMO straight from the model at the history's own figures (the true
    repeat share): two drafters and the baseline, one launch each, the launch effect shared by a side's three
    levels, each level's repeats its own over `points` points, the history's two estimates on their df."""
    rng = np.random.default_rng(7)
    lv, rv = history.launch_var, history.repeat_var / points
    w_l = rng.chisquare(history.launch_df, draws) / history.launch_df
    w_r = rng.chisquare(history.repeat_df, draws) / history.repeat_df

    def side() -> np.ndarray:
        return math.sqrt(lv) * rng.standard_normal((draws, 1)) + math.sqrt(rv) * rng.standard_normal((draws, 3))

    base = side()
    t = np.hstack([(side() - base) / np.sqrt(2 * lv * w_l + 2 * rv * w_r)[:, None] for _ in range(2)])
    return float(np.quantile(t.max(axis=1), 1 - ALPHA))


def test_a_probe_history_is_not_read_below_its_own_models_level() -> None:
    """A probe's history (11 launches, df 10) with a small repeat share: the share taken at its lower bound
    (0) made a drafter's three levels one claim, and the level 2.59 fell below the model's own max-t at the
    history's figures (2.68): the demo's table was wrong in 3.7% of simulated runs at the margin. The level is
    the largest over the share's confidence interval (share_grid), so it holds at the true share."""
    probe = family.HistoryShape(launch_var=0.042**2, launch_df=10.0, repeat_var=0.01**2, repeat_df=11.0)
    grid = family.share_grid(probe)
    assert grid[0] == family.repeat_share(probe) < 0.054 < grid[-1]  # the true share 1e-4 / (1e-4 + 0.042^2)
    level = family.family_level(DEMO, ALPHA, None, probe)
    assert level.one >= _model_max_t(probe, 4.0) - 0.02  # the model's quantile, within its Monte Carlo error
    assert level.one < t_quantile(10.0, ALPHA / 6)  # still below Bonferroni: the shared errors are spent

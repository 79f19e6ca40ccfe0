"""The primary verdict (issue 41 item 5): the speedup over the workload's mix with its two-level interval
(decide/primary.py), one word per drafter and concurrency from it at the family's level, and the family stated."""

from __future__ import annotations

import math

import pytest
import scipy.stats

from specbench.decide import primary
from specbench.decide.decision import ALPHA, Outcome
from specbench.decide.intervals import LaunchVariance
from specbench.metrics.warnings import WarningCode
from specbench.report.decisions import family_text, legend, verdict_table
from tests.report.test_verdict import curve_rows, gate, run_data


def _launches(*effects: float, level: float = 100.0) -> dict[tuple[int, int], float]:
    return {(la + 1, 1): level * e for la, e in enumerate(effects)}


def test_a_launch_effect_shared_by_every_point_does_not_average_out() -> None:
    """Three points moved by the same launch effects: the mix interval is the one point's interval, not
    narrower by sqrt(3) as it would be if the points were independent."""
    effects = (1.0, 1.04, 0.97)
    one = primary.mix_interval([(1.0, _launches(*effects), _launches(1, 1, 1))], None)
    three = primary.mix_interval([(1.0, _launches(*effects, level=lv), _launches(1, 1, 1, level=lv))
                              for lv in (50.0, 100.0, 200.0)], None)
    assert three.points == 3 and three.df == pytest.approx(2.0)
    assert (three.low, three.high) == pytest.approx((one.low, one.high))
    ys = [math.log(100 * e) for e in effects]  # the launch units, y_l = mean over points of ln(launch mean)
    half = scipy.stats.t.ppf(0.975, 2) * math.sqrt(float(scipy.stats.tvar(ys)) / 3)
    assert math.log(three.high) == pytest.approx(half)


def test_one_launch_adds_the_history_launch_component_once_not_per_point() -> None:
    """One launch x 2 repeats per variant at 4 points: var = sum_p (s_p^2 / (2 m_p^2)) / 16 over both sides,
    plus 2 s_L^2 (both single launches, one estimate), not 2 s_L^2 / 4."""
    cal = LaunchVariance(rel_var=0.0016, df=2, source="h")
    w = {(1, 1): 99.0, (1, 2): 101.0}
    pts = [(1.2, {k: 1.2 * v for k, v in w.items()}, w) for _ in range(4)]
    got = primary.mix_interval(pts, cal)
    rep = (1.0 / 100.0) ** 2 * 2 / 2 / 16  # s^2 / (n m^2) = 2 / (2 x 100^2) per point and side, / P^2
    comps = [(rep, 1.0)] * 8 + [(2 * 0.0016, 2.0)]
    df = sum(v for v, _ in comps) ** 2 / sum(v * v / d for v, d in comps)
    half = scipy.stats.t.ppf(0.975, df) * math.sqrt(sum(v for v, _ in comps))
    assert got.speedup == pytest.approx(1.2) and got.df == pytest.approx(df)
    assert math.log(got.high / 1.2) == pytest.approx(half, rel=1e-6)
    assert primary.mix_interval(pts, None).high < got.high  # without a history: the repeats alone


def test_family_level_and_primary_outcome() -> None:
    assert primary.family_alpha(28) == pytest.approx(ALPHA / 28) and primary.family_alpha(6, looks=3) == ALPHA / 18
    # (1.10, 1.30) on 10 df clears 1.05 as one claim; re-drawn at 2.5% / 28 it no longer does
    assert primary.primary_outcome(1.10, 1.30, 10, 1, 1.05) is Outcome.ADOPT
    assert primary.primary_outcome(1.10, 1.30, 10, 28, 1.05) is Outcome.UNDECIDED
    assert primary.primary_outcome(math.nan, math.nan, math.nan, 1, 1.05) is Outcome.UNDECIDED


def _with_mix(rows: list[dict], low: float, high: float, df: float = 30.0) -> list[dict]:
    return [dict(r, mix_speedup=math.sqrt(low * high), mix_speedup_ci_low=low, mix_speedup_ci_high=high,
                 mix_speedup_ci_df=df, mix_points=2) for r in rows]


def test_the_table_word_comes_from_the_mix_interval_not_the_points() -> None:
    """Per-point intervals that would say "adopt: code" (one category decides, the other not) give one word
    from the mix interval; a gate on one point blocks the mix's adopt."""
    win, open_ = (1.3, 1.2, 1.4), (1.05, 0.98, 1.12)
    rows = _with_mix(curve_rows((win,), levels=(1,)) + curve_rows((open_,), levels=(1,), category="chat"),
                     1.08, 1.25) + _with_mix(curve_rows((open_,), levels=(4,)), 0.9, 1.2)
    t = verdict_table(run_data(rows))
    assert t is not None and t.columns == ["drafter", "C=1", "C=4"] and t.rows == [["spec", "adopt", "undecided"]]
    gated = [dict(r, warnings=gate(WarningCode.DRAFTER_INACTIVE)) if r["category"] == "chat" else r for r in rows]
    t = verdict_table(run_data(gated))
    assert t is not None and t.rows == [["spec", "blocked", "undecided"]]
    text = family_text(run_data(rows))
    assert text.startswith("Primary family: the table's 2 claims (1 drafter x concurrency)")
    assert "1.25% per side (2.5% / 2, Bonferroni (" in text and "exploratory" not in text
    assert "secondary claims" in legend(run_data(rows)) and "Holm" in legend(run_data(rows))


def test_the_family_narrows_what_one_claim_alone_would_adopt() -> None:
    """Twenty claims of the same interval: adopt as one claim (2 points, df 30), undecided in a family of 20."""
    rows = _with_mix(curve_rows(((1.2, 1.07, 1.33),), levels=(1,)), 1.07, 1.33)
    t = verdict_table(run_data(rows))
    assert t is not None and t.rows == [["spec", "adopt"]]
    many = [r for i in range(20) for r in _with_mix(curve_rows(((1.2, 1.07, 1.33),), levels=(1,), variant=f"d{i}"),
                                                       1.07, 1.33)]
    t = verdict_table(run_data(many))
    assert t is not None and {r[1] for r in t.rows} == {"undecided"}

"""The secondary claims (issue 41 item 5): the per-category lines are Holm-controlled within each drafter
(decide/secondary.py), their words come from the adjusted decision, and the report states the family."""

from __future__ import annotations

import math

import pytest

from specbench.decide.decision import Outcome, classify
from specbench.decide.secondary import holm, one_sided_p, secondary_family, secondary_outcomes
from specbench.report.decisions import legend, secondary_text
from specbench.report.verdict import drafter_verdict
from tests.report.test_verdict import UNCLEAR, WIN, curve_rows, plain, run_data, verdict

M = 1.05
NEAR = (1.2, 1.06, 1.36)  # clears 1.05 as one claim (df 30: p about 0.018), not in a family of 12


def test_holm_known_answer() -> None:
    """Holm (1979) at 5%: 0.01 <= 0.05/3 rejected; 0.03 > 0.05/2 stops the step-down, so 0.04 is kept too."""
    assert holm([0.01, 0.04, 0.03], 0.05) == [True, False, False]
    assert holm([0.01, 0.02, 0.04], 0.05) == [True, True, True]  # 0.01 <= .0167, 0.02 <= .025, 0.04 <= .05
    assert holm([math.nan, 0.01], 0.05) == [False, True]  # NaN: no hypothesis, not counted in the family


@pytest.mark.parametrize("iv", [(1.2, 1.4, 30.0), (1.06, 1.36, 30.0), (1.04, 1.36, 30.0), (0.97, 1.02, 4.0),
                                (0.6, 0.8, math.nan), (0.9, 1.2, 2.0), (0.93, 0.99, 8.0)])
def test_a_family_of_one_is_the_interval_itself(iv: tuple[float, float, float]) -> None:
    """One point: Holm at 2.5% per side is exactly the 95% interval's classification."""
    assert secondary_outcomes([iv], M) == [classify(iv[0], iv[1], M)]


def test_p_values_match_the_interval_edges() -> None:
    """An interval whose low end sits exactly at m has p(adopt) = 2.5%, on its own df."""
    df, half = 6.0, 0.1
    p = one_sided_p((M, M * math.exp(2 * half), df), M)
    assert p is not None and p[0] == pytest.approx(0.025)
    assert one_sided_p((math.nan, math.nan, 4.0), M) is None


def test_one_adopt_among_many_categories_is_not_a_claim_after_holm() -> None:
    """Twelve categories at C=1, one of them (1.06, 1.36): alone it says adopt (each line a test at 2.5%);
    in the drafter's family of 12 it is undecided, and the line says inconclusive."""
    rows = curve_rows((NEAR,), levels=(1,), category="c00", speedup_ci_df=30.0)
    for i in range(1, 12):
        rows += curve_rows((UNCLEAR,), levels=(1,), category=f"c{i:02d}", speedup_ci_df=30.0)
    text, _ = verdict(rows)
    assert "adopt **spec**" not in text and text.startswith("**spec** inconclusive on c00, c01, ")
    alone, _ = verdict(rows[:1])  # the same point as the drafter's only claim
    assert alone.startswith("adopt **spec** at every measured concurrency (up to 1) on c00")
    mine = run_data(rows).cells
    assert set(secondary_family(mine, M).values()) == {Outcome.UNDECIDED}


def test_clear_wins_survive_the_family() -> None:
    rows = [r for cat in ("a", "b", "c", "d") for r in curve_rows((WIN, WIN, UNCLEAR, UNCLEAR), category=cat)]
    text, _ = verdict(rows)
    assert text.startswith("adopt **spec** for concurrency ≤ 2 on a, b, c, d")


def test_the_report_states_the_secondary_family() -> None:
    rows = curve_rows((WIN, WIN), category="a") + curve_rows((WIN, UNCLEAR), category="b")
    data = run_data(rows)
    text = secondary_text(data)
    assert "each drafter's family is its 4 points with an interval" in text
    assert "Holm's step-down at 2.5% per side" in text
    assert "family-wise within each drafter's secondary family" in text
    assert text in legend(data)
    assert plain(drafter_verdict(data, "spec")[0]).startswith("adopt **spec**")


def test_holm_steps_down_to_the_full_level() -> None:
    """A point whose low end is just above m (p = 2.45%): adopt alone; undecided beside a like point (2.5% / 2
    at the first step); adopt again beside a clear win, which Holm rejects first, leaving 2.5% for it."""
    edge = (1.10, 1.051, 1.15)
    assert verdict(curve_rows((edge,), levels=(1,)))[0].startswith("adopt **spec**")
    assert verdict(curve_rows((edge, edge), levels=(1, 2)))[0].startswith("**spec** inconclusive on code")
    assert verdict(curve_rows((edge, WIN), levels=(1, 2)))[0].startswith(
        "adopt **spec** at every measured concurrency (up to 2) on code (interval above 1.05 at all 2 levels)")

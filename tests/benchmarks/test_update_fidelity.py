"""benchmarks/update_fidelity.py: S of issue 50's price line, `specbench update`'s words against the new head's
full matrix through the product's own functions (few trials, a fixed seed)."""

from __future__ import annotations

import pytest

from benchmarks import update_fidelity as uf
from benchmarks.decision_price import public_curve
from benchmarks.prediction_coverage import true_speedup
from specbench.metrics.forced_surface import Prediction


def test_tally_counts_decided_points_only() -> None:
    t = uf.Tally()
    for update, full in (("undecided", "adopt"), ("adopt", "adopt"), ("adopt", "undecided"), ("slower", "adopt"),
                         ("same", "slower")):
        t.add(update, full)
    assert (t.points, t.decided, t.same, t.full_undecided, t.opposite) == (5, 4, 1, 1, 1)
    assert t.s == 0.25 and t.share(t.decided, t.points) == 0.8


def test_head_a_is_on_the_public_curve() -> None:
    """r(C) puts head A's true speedup (window tail included) on the public K2.6 curve at every level."""
    setup = uf.k26_setup(2.4)
    assert sorted(setup.levels) == [1, 2, 4, 8, 16, 32]
    for c in setup.levels:
        assert true_speedup(setup, uf.AL_A, c, c, windows=uf.TRUTH_WINDOWS) == pytest.approx(public_curve(c), 1e-5)


def test_a_quiet_update_decides_every_level_with_the_full_matrixs_word() -> None:
    """Almost no noise (0.1% launch CVs, acceptance SD 0.01): the update decides every level of both heads, one
    slower than the baseline everywhere (AL 1.5) and one faster (AL 2.8), each with the full matrix's word; a
    prediction from the wrong acceptance or the wrong step cost would give the other direction."""
    quiet = 0.01
    assert all(true_speedup(uf.k26_setup(1.5, quiet), 1.5, c, c, 200) < 0.9 for c in (1, 32))
    f = uf.fidelity(2, 0, (1.5, 2.8), acceptance_sd=quiet, baseline_cv=0.001, drafter_cv=0.001)
    t = f.pooled()
    assert t.points == 2 * 2 * 6 and t.decided == t.points and t.same == t.decided and t.opposite == 0
    assert 0 <= f.pooled(1.5).s == 1.0 and f.pooled(2.8).s == 1.0
    assert "the full matrix's words on 100.0% of 24 decided points (power 100.0% of 24" in uf.last_line(f)


def test_noisy_s_is_a_share_with_decided_points() -> None:
    f = uf.fidelity(2, 1)
    t = f.pooled()
    assert t.points == 2 * 2 * 6 and 0 < t.decided <= t.points
    assert 0.0 <= t.s <= 1.0 and t.same + t.full_undecided + t.opposite <= t.decided


def test_wrong_is_the_word_the_truth_contradicts() -> None:
    assert uf.wrong("adopt", 1.04) and uf.wrong("adopt", 1.05) and not uf.wrong("adopt", 1.06)
    assert uf.wrong("slower", 1.0) and not uf.wrong("slower", 0.99)
    assert uf.wrong("same", 1.06) and uf.wrong("same", 0.94) and not uf.wrong("same", 0.97)
    assert not uf.wrong("undecided", 0.5) and not uf.wrong("adopt", float("nan"))


def test_tally_counts_the_truth_coverage_and_a_second_full_matrix() -> None:
    t = uf.Tally()
    t.add("adopt", "undecided", 1.2, Prediction(1.2, 1.1, 1.3, False), "adopt")  # right, covered
    t.add("adopt", "adopt", 1.02, Prediction(1.2, 1.1, 1.3, False), "adopt")  # wrong, not covered
    t.add("undecided", "slower", 1.02, None, "undecided")  # the full matrix wrong again; no prediction
    assert (t.decided, t.wrong, t.full_decided, t.full_wrong) == (2, 1, 2, 2)
    assert (t.predicted, t.covered, t.aa_decided, t.aa_same) == (2, 1, 2, 1)


def test_the_aa_stream_leaves_the_other_figures_and_repeats_a_quiet_word() -> None:
    """The second full matrix draws from its own stream: S and the rest do not move with it; almost no noise,
    it repeats the first's every word, and the truth contradicts no word."""
    quiet = 0.01
    args = (2, 0, (1.5, 2.8), quiet, 0.001, 0.001)
    with_aa, without = uf.fidelity(*args, aa=True), uf.fidelity(*args)
    t = with_aa.pooled()
    assert (t.aa_decided, t.aa_same, t.wrong, t.full_wrong) == (24, 24, 0, 0)
    assert uf.last_line(with_aa) == uf.last_line(without)
    assert "wrong 0.0% (the full matrix 0.0% of its 24)" in uf.last_line(without)
    assert "first's words on 100.0% of its 24 decided points" in uf.aa_line(with_aa)

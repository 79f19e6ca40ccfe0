"""Break-even, the adaptive stopping rule and the acceptance helpers on worked-out answers: each expected
value below is computed by hand from the formula in docs/metrics.md, never by calling specbench."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from specbench.decide import stats
from specbench.decide.adaptive import ADAPTIVE_MIN_REPEATS
from specbench.decide.crossing import BreakEven, break_even
from specbench.metrics import adaptive_done, break_even_table, draft_acceptance_length, tau_from_counters

NAN = math.nan


# -- stats.break_even ---------------------------------------------------------------------------------------
def test_crossing_interpolated_in_log2_concurrency() -> None:
    # between (4, 1.2) and (16, 0.8): log2 C* = 2 + 0.2 / 0.4 * 2 = 3 -> C* = 8
    be = break_even([1, 4, 16], [1.5, 1.2, 0.8])
    assert be == BreakEven("pays_up_to", pytest.approx(8.0), None, None, "pays up to C≈8.0 (no interval)")


def test_crossing_formats_large_concurrency_without_decimals() -> None:
    # between (8, 1.5) and (32, 0.5): log2 C* = 3 + 0.5 / 1.0 * 2 = 4 -> C* = 16
    assert break_even([8, 32], [1.5, 0.5]).verdict == "pays up to C≈16 (no interval)"
    # exactly 10 is already "large": 2 ** (log2 5 + 1) = 10 between (5, 2.0) and (20, 0.0): t = 0.5
    assert break_even([5, 20], [2.0, 0.0]).verdict == "pays up to C≈10 (no interval)"
    assert break_even([1, 4], [1.5, 0.5]).verdict == "pays up to C≈2.0 (no interval)"


def test_speedup_exactly_one_still_pays_and_crossing_needs_a_drop_below_one() -> None:
    be = break_even([1, 2, 4], [1.0, 1.0, 1.0])
    assert (be.status, be.verdict) == ("pays_everywhere", "pays at all 3 measured levels (beyond the sweep; "
                                                          "no interval)")
    # 1.0 at the lowest level is not "never pays"
    assert break_even([1, 2], [1.0, 0.5]).status == "pays_up_to"
    # below 1.0 at the lowest level only: not "never pays" (the words must hold at every level)
    assert break_even([1, 2], [0.99, 1.5]).verdict == ("inconclusive: speedup 0.99 at C=1, but below 1.0 at only "
                                                       "1 of 2 levels")


def test_not_monotone_names_the_next_level_at_or_above_one() -> None:
    be = break_even([1, 2, 4, 8, 16], [1.4, 0.9, 1.0, 1.2, 0.5])
    assert be.status == "pays_up_to"
    assert be.verdict.endswith("; not monotone: >= 1.0 again at C=4")
    # a later level that only equals the crossing's right end is not "again"; one below 1.0 neither
    assert "not monotone" not in break_even([1, 2, 4], [1.4, 0.9, 0.95]).verdict


def test_intervals_set_uncertain_from_and_last_confident() -> None:
    # C=1 clear above 1, C=2 clear above 1, C=4 interval touches 1.0 exactly (lo == 1.0 counts as uncertain)
    be = break_even([1, 2, 4, 8], [1.5, 1.3, 1.1, 0.8], [1.4, 1.2, 1.0, 0.7], [1.6, 1.4, 1.2, 0.9])
    assert (be.status, be.uncertain_from, be.last_confident) == ("pays_up_to", 4, 2)
    assert be.verdict.startswith("pays up to C≈") and "(interval crosses 1.0 between 2 and 4)" in be.verdict
    # levels without an interval are skipped, not treated as uncertain
    be = break_even([1, 2, 4], [1.5, 1.3, 1.2], [1.2, NAN, 1.1], [1.8, NAN, 1.3])
    assert (be.status, be.uncertain_from, be.last_confident) == ("pays_everywhere", None, 4)
    assert be.verdict == "pays at all 3 measured levels (beyond the sweep; interval above 1.0 at every level " \
                         "with an interval)"


def test_lowest_level_interval_decides_inconclusive_and_never() -> None:
    be = break_even([1, 2], [1.2, 1.3], [1.0, 1.2], [1.4, 1.4])  # lo == 1.0: contains 1.0
    assert be == BreakEven("inconclusive", None, 1, None,
                           "inconclusive: interval contains 1.0 at C=1 (below 1.0 at 0 of 2 levels)")
    be = break_even([1, 2], [0.9, 1.3], [0.8, 1.2], [1.0, 1.4])  # hi == 1.0: contains 1.0
    assert be.status == "inconclusive"
    be = break_even([1, 2], [0.8, 0.7], [0.7, 0.6], [0.9, 0.8])
    assert be == BreakEven("never_pays", None, 1, None, "never pays: interval below 1.0 at all 2 measured levels")


def test_contains_one_from_the_start_note() -> None:
    # the lowest level is clear above 1.0 only by its point estimate (no interval there); C=2 contains it
    be = break_even([1, 2, 4], [1.3, 1.1, 0.9], [NAN, 0.95, 0.8], [NAN, 1.2, 1.0])
    assert (be.uncertain_from, be.last_confident) == (2, None)
    assert "(interval contains 1.0 from C=2)" in be.verdict


def test_no_data_and_bad_lengths() -> None:
    assert break_even([1, 2], [NAN, NAN]) == BreakEven("no_data", None, None, None,
                                                      "no data: no valid speedup at any level")
    assert break_even([0, 2], [1.5, 0.5]).status == "never_pays"  # concurrency 0 is skipped
    with pytest.raises(ValueError, match="^concurrency, speedup and interval bounds must have the same length$"):
        break_even([1, 2], [1.0])
    with pytest.raises(ValueError, match="same length"):
        break_even([1, 2], [1.0, 1.0], [1.0], [1.0, 1.0])


# -- metrics.break_even_table ---------------------------------------------------------------------------------
def cells(rows: list[tuple]) -> pd.DataFrame:
    out = []
    for variant, category, out_len, c, s, lo, hi in rows:
        out.append({"variant": variant, "category": category, "input_len": NAN, "output_len": out_len,
                    "temperature": 0.0, "concurrency": c, "speedup": s, "speedup_ci_low": lo,
                    "speedup_ci_high": hi, "is_baseline": variant == "base"})
    return pd.DataFrame(out)


def test_break_even_table_rows_per_curve() -> None:
    df = cells([("base", "code", 64, 1, 1.0, NAN, NAN), ("base", "code", 64, 4, 1.0, NAN, NAN),
                ("spec", "code", 64, 16, 0.8, 0.7, 0.9), ("spec", "code", 64, 4, 1.2, 1.1, 1.3),
                ("spec", "code", 64, 1, 1.5, 1.4, 1.6), ("spec", "chat", 64, 1, 0.9, NAN, NAN),
                ("spec", "chat", 64, 2, 0.8, NAN, NAN)])
    for t in (break_even_table(df, "base"), break_even_table(df)):  # by name, or by the is_baseline column
        assert list(t.columns) == ["variant", "category", "input_len", "output_len", "temperature",
                                   "break_even_concurrency", "status", "verdict", "uncertain_from",
                                   "last_confident"]
        assert list(t.category) == ["chat", "code"]  # sorted; the baseline has no row
        chat, code = t.iloc[0], t.iloc[1]
        assert chat.status == "never_pays" and math.isnan(chat.break_even_concurrency)
        assert math.isnan(chat.uncertain_from) and math.isnan(chat.last_confident)
        assert code.status == "pays_up_to" and code.break_even_concurrency == pytest.approx(8.0)  # as above
        assert (code.uncertain_from, code.last_confident) == (16, 4)
        assert math.isnan(code.input_len) and code.output_len == 64
    empty = break_even_table(pd.DataFrame())
    assert empty.empty and list(empty.columns) == list(break_even_table(df).columns)


def test_break_even_table_baseline_by_name_overrides_the_column() -> None:
    # comparing against another variant: "spec" is the reference and gets no row, "base" does
    df = cells([("base", "code", 64, 1, 1.0, NAN, NAN), ("spec", "code", 64, 1, 1.5, NAN, NAN)])
    assert list(break_even_table(df, "spec").variant) == ["base"]


def test_break_even_table_uses_the_interval_high_end() -> None:
    # every point below 1.0, but the interval at C=4 reaches above it: not "never pays"
    df = cells([("spec", "code", 64, 1, 0.8, 0.7, 0.9), ("spec", "code", 64, 4, 0.95, 0.85, 1.05)])
    row = break_even_table(df).iloc[0]
    assert row.status == "inconclusive" and row.uncertain_from == 1


def test_break_even_table_undefined_fields_are_nan_columns() -> None:
    # a single curve that never pays: no concurrency, no level; the columns are floats with NaN, not None
    t = break_even_table(cells([("spec", "code", 64, 1, 0.8, 0.7, 0.9), ("spec", "code", 64, 4, 0.5, 0.4, 0.6)]))
    for col in ("break_even_concurrency", "last_confident"):
        assert t[col].dtype == float and math.isnan(t[col].iloc[0])
    # pays everywhere with every interval above 1.0: no uncertain level
    t = break_even_table(cells([("spec", "code", 64, 1, 1.5, 1.4, 1.6)]))
    assert t.uncertain_from.dtype == float and math.isnan(t.uncertain_from.iloc[0])


def test_break_even_table_of_baselines_only_keeps_its_columns() -> None:
    t = break_even_table(cells([("base", "code", 64, 1, 1.0, NAN, NAN)]))
    assert t.empty and list(t.columns) == list(break_even_table(pd.DataFrame()).columns)


# -- adaptive stopping ---------------------------------------------------------------------------------------
def test_adaptive_done_needs_seven_finite_windows() -> None:
    """Issue 33 item 6: stopping at 3 windows stopped where s was small by chance (coverage 0.90-0.915)."""
    assert ADAPTIVE_MIN_REPEATS == 7
    assert not adaptive_done([100.0] * 6, 0.5)
    assert not adaptive_done([100.0, 100.0, 100.0], 0.5)  # the former rule stopped here
    assert not adaptive_done([100.0] * 6 + [NAN], 0.5)
    assert adaptive_done([100.0] * 7, 0.0)  # identical windows: zero width, done at any target
    assert adaptive_done([100.0] * 3 + [NAN] + [100.0] * 4, 0.0)


def test_adaptive_done_compares_the_relative_half_width() -> None:
    xs = [90.0, 100.0, 110.0, 95.0, 105.0, 98.0, 102.0]
    lo, hi = stats.mean_ci(xs, confidence=0.95).bounds  # Student t on 6 df
    assert lo is not None and hi is not None
    half = (hi - lo) / 2 / 100.0  # mean 100
    assert half == pytest.approx(2.446912 * float(np.std(xs, ddof=1)) / math.sqrt(7) / 100.0, rel=1e-5)
    assert 0 < half < 0.2
    assert adaptive_done(xs, half) and adaptive_done(xs, half * 1.01)
    assert not adaptive_done(xs, half * 0.99)
    # the confidence level is honoured: a 50% interval is narrower than the 95% one
    lo50, hi50 = stats.mean_ci(xs, confidence=0.5).bounds
    assert lo50 is not None and hi50 is not None
    assert adaptive_done(xs, (hi50 - lo50) / 2 / 100.0, confidence=0.5)
    assert not adaptive_done(xs, (hi50 - lo50) / 2 / 100.0)


def test_adaptive_done_zero_mean_is_never_done() -> None:
    assert not adaptive_done([0.0] * 7, 1.0)
    assert not adaptive_done([0.5] * 7, -1.0)  # a target below zero is never met
    # a mean below 1 (slow windows, in tok/s) is a mean like any other
    assert adaptive_done([0.5] * 7, 0.0)


# -- acceptance helpers ------------------------------------------------------------------------------------
def test_tau_and_draft_acceptance_length_edges() -> None:
    assert tau_from_counters(10.0, 9.0) == 10.0  # one target step for 10 tokens
    assert tau_from_counters(120.0, 60.0) == 2.0
    assert math.isnan(tau_from_counters(10.0, 10.0)) and math.isnan(tau_from_counters(NAN, 1.0))
    assert draft_acceptance_length(3.0, 1.0) == 4.0  # one draft step that accepted 3
    assert draft_acceptance_length(0.5, 0.5) == 2.0  # fractional deltas are valid
    assert math.isnan(draft_acceptance_length(3.0, 0.0)) and math.isnan(draft_acceptance_length(NAN, 2.0))
    assert math.isnan(draft_acceptance_length(3.0, NAN))


def test_per_position_from_one_step_histograms() -> None:
    from specbench.metrics.acceptance import _per_position_from_histograms as per_position

    # one verify step that accepted its single draft: position 0 accepted with probability 1
    assert per_position([[0, 1]]) == [1.0]
    # H = [2, 1, 1] over 4 steps: P(pos 0) = (1 + 1) / 4, P(pos 1) = 1 / 4
    assert per_position([[2, 1], None, [0, 0, 1]]) == [0.5, 0.25]
    assert per_position([[5]]) is None and per_position([[0, 0]]) is None and per_position([None, []]) is None


def test_never_pays_is_decided_under_the_drafters_family() -> None:
    """Issue 50 item 6: every level's 95% interval just below 1.0 reads "never pays" per point; at the drafter's
    family level (here Bonferroni over its 24 points) the re-drawn intervals reach 1.0, so it is not said. A
    variant without a level keeps its per-point reading, labelled so."""
    from specbench.decide.family import bonferroni

    df = cells([("spec", "code", 64, 1, 0.95, 0.91, 0.99), ("spec", "code", 64, 4, 0.94, 0.90, 0.985)])
    df["speedup_ci_df"] = 10.0
    per_point = break_even_table(df).iloc[0]
    assert per_point.status == "never_pays"
    assert per_point.verdict.endswith("(per point: 95% intervals, not family-wise)")
    family = break_even_table(df, levels={"spec": bonferroni(24, 0.025, "test")}).iloc[0]
    assert family.status == "inconclusive" and "per point" not in family.verdict
    far = cells([("spec", "code", 64, 1, 0.6, 0.55, 0.65), ("spec", "code", 64, 4, 0.5, 0.45, 0.55)])
    far["speedup_ci_df"] = 10.0
    assert break_even_table(far, levels={"spec": bonferroni(24, 0.025, "test")}).iloc[0].status == "never_pays"

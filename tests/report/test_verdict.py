"""The verdict sentences, each from a speedup curve whose right answer is known by construction: a level
is a win when its interval is clear above 1.0, a loss when clear below, unclear when it straddles 1.0.
Includes a run whose two output lengths disagree (the conservative combination and its note)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench.metrics.warnings import CellWarning, WarningCode, encode_warnings
from specbench.report.derived import RunData
from specbench.report.document import Strong
from specbench.report.verdict import curve_outcome, drafter_verdict, level_call

WIN, LOSE, UNCLEAR = (1.3, 1.2, 1.4), (0.7, 0.6, 0.8), (1.02, 0.95, 1.09)
LEVELS = (1, 2, 4, 8)


def curve_rows(calls: tuple, *, variant: str = "spec", category: str = "code", output_len: int = 64,
               levels: tuple[int, ...] = LEVELS, intervals: bool = True, **extra: Any) -> list[dict]:
    """One row per level; `extra` overrides any column (input_len, interval_unit, launches, warnings ...)."""
    rows = []
    for c, (s, lo, hi) in zip(levels, calls):
        rows.append({"variant": variant, "category": category, "input_len": math.nan, "output_len": output_len,
                     "temperature": 0.0, "concurrency": c, "valid": True, "speedup": s,
                     "speedup_ci_low": lo if intervals else math.nan, "speedup_ci_high": hi if intervals else math.nan,
                     "interval_unit": "launch", "launches": 3, "launch_cv": 0.05, **extra})
    return rows


def plain(parts: list) -> str:
    return "".join(f"**{p.text}**" if isinstance(p, Strong) else str(p) for p in parts)


def verdict(rows: list[dict], break_even: pd.DataFrame | None = None, status: str = "done",
            config: dict | None = None, environment: dict | None = None) -> tuple[str, str]:
    """The verdict line as plain text (bold as **x**) and its tone; the usual launch basis cut off."""
    data = RunData(path=Path("."), meta={"baseline": "base", "variants": {"spec": {"status": status}}},
                   environment=environment or {}, config=config or {}, fairness=None, cells=pd.DataFrame(rows),
                   break_even=break_even if break_even is not None else pd.DataFrame())
    parts, tone = drafter_verdict(data, "spec")
    text = plain(parts)
    return (text[:-len(BASIS)] if text.endswith(BASIS) else text), tone


BASIS = " (3 launches per variant; between-launch CV 5.0%, measured and in every interval)"


def test_adopt_up_to_a_level_baseline_wins_above() -> None:
    text, tone = verdict(curve_rows((WIN, WIN, UNCLEAR, LOSE)))
    assert text == ("adopt **spec** for concurrency ≤ 2 on code (interval above 1.05 at 2 of 4 levels); "
                    "baseline wins above")
    assert tone == "good"


def test_adopt_up_to_a_level_no_clear_winner_above() -> None:
    text, _ = verdict(curve_rows((WIN, WIN, UNCLEAR, UNCLEAR)))
    assert text == ("adopt **spec** for concurrency ≤ 2 on code (interval above 1.05 at 2 of 4 levels); "
                    "no clear winner above")


def test_adopt_everywhere() -> None:
    text, tone = verdict(curve_rows((WIN, WIN, WIN, WIN)))
    assert text == ("adopt **spec** at every measured concurrency (up to 8) on code (interval above 1.05 at all 4 "
                    "levels)") and tone == "good"


def test_mixed_wins_not_from_the_lowest_level() -> None:
    text, tone = verdict(curve_rows((UNCLEAR, WIN, UNCLEAR, LOSE)))
    assert text == ("no consistent result for **spec** on code: speedup clears 1.05 only at "
                    "concurrency 2, below 1.0 at 8")
    assert tone == "warn"
    text, _ = verdict(curve_rows((UNCLEAR, WIN, WIN, UNCLEAR)))
    assert text.endswith("only at concurrency 2, 4")  # no loss: no "below it"


def test_inconclusive_says_where_the_baseline_wins() -> None:
    text, tone = verdict(curve_rows((UNCLEAR, UNCLEAR, LOSE, LOSE)))
    assert text == ("**spec** inconclusive on code: no clear win (speedup 0.70–1.02; 2 of 4 levels undecided, "
                    "interval reaching below 1.05); baseline wins at concurrency 4, 8")
    assert tone == "warn"


def test_inconclusive_without_losses_asks_for_repeats() -> None:
    text, _ = verdict(curve_rows((UNCLEAR, UNCLEAR)))
    assert text == ("**spec** inconclusive on code: no clear win (speedup 1.02; all 2 levels undecided, "
                    "interval reaching below 1.05); more launches or repeats would decide")


def test_never_pays() -> None:
    text, tone = verdict(curve_rows((LOSE, (0.5, 0.45, 0.55))))
    assert text == "**spec** never pays: speedup **0.50–0.70**, below 1.0 at all 2 measured points; do not adopt"
    assert tone == "bad"


def test_output_lengths_that_disagree_give_the_conservative_result_and_say_so() -> None:
    """out=64 pays up to C=4, out=256 only up to C=2: the category gets the lower limit, and the note."""
    rows = curve_rows((WIN, WIN, WIN, LOSE), output_len=64) + curve_rows((WIN, WIN, UNCLEAR, LOSE), output_len=256)
    text, _ = verdict(rows)
    assert text == ("adopt **spec** for concurrency ≤ 2 on code (interval above 1.05 at 5 of 8 levels); baseline "
                    "wins above (where output lengths disagree, the most conservative result; see the break-even "
                    "table)")
    # the same two lengths agreeing: no note
    rows = curve_rows((WIN, WIN, UNCLEAR, LOSE), output_len=64) + curve_rows((WIN, WIN, UNCLEAR, LOSE), output_len=256)
    assert "disagree" not in verdict(rows)[0]
    # one length never pays, the other pays everywhere: "never" wins the combination, but the sentence must
    # not claim a speedup below 1.0 everywhere (it is 1.30 at out=256)
    rows = curve_rows((LOSE, LOSE, LOSE, LOSE), output_len=64) + curve_rows((WIN, WIN, WIN, WIN), output_len=256)
    text, tone = verdict(rows)
    assert text == ("**spec** never pays on code at some output length (speedup 0.70–1.30 across lengths) (where "
                    "output lengths disagree, the most conservative result; see the break-even table)")
    assert "every measured" not in text and tone == "warn"


def test_categories_are_grouped_and_ordered_best_first() -> None:
    rows = curve_rows((LOSE, LOSE), category="chat") + curve_rows((WIN, WIN), category="code") + \
        curve_rows((WIN, LOSE), category="math")
    text, tone = verdict(rows)
    assert text == ("adopt **spec** at every measured concurrency (up to 2) on code (interval above 1.05 at all 2 "
                    "levels); adopt **spec** for concurrency ≤ 1 on math (interval above 1.05 at 1 of 2 levels); "
                    "baseline wins above; **spec** never pays on chat: speedup 0.70, below 1.0 at all 2 measured "
                    "levels")
    assert tone == "warn"


def test_single_repeat_is_indicative_only() -> None:
    text, _ = verdict(curve_rows(((1.3, 0, 0), (1.2, 0, 0), (0.9, 0, 0)), intervals=False))
    # no interval: the point estimates decide, worded as observations, never as advice
    assert text == ("**spec** looks faster for concurrency ≤ 2 on code (point estimate above 1.05 at 2 of 3 levels); "
                    "baseline looks faster above (indicative only: some points have no interval (e.g. a single "
                    "repeat); 3 launches per variant; between-launch CV 5.0%, measured and in every interval)")


def test_each_reason_for_indicative_is_said_once() -> None:
    """Issue 23 item 12: one launch, no calibration and a single repeat gave "(... a single repeat: indicative
    only) (indicative only: 1 launch per variant ...)". One parenthesis, one "indicative only"."""
    rows = curve_rows(((1.3, 0, 0), (1.2, 0, 0)), intervals=False, interval_unit="repeat", launches=1,
                      launch_cv=math.nan)
    text, _ = verdict(rows)
    assert text.count("indicative only") == 1 and text.count("single repeat") == 1
    assert text.endswith(" levels) (indicative only: some points have no interval (e.g. a single repeat); 1 launch "
                         "per variant and no calibration for this hardware, so the "
                         "variance between launches (about 25% on a shared 2-core CPU) is not in the intervals; "
                         "set sweep.launches >= 2 or run `specbench calibrate`)")


def test_no_practical_difference_everywhere() -> None:
    same = (0.99, 0.97, 1.02)
    text, tone = verdict(curve_rows((same, same, same)))
    assert text == ("**spec**: no practical difference on code (interval inside [0.952, 1.05] at all 3 levels; "
                    "speedup 0.99): not worth adopting")
    assert tone == "warn"


def test_no_practical_difference_on_some_lengths_counts_only_those_levels() -> None:
    """Issue 33 item 6: one length "same" at every level, the other adopting: the combined statement said
    "at all 6 levels" (the curves' points summed) though only 3 were "same"."""
    same = (0.99, 0.97, 1.02)
    rows = curve_rows((same, same, same), output_len=64) + curve_rows((WIN, WIN, WIN), output_len=256)
    text, _ = verdict(rows)
    assert "no practical difference on code (interval inside [0.952, 1.05] at 3 of 6 levels;" in text
    assert "all 6" not in text


def test_a_verdict_margin_changed_after_the_run_is_said() -> None:
    """Issue 33 item 6: verdict.min_speedup is outside the config hash; a report re-rendered with another
    margin than run.json recorded at the start says so, above the verdict."""
    from specbench.report.document import Paragraph
    from specbench.report.summary import settings_note, verdict_section

    def data(started: dict | None, now: float) -> RunData:
        meta = {"baseline": "base", "variants": {"spec": {"status": "done"}},
                **({"verdict": started} if started else {})}
        return RunData(path=Path("."), meta=meta, environment={}, config={"verdict": {"min_speedup": now}},
                       fairness=None, cells=pd.DataFrame(curve_rows((WIN, WIN))), break_even=pd.DataFrame())

    assert settings_note(data({"min_speedup": 1.05}, 1.05)) == ""
    assert settings_note(data(None, 1.02)) == ""  # a run from before the record: nothing to compare
    note = settings_note(data({"min_speedup": 1.05}, 1.02))
    assert "uses verdict.min_speedup 1.02; the run was started with 1.05" in note
    first = verdict_section(data({"min_speedup": 1.05}, 1.02))[1]
    assert isinstance(first, Paragraph) and first.tone == "warn"


def test_break_even_crossing_limits_the_adoption() -> None:
    """break_even.csv says the curve crosses 1.0 at C=3: a win measured at 4 does not extend adoption."""
    be = pd.DataFrame([{"variant": "spec", "category": "code", "input_len": math.nan, "output_len": 64,
                        "temperature": 0.0, "status": "pays_up_to", "break_even_concurrency": 3.0}])
    text, _ = verdict(curve_rows((WIN, WIN, WIN, LOSE)), be)
    assert text == ("adopt **spec** for concurrency ≤ 2 on code (interval above 1.05 at 3 of 4 levels); "
                    "baseline wins above")


def test_failed_and_unmeasured_variants() -> None:
    rows = curve_rows((WIN,))
    data = RunData(path=Path("."), meta={"variants": {"spec": {"status": "failed", "reason": "OOM at startup"}}},
                   environment={}, config={}, fairness=None, cells=pd.DataFrame(rows), break_even=pd.DataFrame())
    parts, tone = drafter_verdict(data, "spec")
    assert parts[1] == " failed: no verdict (OOM at startup)" and tone == "bad"
    invalid = [dict(r, valid=False) for r in rows]
    text, tone = verdict(invalid)
    assert text == "**spec**: no valid measurements (status done)" and tone == "warn"


@pytest.mark.parametrize("s, lo, hi, call", [
    (1.5, 1.01, 2.0, "win"), (1.5, 1.0, 2.0, "unclear"), (0.5, 0.1, 0.99, "lose"), (0.5, 0.1, 1.0, "unclear"),
    (1.1, math.nan, math.nan, "win"), (0.9, math.nan, math.nan, "lose"), (1.0, math.nan, math.nan, "unclear"),
    (math.nan, math.nan, math.nan, "unclear"), (0.5, 1.01, 2.0, "win"),  # the interval decides, not the value
])
def test_level_call_boundaries(s, lo, hi, call) -> None:
    assert level_call(s, lo, hi, min_speedup=1.0) == call  # verdict.min_speedup = 1.0: significance alone


def test_curve_outcome_fields() -> None:
    o = curve_outcome(pd.DataFrame(curve_rows((WIN, UNCLEAR, LOSE, (0.5, 0.4, 0.6)))))
    assert (o.kind, o.limit, o.max_concurrency, o.beaten_above) == ("adopt_upto", 1, 8, True)
    assert (o.wins, o.losses, o.has_intervals) == ((1,), (4, 8), True)
    assert (o.speedup_min, o.speedup_max) == (0.5, 1.3)


def be_row(status: str, at: float = math.nan, variant: str = "spec", category: str = "code",
           output_len: int = 64) -> dict:
    return {"variant": variant, "category": category, "input_len": math.nan, "output_len": output_len,
            "temperature": 0.0, "status": status, "break_even_concurrency": at}


def test_break_even_status_decides_the_kind() -> None:
    unclear = curve_rows((UNCLEAR, UNCLEAR))
    # the words follow what the levels show: a status that the intervals do not support decides nothing
    undecided = ("**spec** inconclusive on code: no clear win (speedup 1.02; all 2 levels undecided, interval "
                 "reaching below 1.05); more launches or repeats would decide")
    assert verdict(unclear, pd.DataFrame([be_row("never_pays")]))[0] == undecided
    assert verdict(unclear, pd.DataFrame([be_row("pays_everywhere")]))[0] == undecided
    # "no_data" says nothing: the levels decide (all clear losses: never)
    text, _ = verdict(curve_rows((LOSE, LOSE)), pd.DataFrame([be_row("no_data")]))
    assert text.startswith("**spec** never pays: speedup **0.70**")
    text, _ = verdict(curve_rows((WIN, WIN)), pd.DataFrame([be_row("no_data")]))
    assert text == ("adopt **spec** at every measured concurrency (up to 2) on code (interval above 1.05 at all 2 "
                    "levels)")


def test_break_even_row_of_the_same_curve_only() -> None:
    """Rows of another variant, category or output length must not be read for this curve."""
    curve = curve_rows((WIN, WIN, UNCLEAR, UNCLEAR))
    others = [be_row("pays_up_to", 1.5, variant="other"), be_row("pays_up_to", 1.5, category="chat"),
              be_row("never_pays", output_len=256)]
    # its own row (pays_everywhere) does not outvote its levels: adoption stops where the intervals do
    text, _ = verdict(curve, pd.DataFrame(others + [be_row("pays_everywhere")]))
    assert text == ("adopt **spec** for concurrency ≤ 2 on code (interval above 1.05 at 2 of 4 levels); "
                    "no clear winner above")
    text, _ = verdict(curve, pd.DataFrame(others))  # no row of its own: the levels decide
    assert text == ("adopt **spec** for concurrency ≤ 2 on code (interval above 1.05 at 2 of 4 levels); "
                    "no clear winner above")


def test_crossing_exactly_at_a_measured_level() -> None:
    # wins at 1, 2, 4 but break_even.csv puts the crossing at C=2.0: adopt only below it, at 1
    be = pd.DataFrame([be_row("pays_up_to", 2.0)])
    text, _ = verdict(curve_rows((WIN, WIN, WIN, LOSE)), be)
    assert text == ("adopt **spec** for concurrency ≤ 1 on code (interval above 1.05 at 3 of 4 levels); "
                    "baseline wins above")
    # a crossing below the lowest level leaves no adoption at all
    text, _ = verdict(curve_rows((WIN, WIN, WIN, LOSE)), pd.DataFrame([be_row("pays_up_to", 0.5)]))
    assert text.startswith("no consistent result for **spec** on code")


def test_groups_with_higher_limits_come_first() -> None:
    rows = curve_rows((WIN, UNCLEAR, UNCLEAR, UNCLEAR), category="a") + \
        curve_rows((WIN, WIN, WIN, UNCLEAR), category="b") + curve_rows((WIN, WIN, UNCLEAR, UNCLEAR), category="c")
    text, tone = verdict(rows)
    assert text == ("adopt **spec** for concurrency ≤ 4 on b (interval above 1.05 at 3 of 4 levels); no clear "
                    "winner above; adopt **spec** for concurrency ≤ 2 on c (interval above 1.05 at 2 of 4 levels); "
                    "no clear winner above; adopt **spec** for concurrency ≤ 1 on a (interval above 1.05 at 1 of 4 "
                    "levels); no clear winner above")
    assert tone == "good"
    rows = curve_rows((WIN, WIN, WIN, WIN), category="a") + curve_rows((WIN, WIN, UNCLEAR, LOSE), category="b")
    assert verdict(rows)[1] == "good"  # adopt everywhere on one category and up to a level on another


def test_status_and_reason_defaults() -> None:
    data = RunData(path=Path("."), meta={"variants": {"spec": {"status": "failed"}}}, environment={}, config={},
                   fairness=None, cells=pd.DataFrame(curve_rows((WIN,))), break_even=pd.DataFrame())
    parts, _ = drafter_verdict(data, "spec")
    assert parts == [Strong("spec"), " failed: no verdict (no reason recorded)"]
    data = RunData(path=Path("."), meta={"variants": {"spec": {}}}, environment={}, config={},
                   fairness=None, cells=pd.DataFrame([dict(r, valid=False) for r in curve_rows((WIN,))]),
                   break_even=pd.DataFrame())
    parts, _ = drafter_verdict(data, "spec")
    assert parts == [Strong("spec"), ": no valid measurements (status unknown)"]
    data = RunData(path=Path("."), meta={"variants": {}}, environment={}, config={}, fairness=None,
                   cells=pd.DataFrame(curve_rows((WIN, WIN), variant="spec")), break_even=pd.DataFrame())
    parts, _ = drafter_verdict(data, "spec")  # a variant known only from cells.csv
    assert parts[0] == "adopt " and parts[1] == Strong("spec")


def test_a_missing_bound_falls_back_to_the_point_estimate() -> None:
    assert level_call(1.2, math.nan, 1.5) == "win" and level_call(0.8, 0.5, math.nan) == "lose"
    o = curve_outcome(pd.DataFrame(curve_rows((WIN, (math.nan, math.nan, math.nan), (1.1, math.nan, 1.2)))))
    assert (o.speedup_min, o.speedup_max, o.has_intervals) == (1.1, 1.3, False)


# --- verdict.min_speedup (default 1.05): a level wins only when its interval's low end is above it ---------

@pytest.mark.parametrize("level, config, expected", [
    # low end exactly 1.05: faster than the baseline, but not by the practical margin
    ((1.10, 1.05, 1.15), {}, "**spec** inconclusive on code: no clear win (speedup 1.10; all 2 levels undecided, "
                             "interval reaching below 1.05); more launches or repeats would decide"),
    # low end just above 1.05 at both levels: each alone clears it, but as a drafter's family of two claims
    # (Holm, decide/secondary.py) neither does: p = 2.45% each, above 2.5% / 2 at the first step
    ((1.10, 1.051, 1.15), {}, "**spec** inconclusive on code: no clear win (speedup 1.10; all 2 levels undecided, "
                              "interval reaching below 1.05); more launches or repeats would decide"),
    # the config raises the margin to 1.2: the same 1.15 low end no longer clears it, and the sentence says 1.2
    ((1.30, 1.15, 1.45), {"verdict": {"min_speedup": 1.2}},
     "**spec** inconclusive on code: no clear win (speedup 1.30; all 2 levels undecided, interval reaching below "
     "1.2); more launches or repeats would decide"),
    ((1.30, 1.15, 1.45), {"verdict": {}}, "adopt **spec** at every measured concurrency (up to 2) on code "
                                          "(interval above 1.05 at all 2 levels)"),
])
def test_min_speedup_boundary(level, config, expected) -> None:
    assert verdict(curve_rows((level, level)), config=config)[0] == expected


def test_faster_at_c1_but_not_by_the_margin_under_a_crossing() -> None:
    """break_even.csv says "pays up to C≈1.7" (the point estimate 1.08 at C=1 is above 1.0), but no level clears
    1.05: nothing to adopt, and the crossing must not be applied to a curve without a leading win."""
    rows = curve_rows(((1.08, 1.02, 1.14), UNCLEAR, LOSE, LOSE))
    text, tone = verdict(rows, pd.DataFrame([be_row("pays_up_to", 1.7)]))
    assert text == ("**spec** inconclusive on code: no clear win (speedup 0.70–1.08; 2 of 4 levels undecided, "
                    "interval reaching below 1.05); baseline wins at concurrency 4, 8")
    assert tone == "warn"


def test_inconclusive_length_counts_the_undecided_levels_of_all_lengths() -> None:
    """out=64 undecided at both levels, out=256 wins at both: inconclusive (the conservative one), and of the 4
    measured levels 2 are undecided (4 - 2 wins - 0 losses)."""
    rows = curve_rows((UNCLEAR, UNCLEAR), output_len=64) + curve_rows((WIN, WIN), output_len=256)
    assert verdict(rows)[0] == (
        "**spec** inconclusive on code: no clear win (speedup 1.02–1.30; 2 of 4 levels undecided, interval reaching "
        "below 1.05); more launches or repeats would decide (where output lengths disagree, the most conservative "
        "result; see the break-even table)")


def test_categories_with_the_same_result_share_one_statement_in_alphabetical_order() -> None:
    rows = curve_rows((WIN, WIN), category="math") + curve_rows((WIN, WIN), category="code")
    assert verdict(rows)[0] == ("adopt **spec** at every measured concurrency (up to 2) on code, math (interval "
                                "above 1.05 at all 2 levels)")


def test_break_even_row_of_the_same_input_length_only() -> None:
    """Prompts of 512 tokens cross at C≈3 (adopt up to 2); the row for unknown input length (C≈1.5) is not theirs."""
    rows = curve_rows((WIN, WIN, WIN, LOSE), input_len=512)
    be = pd.DataFrame([be_row("pays_up_to", 1.5), dict(be_row("pays_up_to", 3.0), input_len=512)])
    assert verdict(rows, be)[0] == ("adopt **spec** for concurrency ≤ 2 on code (interval above 1.05 at 3 of 4 "
                                    "levels); baseline wins above")


def test_curve_outcome_limits() -> None:
    o = curve_outcome(pd.DataFrame(curve_rows((WIN, WIN, WIN, WIN))))
    assert (o.kind, o.limit, o.max_concurrency, o.beaten_above) == ("adopt_all", 8, 8, False)
    empty = curve_outcome(pd.DataFrame(columns=list(curve_rows((WIN,))[0])))  # no level at all: nothing decided
    assert (empty.kind, empty.limit, empty.max_concurrency, empty.n_points) == ("inconclusive", None, 0, 0)
    assert math.isnan(empty.speedup_min) and math.isnan(empty.speedup_max)


# --- sanity gates: a blocking warning on any cell of the category turns "adopt" into "not adopted" ---------

def gate(*codes: WarningCode) -> str:
    return encode_warnings(CellWarning(c, "detail") for c in codes)


def test_a_sanity_gate_blocks_adoption_and_names_the_gates() -> None:
    rows = curve_rows((WIN, WIN, WIN, WIN), warnings=gate(WarningCode.DRAFTER_INACTIVE))
    text, tone = verdict(rows)
    assert text == ("not adopted: **spec** would pay at every measured concurrency on code, but sanity gate "
                    "drafter_inactive fired (see Warnings for the remedy)")
    assert tone == "warn"
    # two gates on different cells of two output lengths, next to a warning that blocks nothing
    rows = curve_rows((WIN, WIN, UNCLEAR, LOSE), warnings="") + \
        curve_rows((WIN, WIN, WIN, LOSE), output_len=256, warnings="")
    rows[0]["warnings"] = gate(WarningCode.HIGH_VARIANCE, WarningCode.EAGER_ENGINE)
    rows[7]["warnings"] = gate(WarningCode.DEGENERATE_WORKLOAD)
    text, tone = verdict(rows)
    assert text == ("not adopted: **spec** would pay at concurrency ≤ 2 on code, but sanity gate degenerate_workload, "
                    "eager_engine fired (see Warnings for the remedy) (where output lengths disagree, the most "
                    "conservative result; see the break-even table)")
    assert tone == "warn"


def test_a_sanity_gate_leaves_a_non_adopting_verdict_as_it_is() -> None:
    rows = curve_rows((UNCLEAR, UNCLEAR), warnings=gate(WarningCode.GPU_DRIFT))
    assert verdict(rows)[0] == ("**spec** inconclusive on code: no clear win (speedup 1.02; all 2 levels undecided, "
                                "interval reaching below 1.05); more launches or repeats would decide")


# --- indicative runs (launch variance not in the intervals): observations, never advice ----------------------

INDICATIVE = (" (indicative only: 1 launch per variant and no calibration for this hardware, so the variance between "
              "launches (about 25% on a shared 2-core CPU) is not in the intervals; set sweep.launches >= 2 or run "
              "`specbench calibrate`)")


@pytest.mark.parametrize("rows, expected, tone", [
    (curve_rows((WIN, WIN), category="code") + curve_rows((WIN, LOSE), category="math") +
     curve_rows((LOSE, LOSE), category="chat"),
     "**spec** looks faster at every measured concurrency (up to 2) on code (interval above 1.05 at all 2 levels); "
     "**spec** looks faster for concurrency ≤ 1 on math (interval above 1.05 at 1 of 2 levels); baseline looks "
     "faster above; **spec** looks slower on chat: speedup 0.70, below 1.0 at all 2 measured levels", "warn"),
    (curve_rows((LOSE, LOSE, LOSE, LOSE), output_len=64) + curve_rows((WIN, WIN, WIN, WIN), output_len=256),
     "**spec** looks slower on code at some output length (speedup 0.70–1.30 across lengths) (where output "
     "lengths disagree, the most conservative result; see the break-even table)", "warn"),
    (curve_rows((LOSE, LOSE)), "**spec** looks slower: speedup **0.70**, below 1.0 at all 2 measured points", "warn"),
])
def test_indicative_wording(rows, expected, tone) -> None:
    rows = [dict(r, interval_unit="repeat", launches=1) for r in rows]
    assert verdict(rows) == (expected + INDICATIVE, tone)


def run_data(rows: list[dict], environment: dict | None = None, variants: dict | None = None) -> RunData:
    return RunData(path=Path("."), meta={"baseline": "base", "variants": variants or {}},
                   environment=environment or {}, config={}, fairness=None, cells=pd.DataFrame(rows),
                   break_even=pd.DataFrame())


ADOPT2 = " at every measured concurrency (up to 2) on code (interval above 1.05 at all 2 levels)"


@pytest.mark.parametrize("columns, lead, basis", [
    # a run directory older than launches: none of the columns, repeats only
    ({"interval_unit": None, "launches": None, "launch_cv": None}, "**spec** looks faster", INDICATIVE),
    ({"interval_unit": "repeat", "launches": math.nan}, "**spec** looks faster", INDICATIVE),
    ({"interval_unit": "launch", "launches": 2, "launch_cv": 0.123}, "adopt **spec**",
     " (2 launches per variant; between-launch CV 12.3%, measured and in every interval)"),
    ({"interval_unit": "launch", "launches": 3, "launch_cv": math.nan}, "adopt **spec**",
     " (3 launches per variant; between-launch CV not estimable, measured and in every interval)"),
    ({"interval_unit": "repeat+calibration", "launches": 1, "launch_cv": 0.25}, "adopt **spec**",
     " (1 launch per variant; between-launch CV 25.0% from this hardware's calibration, added to every interval)"),
])
def test_launch_basis(columns, lead, basis) -> None:
    rows = [{k: v for k, v in dict(r, **columns).items() if v is not None} for r in curve_rows((WIN, WIN))]
    assert plain(drafter_verdict(run_data(rows), "spec")[0]) == lead + ADOPT2 + basis


def test_launch_basis_reads_the_baseline_cells_too() -> None:
    """Launches per variant is the fewest of drafter and baseline; a mix of launch variance measured (C=1) and
    calibrated (C=2) is still launch variance in every interval."""
    rows = curve_rows((WIN, WIN)) + curve_rows(((1.0, 1.0, 1.0),) * 2, variant="base", launches=2)
    rows[1]["interval_unit"] = "repeat+calibration"
    parts, tone = drafter_verdict(run_data(rows), "spec")
    assert plain(parts).endswith(" (2 launches per variant; between-launch CV 5.0% from this hardware's calibration, "
                                 "added to every interval)")
    assert tone == "good"
    rows[-1]["interval_unit"] = "repeat"  # one baseline cell without launch variance: indicative
    assert plain(drafter_verdict(run_data(rows), "spec")[0]).startswith("**spec** looks faster")


NODE = {"cpu": "Xeon", "gpu_model": "NVIDIA H100"}


@pytest.mark.parametrize("placement", [
    {"base": ["n1"], "spec": ["n2"]},  # the drafter on unlike hardware
    {"base": ["n1", "n2"], "spec": ["n1"]},  # the baseline itself on unlike nodes: every speedup is withheld
])
def test_no_verdict_on_hardware_unlike_the_baseline(placement) -> None:
    env = {"nodes": {"n1": NODE, "n2": dict(NODE, gpu_model="NVIDIA A100")}, "variant_nodes": placement}
    parts, tone = drafter_verdict(run_data(curve_rows((WIN, WIN)), env), "spec")
    assert plain(parts) == "**spec**: no verdict: measured on hardware unlike the baseline's (see Hardware)"
    assert tone == "bad"


def test_a_variant_the_run_does_not_know() -> None:
    parts, tone = drafter_verdict(run_data(curve_rows((WIN, WIN))), "ghost")
    assert (plain(parts), tone) == ("**ghost**: no valid measurements (status unknown)", "warn")

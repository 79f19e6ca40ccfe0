"""The verdict sentences, each from a speedup curve whose right answer is known by construction: a level
is a win when its interval is clear above 1.0, a loss when clear below, unclear when it straddles 1.0.
Includes a run whose two output lengths disagree (the conservative combination and its note)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from specbench.report.document import Strong
from specbench.report.load import RunData
from specbench.report.verdict import curve_outcome, drafter_verdict, level_call

WIN, LOSE, UNCLEAR = (1.3, 1.2, 1.4), (0.7, 0.6, 0.8), (1.02, 0.95, 1.09)
LEVELS = (1, 2, 4, 8)


def curve_rows(calls: tuple, *, variant: str = "spec", category: str = "code", output_len: int = 64,
               levels: tuple[int, ...] = LEVELS, intervals: bool = True) -> list[dict]:
    rows = []
    for c, (s, lo, hi) in zip(levels, calls):
        rows.append({"variant": variant, "category": category, "input_len": math.nan, "output_len": output_len,
                     "temperature": 0.0, "concurrency": c, "valid": True, "speedup": s,
                     "speedup_ci_low": lo if intervals else math.nan, "speedup_ci_high": hi if intervals else math.nan})
    return rows


def verdict(rows: list[dict], break_even: pd.DataFrame | None = None, status: str = "done") -> tuple[str, str]:
    """The verdict line as plain text (bold as **x**) and its tone."""
    data = RunData(path=Path("."), meta={"baseline": "base", "variants": {"spec": {"status": status}}},
                   environment={}, config={}, fairness=None, cells=pd.DataFrame(rows),
                   break_even=break_even if break_even is not None else pd.DataFrame())
    parts, tone = drafter_verdict(data, "spec")
    return "".join(f"**{p.text}**" if isinstance(p, Strong) else str(p) for p in parts), tone


def test_adopt_up_to_a_level_baseline_wins_above() -> None:
    text, tone = verdict(curve_rows((WIN, WIN, UNCLEAR, LOSE)))
    assert text == "adopt **spec** for concurrency ≤ 2 on code; baseline wins above"
    assert tone == "good"


def test_adopt_up_to_a_level_no_clear_winner_above() -> None:
    text, _ = verdict(curve_rows((WIN, WIN, UNCLEAR, UNCLEAR)))
    assert text == "adopt **spec** for concurrency ≤ 2 on code; no clear winner above"


def test_adopt_everywhere() -> None:
    text, tone = verdict(curve_rows((WIN, WIN, WIN, WIN)))
    assert text == "adopt **spec** at every measured concurrency (up to 8) on code" and tone == "good"


def test_mixed_wins_not_from_the_lowest_level() -> None:
    text, tone = verdict(curve_rows((UNCLEAR, WIN, UNCLEAR, LOSE)))
    assert text == ("no consistent result for **spec** on code: speedup clearly above 1.0 only at "
                    "concurrency 2, below it at 8")
    assert tone == "warn"
    text, _ = verdict(curve_rows((UNCLEAR, WIN, WIN, UNCLEAR)))
    assert text.endswith("only at concurrency 2, 4")  # no loss: no "below it"


def test_inconclusive_says_where_the_baseline_wins() -> None:
    text, tone = verdict(curve_rows((UNCLEAR, UNCLEAR, LOSE, LOSE)))
    assert text == ("inconclusive on code: no clear win (speedup 0.70–1.02; some speedup intervals include 1.0); "
                    "baseline wins at concurrency 4, 8")
    assert tone == "warn"


def test_inconclusive_without_losses_asks_for_repeats() -> None:
    text, _ = verdict(curve_rows((UNCLEAR, UNCLEAR)))
    assert text == ("inconclusive on code: no clear win (speedup 1.02; some speedup intervals include 1.0); "
                    "more repeats would decide")


def test_never_pays() -> None:
    text, tone = verdict(curve_rows((LOSE, (0.5, 0.45, 0.55))))
    assert text == "**spec** never pays: speedup **0.50–0.70** (< 1.0) at every measured point; do not adopt"
    assert tone == "bad"


def test_output_lengths_that_disagree_give_the_conservative_result_and_say_so() -> None:
    """out=64 pays up to C=4, out=256 only up to C=2: the category gets the lower limit, and the note."""
    rows = curve_rows((WIN, WIN, WIN, LOSE), output_len=64) + curve_rows((WIN, WIN, UNCLEAR, LOSE), output_len=256)
    text, _ = verdict(rows)
    assert text == ("adopt **spec** for concurrency ≤ 2 on code; baseline wins above (where output lengths "
                    "disagree, the most conservative result; see the break-even table)")
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
    assert text == ("adopt **spec** at every measured concurrency (up to 2) on code; adopt **spec** for "
                    "concurrency ≤ 1 on math; baseline wins above; **spec** never pays on chat: speedup 0.70, "
                    "below 1.0 at every measured concurrency")
    assert tone == "warn"


def test_single_repeat_is_indicative_only() -> None:
    text, _ = verdict(curve_rows(((1.3, 0, 0), (1.2, 0, 0), (0.9, 0, 0)), intervals=False))
    assert text == ("adopt **spec** for concurrency ≤ 2 on code; baseline wins above (some points have no "
                    "interval, e.g. a single repeat: indicative only)")


def test_break_even_crossing_limits_the_adoption() -> None:
    """break_even.csv says the curve crosses 1.0 at C=3: a win measured at 4 does not extend adoption."""
    be = pd.DataFrame([{"variant": "spec", "category": "code", "input_len": math.nan, "output_len": 64,
                        "temperature": 0.0, "status": "pays_up_to", "break_even_concurrency": 3.0}])
    text, _ = verdict(curve_rows((WIN, WIN, WIN, LOSE)), be)
    assert text == "adopt **spec** for concurrency ≤ 2 on code; baseline wins above"


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
    assert level_call(s, lo, hi) == call


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
    text, tone = verdict(unclear, pd.DataFrame([be_row("never_pays")]))
    assert text == "**spec** never pays: speedup **1.02** (< 1.0) at every measured point; do not adopt"
    text, tone = verdict(unclear, pd.DataFrame([be_row("pays_everywhere")]))
    assert text == "adopt **spec** at every measured concurrency (up to 2) on code" and tone == "good"
    # "no_data" says nothing: the levels decide (all clear losses: never)
    text, _ = verdict(curve_rows((LOSE, LOSE)), pd.DataFrame([be_row("no_data")]))
    assert text.startswith("**spec** never pays: speedup **0.70**")
    text, _ = verdict(curve_rows((WIN, WIN)), pd.DataFrame([be_row("no_data")]))
    assert text == "adopt **spec** at every measured concurrency (up to 2) on code"


def test_break_even_row_of_the_same_curve_only() -> None:
    """Rows of another variant, category or output length must not be read for this curve."""
    curve = curve_rows((WIN, WIN, UNCLEAR, UNCLEAR))
    others = [be_row("pays_up_to", 1.5, variant="other"), be_row("pays_up_to", 1.5, category="chat"),
              be_row("never_pays", output_len=256)]
    text, _ = verdict(curve, pd.DataFrame(others + [be_row("pays_everywhere")]))
    assert text == "adopt **spec** at every measured concurrency (up to 8) on code"
    text, _ = verdict(curve, pd.DataFrame(others))  # no row of its own: the levels decide
    assert text == "adopt **spec** for concurrency ≤ 2 on code; no clear winner above"


def test_crossing_exactly_at_a_measured_level() -> None:
    # wins at 1, 2, 4 but break_even.csv puts the crossing at C=2.0: adopt only below it, at 1
    be = pd.DataFrame([be_row("pays_up_to", 2.0)])
    text, _ = verdict(curve_rows((WIN, WIN, WIN, LOSE)), be)
    assert text == "adopt **spec** for concurrency ≤ 1 on code; baseline wins above"
    # a crossing below the lowest level leaves no adoption at all
    text, _ = verdict(curve_rows((WIN, WIN, WIN, LOSE)), pd.DataFrame([be_row("pays_up_to", 0.5)]))
    assert text.startswith("no consistent result for **spec** on code")


def test_groups_with_higher_limits_come_first() -> None:
    rows = curve_rows((WIN, UNCLEAR, UNCLEAR, UNCLEAR), category="a") + \
        curve_rows((WIN, WIN, WIN, UNCLEAR), category="b") + curve_rows((WIN, WIN, UNCLEAR, UNCLEAR), category="c")
    text, tone = verdict(rows)
    assert text == ("adopt **spec** for concurrency ≤ 4 on b; no clear winner above; adopt **spec** for "
                    "concurrency ≤ 2 on c; no clear winner above; adopt **spec** for concurrency ≤ 1 on a; "
                    "no clear winner above")
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

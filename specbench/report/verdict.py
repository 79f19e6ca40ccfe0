"""The verdict: per drafter and category, adopt up to which concurrency, never, or inconclusive.

Speedup verdicts (`drafter_verdict`) read the 95% interval of the aggregate-throughput speedup: a
concurrency level is a win when the interval's low end is above 1.0, a loss when its high end is below
1.0, and undecided otherwise. Without intervals (a single repeat) the point estimate decides, and the
verdict says it is indicative only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from ..hardware import check_saved
from .document import Inline, Strong, Tone
from .fmt import fmt_span, num
from .load import RunData

Call = Literal["win", "lose", "unclear"]
CROSSING = ("pays_up_to", "crosses")  # break_even.csv statuses with an interpolated crossing
Kind = Literal["never", "mixed", "inconclusive", "adopt_upto", "adopt_all"]
_RANK: dict[str, int] = {"never": 0, "mixed": 1, "inconclusive": 2, "adopt_upto": 3, "adopt_all": 4}


def level_call(speedup: float, low: float, high: float) -> Call:
    """Win when the interval is clear above 1.0, lose when clear below, else unclear (point estimate if no CI)."""
    if not (math.isnan(low) or math.isnan(high)):
        return "win" if low > 1.0 else "lose" if high < 1.0 else "unclear"
    if math.isnan(speedup) or speedup == 1.0:
        return "unclear"
    return "win" if speedup > 1.0 else "lose"


@dataclass(frozen=True)
class Outcome:
    """What one drafter should do on one curve (or, combined, on one category)."""

    kind: Kind
    limit: int | None  # highest concurrency at which adopting is supported by the measurements
    max_concurrency: int
    beaten_above: bool  # the baseline is clearly faster at some level above `limit`
    speedup_min: float
    speedup_max: float
    has_intervals: bool
    wins: tuple[int, ...] = ()  # concurrency levels where the drafter is clearly faster
    losses: tuple[int, ...] = ()  # ... and clearly slower
    varies: bool = False  # curves of the category (output lengths, temperatures) disagree


def curve_outcome(curve: pd.DataFrame, be_status: str = "", be_concurrency: float = math.nan) -> Outcome:
    """Classify one speedup-vs-concurrency curve; break_even.csv's status, when given, decides the kind."""
    curve = curve.sort_values("concurrency")
    levels = [int(c) for c in curve["concurrency"]]
    calls = [level_call(s, lo, hi) for s, lo, hi in
             zip(curve["speedup"], curve["speedup_ci_low"], curve["speedup_ci_high"])]
    prefix: int | None = None  # last level of the leading run of wins
    for c, call in zip(levels, calls):
        if call != "win":
            break
        prefix = c
    be_status = "" if be_status == "no_data" else be_status
    if be_status in CROSSING and prefix is not None and not math.isnan(be_concurrency):
        below = [c for c in levels if c <= prefix and c < be_concurrency]
        prefix = below[-1] if below else None
    if be_status == "never_pays" or (not be_status and calls and all(c == "lose" for c in calls)):
        kind: Kind = "never"
    elif be_status == "pays_everywhere" or (not be_status and calls and all(c == "win" for c in calls)):
        kind, prefix = "adopt_all", max(levels)
    elif prefix is not None:
        kind = "adopt_all" if prefix == max(levels) else "adopt_upto"
    elif "win" in calls:
        kind = "mixed"  # clear wins, but not from the lowest concurrency up
    else:
        kind = "inconclusive"
    limit = prefix if kind in ("adopt_upto", "adopt_all") else None
    beaten = any(call == "lose" and (limit is None or c > limit) for c, call in zip(levels, calls))
    s = curve["speedup"].dropna()
    has_ci = bool(curve[["speedup_ci_low", "speedup_ci_high"]].notna().all(axis=1).all())
    return Outcome(kind=kind, limit=limit, max_concurrency=max(levels) if levels else 0, beaten_above=beaten,
                   speedup_min=float(s.min()) if len(s) else math.nan,
                   speedup_max=float(s.max()) if len(s) else math.nan, has_intervals=has_ci,
                   wins=tuple(c for c, k in zip(levels, calls) if k == "win"),
                   losses=tuple(c for c, k in zip(levels, calls) if k == "lose"))


def combine(outcomes: list[Outcome]) -> Outcome:
    """The most conservative outcome across a category's curves (never < inconclusive < adopt <= N < adopt all)."""
    worst = min(outcomes, key=lambda o: (_RANK[o.kind], o.limit or 0))
    return Outcome(kind=worst.kind, limit=worst.limit, max_concurrency=max(o.max_concurrency for o in outcomes),
                   beaten_above=any(o.beaten_above for o in outcomes),
                   speedup_min=min(o.speedup_min for o in outcomes), speedup_max=max(o.speedup_max for o in outcomes),
                   has_intervals=all(o.has_intervals for o in outcomes),
                   wins=tuple(sorted({c for o in outcomes for c in o.wins})),
                   losses=tuple(sorted({c for o in outcomes for c in o.losses})),
                   varies=len({(o.kind, o.limit) for o in outcomes}) > 1)


def _be_lookup(be: pd.DataFrame, variant: str, key: dict[str, Any]) -> tuple[str, float]:
    if not len(be):
        return "", math.nan
    m = (be["variant"] == variant) & (be["category"] == key["category"])
    for col in ("input_len", "output_len", "temperature"):
        v = num(key.get(col))
        m &= be[col].isna() if math.isnan(v) else (be[col] == v)
    rows = be[m]
    if not len(rows):
        return "", math.nan
    return str(rows.iloc[0]["status"]), float(rows.iloc[0]["break_even_concurrency"])


def category_outcomes(cells: pd.DataFrame, be: pd.DataFrame, variant: str) -> dict[str, Outcome]:
    """Per category: the combined outcome of the variant's valid curves (one per lengths x temperature)."""
    mine = cells[(cells["variant"] == variant) & cells["valid"]]
    out: dict[str, Outcome] = {}
    for category, cat_cells in mine.groupby("category", sort=True):
        curves = []
        for key, curve in cat_cells.groupby(["input_len", "output_len", "temperature"], dropna=False):
            k = dict(zip(["input_len", "output_len", "temperature"], key), category=category)
            curves.append(curve_outcome(curve, *_be_lookup(be, variant, k)))
        out[str(category)] = combine(curves)
    return out


def _csv(levels: Iterable[int]) -> str:
    return ", ".join(str(c) for c in levels)


def _phrase(variant: str, outcome: Outcome, categories: list[str]) -> list[Inline]:
    on = ", ".join(categories)
    if outcome.kind == "adopt_all":
        parts: list[Inline] = ["adopt ", Strong(variant), f" at every measured concurrency (up to "
                               f"{outcome.max_concurrency}) on {on}"]
    elif outcome.kind == "adopt_upto":
        above = "baseline wins above" if outcome.beaten_above else "no clear winner above"
        parts = ["adopt ", Strong(variant), f" for concurrency ≤ {outcome.limit} on {on}; {above}"]
    elif outcome.kind == "never" and outcome.varies:  # another curve of the category may well pay
        parts = [Strong(variant), f" never pays on {on} at some output length (speedup "
                 f"{fmt_span(outcome.speedup_min, outcome.speedup_max)} across lengths)"]
    elif outcome.kind == "never":
        parts = [Strong(variant), f" never pays on {on}: speedup {fmt_span(outcome.speedup_min, outcome.speedup_max)}"
                 ", below 1.0 at every measured concurrency"]
    elif outcome.kind == "mixed":
        losses = f", below it at {_csv(outcome.losses)}" if outcome.losses else ""
        parts = ["no consistent result for ", Strong(variant), f" on {on}: speedup clearly above 1.0 only at "
                 f"concurrency {_csv(outcome.wins)}{losses}"]
    else:
        beaten = (f"; baseline wins at concurrency {_csv(outcome.losses)}" if outcome.losses
                  else "; more repeats would decide")
        parts = [f"inconclusive on {on}: no clear win (speedup {fmt_span(outcome.speedup_min, outcome.speedup_max)}; "
                 f"some speedup intervals include 1.0){beaten}"]
    return parts


def drafter_verdict(data: RunData, variant: str) -> tuple[list[Inline], Tone]:
    """One line for one drafter: per category, adopt up to which concurrency, never, or inconclusive."""
    info = data.variants.get(variant, {})
    status = str(info.get("status") or "")
    if status == "failed":
        return [Strong(variant), f" failed: no verdict ({info.get('reason') or 'no reason recorded'})"], "bad"
    if variant in check_saved(data.environment, data.config, data.baseline).withheld:
        return [Strong(variant), ": no verdict: measured on hardware unlike the baseline's (see Hardware)"], "bad"
    outcomes = category_outcomes(data.cells, data.break_even, variant)
    if not outcomes:
        return [Strong(variant), f": no valid measurements (status {status or 'unknown'})"], "warn"
    if all(o.kind == "never" and not o.varies for o in outcomes.values()):
        allc = combine(list(outcomes.values()))
        return [Strong(variant), " never pays: speedup ", Strong(fmt_span(allc.speedup_min, allc.speedup_max)),
                " (< 1.0) at every measured point; do not adopt"], "bad"
    groups: dict[tuple[Any, ...], list[str]] = {}
    for cat, o in outcomes.items():
        groups.setdefault((o.kind, o.limit, o.beaten_above, o.varies), []).append(cat)
    parts: list[Inline] = []
    for _, cats in sorted(groups.items(), key=lambda kv: (-_RANK[kv[0][0]], -(kv[0][1] or 0))):
        if parts:
            parts.append("; ")
        parts.extend(_phrase(variant, outcomes[cats[0]], cats))
    if any(o.varies for o in outcomes.values()):
        parts.append(" (where output lengths disagree, the most conservative result; see the break-even table)")
    if not all(o.has_intervals for o in outcomes.values()):
        parts.append(" (some points have no interval, e.g. a single repeat: indicative only)")
    kinds = {o.kind for o in outcomes.values()}
    tone: Tone = "good" if kinds <= {"adopt_all", "adopt_upto"} else "warn"
    return parts, tone

"""The verdict: per drafter and category, adopt up to which concurrency, never, or inconclusive.

Speedup verdicts (`drafter_verdict`) read the 95% interval of the aggregate-throughput speedup: a
concurrency level is a win when the interval's low end clears `verdict.min_speedup` (practical
significance, default 1.05), a loss when its high end is below 1.0, and undecided otherwise. Without
intervals (a single repeat) the point estimate decides, and the verdict says it is indicative only.
Every statement says how many measured levels decide it; a sanity gate that fired blocks "adopt".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from ..config import DEFAULT_MIN_SPEEDUP
from ..metrics.warnings import BLOCKING, decode_warnings
from ..hardware import check_saved
from .document import Inline, Strong, Tone
from .fmt import fmt_span, num
from .load import RunData

Call = Literal["win", "lose", "unclear"]
Kind = Literal["never", "mixed", "inconclusive", "adopt_upto", "adopt_all"]
_RANK: dict[str, int] = {"never": 0, "mixed": 1, "inconclusive": 2, "adopt_upto": 3, "adopt_all": 4}


def level_call(speedup: float, low: float, high: float, min_speedup: float = DEFAULT_MIN_SPEEDUP) -> Call:
    """Win when the interval clears min_speedup, lose when it lies below 1.0, else unclear (the point
    estimate decides when there is no interval)."""
    if not (math.isnan(low) or math.isnan(high)):
        return "win" if low > min_speedup else "lose" if high < 1.0 else "unclear"
    if math.isnan(speedup):
        return "unclear"
    return "win" if speedup > min_speedup else "lose" if speedup < 1.0 else "unclear"


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
    n_points: int = 0  # measured levels (summed over the category's curves) ...
    n_wins: int = 0  # ... that clear min_speedup
    n_losses: int = 0  # ... whose interval lies below 1.0
    blocked: tuple[str, ...] = ()  # sanity gates that fired on the category's cells


def curve_outcome(curve: pd.DataFrame, be_status: str = "", be_concurrency: float = math.nan,
                  min_speedup: float = DEFAULT_MIN_SPEEDUP) -> Outcome:
    """Classify one speedup-vs-concurrency curve. The levels decide the kind; break_even.csv's crossing, when
    its status is pays_up_to, caps adoption below it (a win measured beyond the crossing does not extend it)."""
    curve = curve.sort_values("concurrency")
    levels = [int(c) for c in curve["concurrency"]]
    calls = [level_call(s, lo, hi, min_speedup) for s, lo, hi in
             zip(curve["speedup"], curve["speedup_ci_low"], curve["speedup_ci_high"])]
    prefix: int | None = None  # last level of the leading run of wins
    for c, call in zip(levels, calls):
        if call != "win":
            break
        prefix = c
    if be_status == "pays_up_to" and prefix is not None and not math.isnan(be_concurrency):
        below = [c for c in levels if c <= prefix and c < be_concurrency]
        prefix = below[-1] if below else None
    if calls and all(c == "lose" for c in calls):  # what break_even's never_pays checks, level by level
        kind: Kind = "never"
    elif prefix is not None:
        kind = "adopt_all" if prefix == max(levels) else "adopt_upto"
    elif "win" in calls:
        kind = "mixed"  # clear wins, but not from the lowest concurrency up
    else:
        kind = "inconclusive"
    limit = prefix  # None unless adopting: the kinds below it have no leading win
    beaten = any(call == "lose" and (limit is None or c > limit) for c, call in zip(levels, calls))
    has_ci = bool(curve[["speedup_ci_low", "speedup_ci_high"]].notna().to_numpy().all())
    codes = {w["code"] for ws in curve.get("warnings", ()) for w in decode_warnings(ws)}
    return Outcome(kind=kind, limit=limit, max_concurrency=max(levels) if levels else 0, beaten_above=beaten,
                   speedup_min=float(curve["speedup"].min()), speedup_max=float(curve["speedup"].max()),
                   has_intervals=has_ci,
                   wins=tuple(c for c, k in zip(levels, calls) if k == "win"),
                   losses=tuple(c for c, k in zip(levels, calls) if k == "lose"),
                   n_points=len(levels), n_wins=calls.count("win"), n_losses=calls.count("lose"),
                   blocked=tuple(sorted(codes & BLOCKING)))


def combine(outcomes: list[Outcome]) -> Outcome:
    """The most conservative outcome across a category's curves (never < inconclusive < adopt <= N < adopt all)."""
    worst = min(outcomes, key=lambda o: (_RANK[o.kind], o.limit or 0))
    return Outcome(kind=worst.kind, limit=worst.limit, max_concurrency=max(o.max_concurrency for o in outcomes),
                   beaten_above=any(o.beaten_above for o in outcomes),
                   speedup_min=min(o.speedup_min for o in outcomes), speedup_max=max(o.speedup_max for o in outcomes),
                   has_intervals=all(o.has_intervals for o in outcomes),
                   wins=tuple(sorted({c for o in outcomes for c in o.wins})),
                   losses=tuple(sorted({c for o in outcomes for c in o.losses})),
                   varies=len({(o.kind, o.limit) for o in outcomes}) > 1,
                   n_points=sum(o.n_points for o in outcomes), n_wins=sum(o.n_wins for o in outcomes),
                   n_losses=sum(o.n_losses for o in outcomes),
                   blocked=tuple(sorted({b for o in outcomes for b in o.blocked})))


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


def category_outcomes(cells: pd.DataFrame, be: pd.DataFrame, variant: str,
                      min_speedup: float = DEFAULT_MIN_SPEEDUP) -> dict[str, Outcome]:
    """Per category: the combined outcome of the variant's valid curves (one per lengths x temperature)."""
    mine = cells[(cells["variant"] == variant) & cells["valid"]]
    out: dict[str, Outcome] = {}
    for category, cat_cells in mine.groupby("category", sort=True):
        curves = []
        for key, curve in cat_cells.groupby(["input_len", "output_len", "temperature"], dropna=False):
            k = dict(zip(["input_len", "output_len", "temperature"], key), category=category)
            curves.append(curve_outcome(curve, *_be_lookup(be, variant, k), min_speedup=min_speedup))
        out[str(category)] = combine(curves)
    return out


def _csv(levels: Iterable[int]) -> str:
    return ", ".join(str(c) for c in levels)


def _count(n: int, of: int) -> str:
    return f"all {of}" if n == of else f"{n} of {of}"


def _phrase(variant: str, outcome: Outcome, categories: list[str], min_speedup: float,
            indicative: bool) -> list[Inline]:
    """One category group's statement. `indicative` (launch variance not in the intervals): the same
    findings, worded as observations ("looks faster"), never as advice ("adopt", "baseline wins")."""
    on = ", ".join(categories)
    o = outcome
    clears = f"interval above {min_speedup:g}" if o.has_intervals else f"point estimate above {min_speedup:g}"
    base_faster = "baseline looks faster" if indicative else "baseline wins"
    if o.kind in ("adopt_all", "adopt_upto") and o.blocked:
        where = "every measured concurrency" if o.kind == "adopt_all" else f"concurrency ≤ {o.limit}"
        return ["not adopted: ", Strong(variant), f" would pay at {where} on {on}, but sanity gate "
                f"{', '.join(o.blocked)} fired (see Warnings for the remedy)"]
    if o.kind == "adopt_all":
        lead: list[Inline] = [Strong(variant), " looks faster"] if indicative else ["adopt ", Strong(variant)]
        parts = lead + [f" at every measured concurrency (up to {o.max_concurrency}) on {on} ({clears} at "
                        f"{_count(o.n_wins, o.n_points)} levels)"]
    elif o.kind == "adopt_upto":
        above = f"{base_faster} above" if o.beaten_above else "no clear winner above"
        lead = [Strong(variant), " looks faster"] if indicative else ["adopt ", Strong(variant)]
        parts = lead + [f" for concurrency ≤ {o.limit} on {on} ({clears} at {_count(o.n_wins, o.n_points)} "
                        f"levels); {above}"]
    elif o.kind == "never" and o.varies:  # another curve of the category may well pay
        words = " looks slower on " if indicative else " never pays on "
        parts = [Strong(variant), f"{words}{on} at some output length (speedup "
                 f"{fmt_span(o.speedup_min, o.speedup_max)} across lengths)"]
    elif o.kind == "never":
        words = " looks slower on " if indicative else " never pays on "
        parts = [Strong(variant), f"{words}{on}: speedup {fmt_span(o.speedup_min, o.speedup_max)}"
                 f", below 1.0 at {_count(o.n_losses, o.n_points)} measured levels"]
    elif o.kind == "mixed":
        losses = f", below 1.0 at {_csv(o.losses)}" if o.losses else ""
        parts = ["no consistent result for ", Strong(variant), f" on {on}: speedup clears {min_speedup:g} only at "
                 f"concurrency {_csv(o.wins)}{losses}"]
    else:
        beaten = (f"; {base_faster} at concurrency {_csv(o.losses)}" if o.losses
                  else "; more launches or repeats would decide")
        undecided = o.n_points - o.n_wins - o.n_losses
        parts = [Strong(variant), f" inconclusive on {on}: no clear win (speedup "
                 f"{fmt_span(o.speedup_min, o.speedup_max)}; "
                 f"{_count(undecided, o.n_points)} levels undecided, interval reaching below {min_speedup:g}){beaten}"]
    return parts


def launch_basis(cells: pd.DataFrame, variant: str, baseline: str) -> tuple[bool, str]:
    """(indicative, what the intervals rest on): launches per variant and the between-launch variance used.
    Indicative unless every cell of the variant and the baseline has launch variance in its intervals
    (2+ launches, or a calibration of this hardware)."""
    c = cells[cells["variant"].isin([variant, baseline])]
    # what the intervals hold, per cell: "launch" (2+ launches), "repeat+calibration", else repeats only
    units = set(c["interval_unit"]) if "interval_unit" in c else set()
    launches = int(c["launches"].min()) if "launches" in c and c["launches"].notna().any() else 1
    cv = c["launch_cv"].median() if "launch_cv" in c else math.nan
    cv_text = f"between-launch CV {100 * cv:.1f}%" if not math.isnan(cv) else "between-launch CV not estimable"
    per = f"{launches} launch{'es' if launches > 1 else ''} per variant"
    if units == {"launch"}:
        return False, f"{per}; {cv_text}, measured and in every interval"
    if units and units <= {"launch", "repeat+calibration"}:
        return False, f"{per}; {cv_text} from this hardware's calibration, added to every interval"
    return True, (f"indicative only: {per} and no calibration for this hardware, so the variance between "
                  "launches (about 25% on a shared 2-core CPU) is not in the intervals; set sweep.launches >= 2 "
                  "or run `specbench calibrate`")


def drafter_verdict(data: RunData, variant: str) -> tuple[list[Inline], Tone]:
    """One line for one drafter: per category, adopt up to which concurrency, never, or inconclusive."""
    info = data.variants.get(variant, {})
    status = str(info.get("status") or "")
    if status == "failed":
        return [Strong(variant), f" failed: no verdict ({info.get('reason') or 'no reason recorded'})"], "bad"
    if variant in check_saved(data.environment, data.config, data.baseline).withheld:
        return [Strong(variant), ": no verdict: measured on hardware unlike the baseline's (see Hardware)"], "bad"
    min_speedup = float((data.config.get("verdict") or {}).get("min_speedup") or DEFAULT_MIN_SPEEDUP)
    outcomes = category_outcomes(data.cells, data.break_even, variant, min_speedup)
    if not outcomes:
        return [Strong(variant), f": no valid measurements (status {status or 'unknown'})"], "warn"
    indicative, basis = launch_basis(data.cells, variant, data.baseline)
    no_interval = not all(o.has_intervals for o in outcomes.values())
    indicative |= no_interval  # point estimates decide somewhere: observations, not advice
    if all(o.kind == "never" and not o.varies for o in outcomes.values()):
        allc = combine(list(outcomes.values()))
        span = Strong(fmt_span(allc.speedup_min, allc.speedup_max))
        below = f", below 1.0 at {_count(allc.n_losses, allc.n_points)} measured points"
        if indicative:
            return [Strong(variant), " looks slower: speedup ", span, f"{below} ({basis})"], "warn"
        return [Strong(variant), " never pays: speedup ", span, f"{below}; do not adopt ({basis})"], "bad"
    groups: dict[tuple[Any, ...], list[str]] = {}
    for cat, o in outcomes.items():
        groups.setdefault((o.kind, o.limit, o.beaten_above, o.varies, o.blocked, o.n_points, o.n_wins,
                           o.n_losses), []).append(cat)
    parts: list[Inline] = []
    for _, cats in sorted(groups.items(), key=lambda kv: (-_RANK[kv[0][0]], -(kv[0][1] or 0))):
        if parts:
            parts.append("; ")
        parts.extend(_phrase(variant, outcomes[cats[0]], cats, min_speedup, indicative))
    if any(o.varies for o in outcomes.values()):
        parts.append(" (where output lengths disagree, the most conservative result; see the break-even table)")
    if no_interval:
        parts.append(" (some points have no interval, e.g. a single repeat: indicative only)")
    parts.append(f" ({basis})")
    kinds = {o.kind for o in outcomes.values()}
    blocked = any(o.blocked for o in outcomes.values())
    tone: Tone = "good" if kinds <= {"adopt_all", "adopt_upto"} and not blocked and not indicative else "warn"
    return parts, tone

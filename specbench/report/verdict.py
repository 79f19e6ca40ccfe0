"""The verdict: per drafter and category, adopt up to which concurrency, never, or inconclusive.

Speedup verdicts (`drafter_verdict`) read the 95% interval of the aggregate-throughput speedup: a
concurrency level is a win when the interval's low end clears `verdict.min_speedup` (practical
significance, default 1.05), "same" when the interval lies inside [1/m, m] (no practical difference, an
equivalence test at the same error rate), a loss when its high end is below 1.0, and undecided otherwise
(decide/decision.py states the rules). Without intervals (a single repeat and no variance history) the
point estimate decides, and the verdict says it is indicative only, once.
Every statement says how many measured levels decide it; a sanity gate that fired blocks "adopt".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from specbench.config import DEFAULT_MIN_SPEEDUP
from specbench.decide.decision import Outcome as Outcome4
from specbench.decide.decision import classify
from specbench.decide.family import FamilyLevel
from specbench.decide.hardware import check_saved
from specbench.decide.secondary import secondary_family
from specbench.metrics.claims import secondary_level
from specbench.metrics.warnings import BLOCKING, decode_warnings
from specbench.report.derived import RunData
from specbench.report.document import Inline, Strong, Tone
from specbench.report.fmt import fmt_span, num

Call = Literal["win", "same", "lose", "unclear"]
Kind = Literal["never", "mixed", "inconclusive", "no_difference", "adopt_upto", "adopt_all"]
_RANK: dict[str, int] = {"never": 0, "mixed": 1, "inconclusive": 2, "no_difference": 3, "adopt_upto": 4,
                         "adopt_all": 5}
_CALL: dict[Outcome4, Call] = {Outcome4.ADOPT: "win", Outcome4.NO_DIFFERENCE: "same", Outcome4.SLOWER: "lose",
                               Outcome4.UNDECIDED: "unclear"}


def level_call(speedup: float, low: float, high: float, min_speedup: float = DEFAULT_MIN_SPEEDUP) -> Call:
    """The interval's outcome (decision.classify): win, same (no practical difference), lose or unclear;
    the point estimate decides when there is no interval (never "same": equivalence needs an interval)."""
    if not (math.isnan(low) or math.isnan(high)):
        return _CALL[classify(low, high, min_speedup)]
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
    n_same: int = 0  # ... whose interval lies inside [1/m, m] (no practical difference)
    blocked: tuple[str, ...] = ()  # sanity gates that fired on the category's cells


def curve_outcome(curve: pd.DataFrame, be_status: str = "", be_concurrency: float = math.nan,
                  min_speedup: float = DEFAULT_MIN_SPEEDUP, adjusted: Mapping[Any, Outcome4] | None = None) -> Outcome:
    """Classify one speedup-vs-concurrency curve. The levels decide the kind; break_even.csv's crossing, when
    its status is pays_up_to, caps adoption below it (a win measured beyond the crossing does not extend it).
    `adjusted` (by the curve's index): the Holm-adjusted outcome of each level with an interval, which then
    decides it in place of its own 95% interval (`category_outcomes`)."""
    curve = curve.sort_values("concurrency")
    levels = [int(c) for c in curve["concurrency"]]
    calls = [_CALL[adjusted[i]] if adjusted is not None and i in adjusted else level_call(s, lo, hi, min_speedup)
             for i, s, lo, hi in zip(curve.index, curve["speedup"], curve["speedup_ci_low"], curve["speedup_ci_high"])]
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
    elif calls and all(c == "same" for c in calls):
        kind = "no_difference"
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
                   n_same=calls.count("same"), blocked=tuple(sorted(codes & BLOCKING)))


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
                   n_losses=sum(o.n_losses for o in outcomes), n_same=sum(o.n_same for o in outcomes),
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
                      min_speedup: float = DEFAULT_MIN_SPEEDUP, level: FamilyLevel | None = None) -> dict[str, Outcome]:
    """Per category: the combined outcome of the variant's valid curves (one per lengths x temperature), every
    level with an interval a claim of the variant's secondary family (`decide.secondary.secondary_family`)."""
    mine = cells[(cells["variant"] == variant) & cells["valid"]]
    adjusted = secondary_family(mine, min_speedup, level=level)
    out: dict[str, Outcome] = {}
    for category, cat_cells in mine.groupby("category", sort=True):
        curves = []
        for key, curve in cat_cells.groupby(["input_len", "output_len", "temperature"], dropna=False):
            k = dict(zip(["input_len", "output_len", "temperature"], key), category=category)
            curves.append(curve_outcome(curve, *_be_lookup(be, variant, k), min_speedup=min_speedup,
                                        adjusted=adjusted))
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
    elif o.kind == "no_difference":
        parts = [Strong(variant), f": no practical difference on {on} (interval inside [{1 / min_speedup:.3f}, "
                 f"{min_speedup:g}] at {_count(o.n_same, o.n_points)} levels; speedup "
                 f"{fmt_span(o.speedup_min, o.speedup_max)}): not worth adopting"]
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


INDICATIVE = "indicative only: "


def _history_text(history: dict[str, Any] | None) -> str:
    if not history:
        return "this hardware's calibration"
    entries = int(history.get("entries") or 1)
    return (f"this setup's variance history ({history.get('history') or 'calibration'}, pooled df "
            f"{float(history.get('df') or 0):g} over {entries} entr{'ies' if entries != 1 else 'y'})")


def launch_basis(cells: pd.DataFrame, variant: str, baseline: str,
                 history: dict[str, Any] | None = None) -> tuple[bool, str]:
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
    if units and units <= {"launch", "launch+history"}:
        return False, f"{per}; {cv_text}, measured and pooled with {_history_text(history)} in every interval"
    if "history" in units and units <= {"launch", "repeat+calibration", "history"}:
        return False, (f"{per}; {cv_text} and the between-repeat variance from {_history_text(history)}: "
                       "a cell measured once gets its interval from these pooled components")
    if units and units <= {"launch", "repeat+calibration"}:
        return False, f"{per}; {cv_text} from {_history_text(history)}, added to every interval"
    return True, (f"{INDICATIVE}{per} and no calibration for this hardware, so the variance between "
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
    outcomes = category_outcomes(data.cells, data.break_even, variant, min_speedup,
                                 secondary_level(data.cells, variant, data.baseline, data.history))
    if not outcomes:
        return [Strong(variant), f": no valid measurements (status {status or 'unknown'})"], "warn"
    indicative, basis = launch_basis(data.cells, variant, data.baseline, data.history)
    no_interval = not all(o.has_intervals for o in outcomes.values())
    if no_interval:  # point estimates decide somewhere: observations, not advice; each reason said once
        basis = f"{INDICATIVE}some points have no interval (e.g. a single repeat); {basis.removeprefix(INDICATIVE)}"
        indicative = True
    if all(o.kind == "never" and not o.varies for o in outcomes.values()):
        allc = combine(list(outcomes.values()))
        span = Strong(fmt_span(allc.speedup_min, allc.speedup_max))
        below = f", below 1.0 at {_count(allc.n_losses, allc.n_points)} measured points"
        if indicative:
            return [Strong(variant), " looks slower: speedup ", span, f"{below} ({basis})",
                    *_capped(data, variant)], "warn"
        return [Strong(variant), " never pays: speedup ", span, f"{below}; do not adopt ({basis})",
                *_capped(data, variant)], "bad"
    groups: dict[tuple[Any, ...], list[str]] = {}
    for cat, o in outcomes.items():
        groups.setdefault((o.kind, o.limit, o.beaten_above, o.varies, o.blocked, o.n_points, o.n_wins,
                           o.n_losses, o.n_same), []).append(cat)
    parts: list[Inline] = []
    for _, cats in sorted(groups.items(), key=lambda kv: (-_RANK[kv[0][0]], -(kv[0][1] or 0))):
        if parts:
            parts.append("; ")
        parts.extend(_phrase(variant, outcomes[cats[0]], cats, min_speedup, indicative))
    if any(o.varies for o in outcomes.values()):
        parts.append(" (where output lengths disagree, the most conservative result; see the break-even table)")
    parts.append(f" ({basis})")
    parts.extend(_capped(data, variant))
    kinds = {o.kind for o in outcomes.values()}
    blocked = any(o.blocked for o in outcomes.values())
    tone: Tone = "good" if kinds <= {"adopt_all", "adopt_upto"} and not blocked and not indicative else "warn"
    return parts, tone


def _capped(data: RunData, variant: str) -> list[Inline]:
    """The verdict's last words for a variant with max_concurrency below the sweep's top (else none)."""
    cap = data.caps.get(variant)
    return [] if cap is None else [f"; not measured above C={cap} (max_concurrency: its server runs at most {cap} "
                                   "at once)"]

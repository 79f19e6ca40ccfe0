"""The verdict's first lines: one word per drafter and concurrency (decide/decision.py's outcomes), and
how many more units would decide the points still undecided. RunData -> blocks and text."""

from __future__ import annotations

import math

import pandas as pd

from specbench.config import DEFAULT_MIN_SPEEDUP
from specbench.decide.decision import (
    ADVICE_POWER,
    MIXED,
    RANK,
    WORD,
    MeasuredInterval,
    Outcome,
    classify,
    summary_word,
    units_to_decide,
)
from specbench.metrics.warnings import BLOCKING, decode_warnings
from specbench.report.document import Table
from specbench.report.fmt import NOT_MEASURED, caps_note
from specbench.report.load import RunData
from specbench.report.verdict import launch_basis

BLOCKED = "blocked"  # a table cell whose adopting point a sanity gate overrules

LEGEND = ("In the table: adopt = the speedup interval clears {m:g}; same = it lies inside [{lo:.3f}, {m:g}] (no "
          "practical difference); slower = it lies below 1; undecided = anything else, no interval, or intervals "
          "without the variance between launches (indicative only); mixed = the categories or output lengths "
          "at that concurrency decided differently; adopt: rewrite = the points of the category named decide so, "
          "the others do not (undecided or mixed); blocked = it would adopt, but a sanity gate fired.")


def _min_speedup(data: RunData) -> float:
    return float((data.config.get("verdict") or {}).get("min_speedup") or DEFAULT_MIN_SPEEDUP)


def point_outcomes(cells: pd.DataFrame, variant: str, min_speedup: float) -> pd.Series:
    """The outcome of each valid cell of a variant, indexed like `cells`."""
    mine = cells[(cells["variant"] == variant) & cells["valid"].astype(bool)]
    return pd.Series([classify(float(lo), float(hi), min_speedup)
                      for lo, hi in zip(mine["speedup_ci_low"], mine["speedup_ci_high"])], index=mine.index,
                     dtype=object)


def verdict_table(data: RunData) -> Table | None:
    """Drafter x concurrency, one word per cell: the common outcome of the cell's points."""
    c = data.cells
    if not len(c) or not data.drafters:
        return None
    m = _min_speedup(data)
    levels = sorted({int(x) for x in c["concurrency"].dropna()})
    rows = []
    for v in data.drafters:
        outs = point_outcomes(c, v, m)
        if launch_basis(c, v, data.baseline, data.history)[0]:  # no launch variance: nothing is decided
            outs = outs.map(lambda _: Outcome.UNDECIDED)
        conc = c.loc[outs.index, "concurrency"]
        cats = c.loc[outs.index, "category"].astype(str)
        gated = c.loc[outs.index, "warnings"].map(_blocked) if "warnings" in c else pd.Series(False, outs.index)
        rows.append([v] + [_word(outs[conc == lv], gated[conc == lv], cats[conc == lv]) if (conc == lv).any()
                           else NOT_MEASURED if data.not_measured(v, lv) else "-" for lv in levels])
    return Table(["drafter"] + [f"C={lv}" for lv in levels], rows)


def _blocked(encoded: object) -> bool:
    return bool({w["code"] for w in decode_warnings(encoded)} & BLOCKING)


def _word(outs: pd.Series, gated: pd.Series, categories: pd.Series) -> str:
    """summary_word, except that a sanity gate that fired on an adopting point overrules it ("blocked"),
    and that where the categories decide differently, the decided ones are named ("adopt: rewrite")."""
    if any(o is Outcome.ADOPT and g for o, g in zip(outs, gated)):
        return BLOCKED
    word = summary_word(outs)
    if word not in (WORD[Outcome.UNDECIDED], MIXED):
        return word
    by_word: dict[str, list[str]] = {}
    for cat in sorted(set(categories)):
        w = summary_word(outs[categories == cat])
        if w not in (WORD[Outcome.UNDECIDED], MIXED):
            by_word.setdefault(w, []).append(cat)
    rank = {WORD[o]: r for o, r in RANK.items()}
    return "; ".join(f"{w}: {', '.join(by_word[w])}" for w in sorted(by_word, key=rank.__getitem__)) or word


def legend(data: RunData) -> str:
    m = _min_speedup(data)
    note = caps_note(data.caps)
    return LEGEND.format(m=m, lo=1 / m) + (f" {note}" if note else "")


LAUNCH_FROM_HISTORY = ("history", "repeat+calibration")  # interval units that carry a launch component


def undecided_advice(data: RunData, variant: str, min_speedup: float) -> str:
    """For a variant's undecided points that have an interval: how many units per variant (launches when
    launches are the units, else repeats) would decide them with 80% power if their estimates and variance
    held (decision.units_to_decide at ADVICE_POWER)."""
    c = data.cells
    if not len(c):
        return ""
    outs = point_outcomes(c, variant, min_speedup)
    und = outs[outs == Outcome.UNDECIDED].index
    rows = c.loc[und]
    rows = rows[rows["speedup_ci_low"].notna() & rows["speedup_ci_high"].notna()]
    if not len(rows):
        return ""
    needs: list[int] = []
    beyond = 0
    unit = "launches"
    for _, r in rows.iterrows():
        # launches decide when launches are the units, or when the interval holds a launch component from
        # the variance history or a calibration: more repeats inside one launch do not shrink that one
        by_launch = float(r.get("launches", 1) or 1) >= 2 or r.get("interval_unit") in LAUNCH_FROM_HISTORY
        unit = "launches" if by_launch else "repeats"
        have = int(r["launches"] if by_launch else r["repeats"])
        df = float(r.get("speedup_ci_df", math.nan))
        got = units_to_decide(MeasuredInterval(float(r["speedup_ci_low"]), float(r["speedup_ci_high"]),
                                               df if df > 0 else max(1.0, 2.0 * (have - 1)), max(1, have)),
                              min_speedup, power=ADVICE_POWER)
        if got.units is None:
            beyond += 1
        else:
            needs.append(got.units)
    text = f"{len(rows)} point{'s' if len(rows) != 1 else ''} undecided"
    if needs:
        held = f"with {ADVICE_POWER:.0%} power if their estimates and variance held"
        text += (f": {min(needs)}-{max(needs)} {unit} per variant would decide {len(needs)} of them {held}"
                 if min(needs) != max(needs) else
                 f": {needs[0]} {unit} per variant would decide {len(needs)} of them {held}")
    if beyond:
        text += f"{';' if needs else ':'} {beyond} would need more than 50 (estimate too close to {min_speedup:g})"
    return text


__all__ = ["MIXED", "WORD", "legend", "point_outcomes", "undecided_advice", "verdict_table"]

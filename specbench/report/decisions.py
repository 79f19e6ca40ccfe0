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
from specbench.decide.family import FamilyLevel
from specbench.decide.primary import family_outcome
from specbench.metrics.claims import primary_level, secondary_level
from specbench.metrics.mix import mix_key
from specbench.metrics.warnings import BLOCKING, decode_warnings
from specbench.report.assumptions import unchecked
from specbench.report.derived import RunData
from specbench.report.document import Table
from specbench.report.fmt import NOT_MEASURED, caps_note
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


PRIMARY_LEGEND = ("In the table (the primary verdict): each word is one claim about the drafter's speedup over the "
                  "workload's mix at that concurrency, the workload's time ratio over its {p} (categories x lengths), "
                  "each weighted by the baseline's time on it; adopt = the mix interval clears {m:g}; same = it lies "
                  "inside [{lo:.3f}, {m:g}] (no practical difference); slower = it lies below 1; undecided = "
                  "anything else, no interval, or intervals without the variance between launches (indicative "
                  "only); mixed = its temperatures or rates decided differently; blocked = it would adopt, but a "
                  "sanity gate fired on one of its points.")


def looks_of(data: RunData) -> int:
    """The sequential looks a run's intervals are spread over (sweep.until: decided), else 1."""
    sweep = data.config.get("sweep") or {}
    if sweep.get("until") != "decided":
        return 1
    return int(sweep.get("max_launches") or 10) - int(sweep.get("launches") or 1) + 1


def primary_claims(data: RunData) -> dict[tuple[str, int], list[tuple[float, float, float, bool]]]:
    """(drafter, concurrency) -> per mix group (temperature, rate) at it: its 95% mix interval (low, high, df)
    and whether a blocking gate fired on one of its points. Its groups are the primary family."""
    c = data.cells
    out: dict[tuple[str, int], list[tuple[float, float, float, bool]]] = {}
    mine = c[c["variant"].isin(data.drafters) & c["valid"].astype(bool) & c["mix_points"].notna()]
    for key, g in mine.groupby(mine.apply(mix_key, axis=1), sort=False):
        r = g.iloc[0]
        gated = bool(g["warnings"].map(_blocked).any()) if "warnings" in g else False
        out.setdefault((str(key[0]), int(key[1])), []).append(
            (float(r["mix_speedup_ci_low"]), float(r["mix_speedup_ci_high"]), float(r["mix_speedup_ci_df"]), gated))
    return out


def family_level(data: RunData) -> FamilyLevel:
    """The level the table's claims are read at (metrics.claims.primary_level)."""
    return primary_level(data.cells, data.drafters, data.baseline, data.history, looks_of(data))


def family_text(data: RunData) -> str:
    """The family the table's words form and the error rate it controls ("" without mix columns)."""
    if "mix_points" not in data.cells:
        return ""
    claims = primary_claims(data)
    k, looks = sum(map(len, claims.values())), looks_of(data)
    if not k:
        return ""
    drafters = len({v for v, _ in claims})
    level = family_level(data)
    if math.isfinite(level.one):
        how = (f"at the family's simultaneous critical value, t = {level.one:.2f} for adopt and slower and "
               f"{level.two:.2f} for same ({level.method}: the claims' shared launch effects and shared baseline"
               f"{f', over {looks} looks' if looks > 1 else ''})")
    else:
        how = (f"at {100 * level.alpha / k:.3g}% per side (2.5% / {k}{f' / {looks} looks' if looks > 1 else ''}, "
               f"{level.method})")
    return (f"Primary family: the table's {k} claim{'s' if k != 1 else ''} ({drafters} drafter"
            f"{'s' if drafters != 1 else ''} x concurrency); each word is read from its mix interval re-drawn {how}, "
            "so the chance that any word of the table is wrong is at most 2.5% per outcome (family-wise: adopt "
            f"where the true mix speedup is at most {_min_speedup(data):g}, slower where it is at least 1, same "
            "outside the margin)." + (" It holds under the conditions each drafter's opening sentence names, which "
                                      "this run could not test (docs/metrics.md, \"What the error rate assumes\")."
                                      if any(unchecked(data, v) for v in {v for v, _ in claims}) else ""))


def secondary_text(data: RunData) -> str:
    """The family the per-category lines form and the error rate it controls (decide/secondary.py)."""
    c = data.cells
    if not len(c) or not data.drafters or "speedup_ci_low" not in c:
        return ""
    mine = c[c["variant"].isin(data.drafters) & c["valid"].astype(bool) & c["speedup_ci_low"].notna()
             & c["speedup_ci_high"].notna()]
    sizes = sorted({int(n) for n in mine.groupby("variant").size()})
    if not sizes:
        return ""
    n = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    levels = [secondary_level(c, v, data.baseline, data.history) for v in sorted(set(mine["variant"]))]
    qs = sorted(lv.one for lv in levels if math.isfinite(lv.one))
    if len(qs) == len(levels):
        q = f"{qs[0]:.2f}" if qs[0] == qs[-1] else f"{qs[0]:.2f}-{qs[-1]:.2f}"
        how = (f"each outcome decided at the family's simultaneous critical value (t = {q} for adopt and slower; "
               "max-t from the points' shared launch effects and shared baseline)")
    else:
        some = f" ({len(qs)} of {len(levels)} drafters at a max-t critical value, t >= {qs[0]:.2f})" if qs else ""
        how = f"each outcome decided by Holm's step-down at 2.5% per side on the points' one-sided p-values{some}"
    return (f"The per-category lines below are secondary claims: each drafter's family is its {n} points with an "
            f"interval (category x length x concurrency), {how}, so the chance that any line of a drafter is "
            "wrong is at most 2.5% per outcome (family-wise within each drafter's secondary family).")


def verdict_table(data: RunData) -> Table | None:
    """Drafter x concurrency, one word per cell: the primary claim, from the mix interval at the family's
    level (`decide.primary.primary_outcome`); for cells without mix columns (derived before them), the common
    outcome of the cell's points."""
    c = data.cells
    if not len(c) or not data.drafters:
        return None
    m = _min_speedup(data)
    levels = sorted({int(x) for x in c["concurrency"].dropna()})
    if "mix_points" in c:
        return _primary_table(data, levels, m)
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


def _primary_table(data: RunData, levels: list[int], m: float) -> Table:
    words = table_words(data, m)
    rows = [[v] + [words[v].get(lv) or (NOT_MEASURED if data.not_measured(v, lv) else "-") for lv in levels]
            for v in data.drafters]
    return Table(["drafter"] + [f"C={lv}" for lv in levels], rows)


def table_words(data: RunData, min_speedup: float | None = None) -> dict[str, dict[int, str]]:
    """Drafter -> concurrency -> the primary table's word (adopt, same, slower, undecided, mixed, blocked)
    for each level with a mix claim: its mix interval at the family's level, undecided for an indicative
    drafter (no launch variance in its intervals), blocked where a sanity gate fired on an adopting point."""
    m = _min_speedup(data) if min_speedup is None else min_speedup
    claims = primary_claims(data) if "mix_points" in data.cells else {}
    level = family_level(data) if claims else None
    out: dict[str, dict[int, str]] = {v: {} for v in data.drafters}
    for (v, lv), groups in claims.items():
        if v not in out or level is None:
            continue
        indicative = launch_basis(data.cells, v, data.baseline, data.history)[0]
        outs = [Outcome.UNDECIDED if indicative else family_outcome(lo, hi, df, level, m)
                for lo, hi, df, _ in groups]
        blocked = any(o is Outcome.ADOPT and g for o, (*_, g) in zip(outs, groups))
        out[v][lv] = BLOCKED if blocked else summary_word(outs)
    return out


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
    if "mix_points" in data.cells:
        points = int(data.cells["mix_points"].max()) if data.cells["mix_points"].notna().any() else 0
        text = PRIMARY_LEGEND.format(m=m, lo=1 / m, p=f"{points} point{'s' if points != 1 else ''}")
        return " ".join(x for x in (text, family_text(data), secondary_text(data), note) if x)
    return " ".join(x for x in (LEGEND.format(m=m, lo=1 / m), secondary_text(data), note) if x)


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


__all__ = ["BLOCKED", "MIXED", "WORD", "family_level", "family_text", "legend", "point_outcomes", "primary_claims",
           "secondary_text", "table_words", "undecided_advice", "verdict_table"]

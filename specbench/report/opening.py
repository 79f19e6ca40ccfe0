"""The report's first lines: one sentence per drafter, read in a minute. Where to switch it on (the primary
table's words, over the workload's mix), how sure (the family's error level), and what deciding its
undecided levels would cost (launches per variant, and their time from what this run's launches took:
pricing/relaunch.py). RunData -> inline parts; the definitions stay in the verdict's "How to read this".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pandas as pd
import scipy.stats

from specbench.config import DEFAULT_MIN_SPEEDUP
from specbench.decide.decision import ADVICE_POWER, MIXED, WORD, MeasuredInterval, Outcome, units_to_decide
from specbench.decide.hardware import check_saved
from specbench.pricing.planner import dur
from specbench.pricing.relaunch import launch_seconds, measuring_share
from specbench.report.assumptions import condition
from specbench.report.decisions import BLOCKED, family_level, primary_claims, table_words
from specbench.report.derived import RunData, read_csv
from specbench.report.document import Inline, Strong
from specbench.report.update_section import UPDATE_FILE
from specbench.report.verdict import launch_basis

CAP = 50  # launches per variant beyond which a level is called out of reach (decision.units_to_decide's cap)
PHRASE = {WORD[Outcome.ADOPT]: "switch it on at", WORD[Outcome.NO_DIFFERENCE]: "no practical difference at",
          WORD[Outcome.SLOWER]: "leave it off at", BLOCKED: "a sanity gate blocks it at",
          MIXED: "mixed (temperatures or rates disagree) at", WORD[Outcome.UNDECIDED]: "undecided at"}


@dataclass(frozen=True)
class LevelNeed:
    """An undecided level of a drafter: the launches per variant that would decide it (None: more than CAP,
    or no interval to judge from) and the launches it has."""

    concurrency: int
    launches: int | None
    have: int


def _levels_text(levels: list[int]) -> str:
    return "C=" + ", ".join(str(lv) for lv in levels)


def _launches_at(data: RunData, variant: str, level: int) -> int:
    """The fewest launches a point of the drafter or the baseline at `level` was measured in."""
    c = data.cells
    got = c.loc[c["variant"].isin([variant, data.baseline]) & (c["concurrency"] == level), "launches"]
    return int(got.min()) if got.notna().any() else 1


def mix_speedups(data: RunData, variant: str) -> dict[int, float]:
    """Concurrency -> the drafter's mix speedup there (the first temperature and rate), NaN where none."""
    c = data.cells
    if "mix_speedup" not in c:
        return {}
    mine = c[(c["variant"] == variant) & c["mix_speedup"].notna()].sort_values(["concurrency", "temperature"])
    return {int(g["concurrency"].iloc[0]): float(g["mix_speedup"].iloc[0])
            for _, g in mine.groupby("concurrency", sort=True)}


def undecided_needs(data: RunData, variant: str, words: dict[int, str]) -> list[LevelNeed]:
    """Per undecided level: the launches per variant that would decide its mix claim at the family's level with
    ADVICE_POWER, if its estimate and variance held (decision.units_to_decide on the claim's interval re-drawn
    at the family's critical value, that per-claim level held as the df grow)."""
    claims = primary_claims(data)
    level = family_level(data)
    m = float((data.config.get("verdict") or {}).get("min_speedup") or DEFAULT_MIN_SPEEDUP)
    out = []
    for lv, word in sorted(words.items()):
        if word != WORD[Outcome.UNDECIDED]:
            continue
        have = _launches_at(data, variant, lv)
        needs: list[int | None] = []
        for lo, hi, df, _ in claims.get((variant, lv), []):
            lo2, hi2 = level.bounds(lo, hi, df)
            alpha = float(scipy.stats.t.sf(level.quantile(df), df)) if df > 0 else math.nan
            got = units_to_decide(MeasuredInterval(lo2, hi2, df, have), m, cap=CAP, alpha=alpha, power=ADVICE_POWER) \
                if lo2 > 0 and hi2 > 0 else None
            needs.append(None if got is None else got.units)
        known = [n for n in needs if n is not None]
        out.append(LevelNeed(lv, max(known) if known and len(known) == len(needs) else None, have))
    return out


def decide_seconds(data: RunData, variant: str, needs: list[LevelNeed]) -> tuple[int, float]:
    """(launches to add, seconds) to decide the reachable undecided levels: round k launches the drafter and
    the baseline for the levels that still need a k-th added launch, each launch priced by
    pricing.relaunch.launch_seconds from run.json's startup and wall seconds and those points' share of the
    variant's measuring time."""
    reach = [n for n in needs if n.launches is not None]
    more = max((n.launches - n.have for n in reach if n.launches is not None), default=0)
    c, info = data.cells, data.variants
    total = 0.0
    for k in range(1, more + 1):
        levels = {n.concurrency for n in reach if n.launches is not None and n.launches - n.have >= k}
        for v in (variant, data.baseline):
            points = set(c.loc[(c["variant"] == v) & c["concurrency"].isin(levels), "point_id"].astype(str))
            launched = int(c.loc[c["variant"] == v, "launches"].max()) if (c["variant"] == v).any() else 1
            vi = info.get(v, {})
            total += launch_seconds(_num(vi.get("startup_s")), _num(vi.get("wall_s")), launched,
                                    measuring_share(c, v, points))
    return more, total


def _num(x: object) -> float | None:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _price(data: RunData, seconds: float) -> str:
    """Seconds of launches in the team's unit: GPU-hours where the run held GPUs, else time on this machine."""
    gpus = _gpus(data)
    return f"{seconds / 3600 * gpus:.1f} GPU-hours" if gpus else f"{dur(seconds)} on this machine"


def _gpus(data: RunData) -> int:
    """GPUs a launch holds: the node's GPUs as environment.json lists them, times engine.nodes."""
    gpus = len(data.environment.get("gpus") or [])
    nodes = int((data.config.get("engine") or {}).get("nodes") or 1)
    return gpus * nodes


def cost_text(data: RunData, variant: str, needs: list[LevelNeed]) -> str:
    """What deciding the undecided levels would cost, in launches and time (GPU-hours where it ran on GPUs)."""
    reach = [n for n in needs if n.launches is not None]
    out_of_reach = [n.concurrency for n in needs if n.launches is None]
    parts = []
    if reach:
        lo, hi = min(n.launches or 0 for n in reach), max(n.launches or 0 for n in reach)
        per = f"{lo}" if lo == hi else f"{lo}-{hi}"
        more, secs = decide_seconds(data, variant, reach)
        price = _price(data, secs)
        parts.append(f"deciding {_levels_text([n.concurrency for n in reach])} would take {per} launches per "
                     f"variant with {ADVICE_POWER:.0%} power if the estimates held ({more} more of {variant} and "
                     f"the baseline, about {price})")
    if out_of_reach:
        parts.append(f"{_levels_text(out_of_reach)} more than {CAP} (too close to the margin, or no interval)")
    return ", ".join(parts)


def sureness(data: RunData, variant: str) -> str:
    """How sure the table's words are: the family's error level, how it was set, and what it rests on that
    this run did not test (report/assumptions.py)."""
    level = family_level(data)
    k = level.claims
    how = level.method.split(" (")[0]
    return (f"the table's words are wrong with at most {100 * level.alpha:.3g}% chance per outcome "
            f"(family-wise over {k} claim{'s' if k != 1 else ''}, {how}){condition(data, variant)}")


T = TypeVar("T")
# The order a sentence says its words in: what to do first, what is left open last
SAID_ORDER = (WORD[Outcome.ADOPT], WORD[Outcome.NO_DIFFERENCE], WORD[Outcome.SLOWER], BLOCKED, MIXED,
              WORD[Outcome.UNDECIDED])


def _grouped(items: Iterable[tuple[str, T]]) -> dict[str, list[T]]:
    """Items by their word, in SAID_ORDER (each word's items in the order given)."""
    by: dict[str, list[T]] = {}
    for w, item in items:
        by.setdefault(w, []).append(item)
    return {w: by[w] for w in SAID_ORDER if w in by}


def drafter_sentence(data: RunData, variant: str, words: dict[int, str] | None = None) -> list[Inline]:
    """One sentence for one drafter: where to switch it on, how sure, what the undecided levels would cost."""
    words = table_words(data)[variant] if words is None else words
    info = data.variants.get(variant, {})
    if info.get("status") == "failed":
        return [Strong(variant), f": failed, no verdict ({info.get('reason') or 'no reason recorded'})."]
    if variant in check_saved(data.environment, data.config, data.baseline).withheld:
        return [Strong(variant), ": no verdict, measured on hardware unlike the baseline's (see Hardware)."]
    if not words:
        return [Strong(variant), ": no verdict (no mix claim measured; see the verdict below)."]
    speed = mix_speedups(data, variant)
    indicative, basis = launch_basis(data.cells, variant, data.baseline, data.history)
    if indicative:
        rerun = _rerun_text(data, variant)
        return [Strong(variant), f": nothing decided, {_observed(speed)} on the workload's mix; {basis}"
                                 + (f" ({rerun})." if rerun else ".")]
    by_word = _grouped((w, lv) for lv, w in sorted(words.items()))
    said = []
    for w, at in by_word.items():
        xs = ", ".join(f"{speed[x]:.2f}x" for x in at if x in speed and math.isfinite(speed[x]))
        said.append(f"{PHRASE[w]} {_levels_text(at)}" + (f" (mix speedup {xs})" if xs else ""))
    lead = "" if WORD[Outcome.ADOPT] in by_word or WORD[Outcome.UNDECIDED] not in by_word else \
        "switch it on nowhere yet, "
    cost = cost_text(data, variant, undecided_needs(data, variant, words))
    return [Strong(variant), f": {lead}{'; '.join(said)}; {sureness(data, variant)}" + (f"; {cost}." if cost else ".")]


def _observed(speed: dict[int, float]) -> str:
    """An indicative drafter's mix speedups as observations ("measured 1.10x at C=1, 0.95x at C=4")."""
    seen = [f"{x:.2f}x at C={lv}" for lv, x in sorted(speed.items()) if math.isfinite(x)]
    return "measured " + ", ".join(seen) if seen else "no mix speedup measured"


def _rerun_text(data: RunData, variant: str) -> str:
    """What a rerun with the between-launch variance in its intervals would take: the drafter and the baseline
    launched twice each, every launch priced as this run's (pricing.relaunch.launch_seconds, whole sweep);
    "" when run.json holds no seconds."""
    secs = 0.0
    for v in (variant, data.baseline):
        vi = data.variants.get(v, {})
        got = data.cells.loc[data.cells["variant"] == v, "launches"]
        launched = int(got.max()) if got.notna().any() else 1
        secs += 2 * launch_seconds(_num(vi.get("startup_s")), _num(vi.get("wall_s")), launched)
    if not secs > 0:
        return ""
    return f"2 launches of {variant} and the baseline would take about {_price(data, secs)}"


def update_sentence(data: RunData, variant: str, words: pd.DataFrame) -> list[Inline]:
    """A `specbench update` run's sentence for its new head: the update's words at every level of the run it
    updates (update.csv), which answer for the head where the run's own table holds only the level it launched."""
    first = words.iloc[0]
    rows = words.sort_values("concurrency")
    by_word = _grouped((str(r["word"]), (int(r["concurrency"]), str(r["source"]),
                                         float(r["predicted"] if r["source"] == "predicted" else r["measured"])))
                       for _, r in rows.iterrows())
    said = []
    for w, at in by_word.items():
        xs = ", ".join(f"{src if k == 0 or src != at[k - 1][1] else ''} {x:.2f}x".lstrip() if math.isfinite(x)
                       else src for k, (_, src, x) in enumerate(at))
        said.append(f"{PHRASE[w]} {_levels_text([c for c, _, _ in at])}" + (f" ({xs})" if xs else ""))
    run = Path(str(first["reference_run"])).name
    # a measured word compares this run's launch with its baseline's windows, wherever those were measured
    measured = condition(data, variant) if (words["source"] == "measured").any() else ""
    return [Strong(variant), f", a new head of {first['reference_variant']} in {run}: {'; '.join(said)}; each word "
                             f"per level at 95% (not family-wise), predicted from the step cost {run} measured and the "
                             f"acceptance measured here where its interval decides (\"Update\" below){measured}."]


def opening_lines(data: RunData) -> list[list[Inline]]:
    """One sentence per drafter with a primary table (none for a run derived before the mix columns); a
    `specbench update` run's new head by the update's words."""
    if not len(data.cells) or "mix_points" not in data.cells or not data.drafters:
        return []
    words = table_words(data)
    update = read_csv(data.path / UPDATE_FILE)
    updated = set(update["variant"].astype(str)) if len(update) else set()
    return [update_sentence(data, v, update[update["variant"].astype(str) == v]) if v in updated
            else drafter_sentence(data, v, words[v]) for v in data.drafters]


def plain(parts: list[Inline]) -> str:
    """A sentence as plain text (the console)."""
    return "".join(p if isinstance(p, str) else p.text for p in parts)


__all__ = ["LevelNeed", "cost_text", "decide_seconds", "drafter_sentence", "mix_speedups", "opening_lines", "plain",
           "sureness", "undecided_needs", "update_sentence"]


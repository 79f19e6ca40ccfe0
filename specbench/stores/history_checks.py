"""Whether a pooled history fits the run before it goes into the run's intervals: each entry's baseline speed
against the run's (t test), every variant's own launch and repeat components against the history's (F tests)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.decide.decision import (
    SPEED_ALPHA,
    Design,
    Estimate,
    consistent,
    pool,
    shift_variance,
    speed_consistent,
)
from specbench.decide.intervals import LaunchVariance
from specbench.stores.history_lookup import lookup
from specbench.stores.probe_check import full_sweep
from specbench.stores.variance_history import (
    Calibration,
    estimate,
    estimate_of,
    estimate_repeats,
    from_dict,
    load_history,
    pooled,
)


def inconsistency(cells: pd.DataFrame, variants: str | list[str], history: Calibration) -> str | None:
    """Why a run's own estimates must not be pooled with the history it was given; None when they may be
    (or cannot be tested). Each variant (the baseline first, then every drafter: the interval assumes they
    share the history's variance) is F-tested on its between-launch component (2+ launches) and its
    between-repeat component (2+ repeats in a launch: how a run launched once is checked)."""
    notes = []
    for variant in [variants] if isinstance(variants, str) else variants:
        own = estimate(cells, variant, hardware={}, engine="", model="", source_run="") \
            or estimate_repeats(cells, variant, hardware={}, engine="", model="", source_run="")
        if own is None:
            continue
        for name, new, old in (("between-launch", estimate_of(own.rel_var, own.df),
                                estimate_of(history.rel_var, history.df)),
                               ("between-repeat", estimate_of(own.repeat_rel_var, own.repeat_df),
                                estimate_of(history.repeat_rel_var, history.repeat_df))):
            if new is not None and not (test := consistent(new, old)).ok:
                assert old is not None
                notes.append(f"{variant}'s {name} CV {100 * math.sqrt(new.var):.1f}% (df {new.df:g}) is inconsistent "
                             f"with the history's {100 * math.sqrt(old.var):.1f}% (df {old.df:g}; "
                             f"F test p = {test.p:.3g})")
    return "; ".join(notes) or None


def speeds(cells: pd.DataFrame, variant: str) -> dict[str, float]:
    """point_id -> a variant's output throughput, over its valid cells."""
    c = cells[(cells["variant"] == variant) & cells["valid"].astype(bool)]
    if "output_throughput_tok_s" not in c or "point_id" not in c:
        return {}
    return {str(p): float(v) for p, v in zip(c["point_id"], c["output_throughput_tok_s"]) if v > 0}


def design_of(cells: pd.DataFrame, variant: str) -> Design:
    c = cells[(cells["variant"] == variant) & cells["valid"].astype(bool)]
    if c.empty:
        return Design(1, 1)
    launches = max(1, int(c["launches"].min()))
    return Design(launches, max(1, int((c["repeats"] // c["launches"].clip(lower=1)).min())))


def speed_refusal(entry: Calibration, cells: pd.DataFrame, baseline: str) -> str | None:
    """Why an entry is not this run's setup by its baseline speed; None when it may be (or cannot be told).
    d = mean over the points both measured of ln(run's / entry's baseline throughput), tested against 0
    with the entry's own components on their df (`decision.speed_consistent`, p < SPEED_ALPHA refuses)."""
    run = speeds(cells, baseline)
    shared = sorted(set(run) & set(entry.speeds))
    if not shared or not (entry.df > 0 and math.isfinite(entry.rel_var)):
        return None
    d = sum(math.log(run[p] / entry.speeds[p]) for p in shared) / len(shared)
    repeat = Estimate(entry.repeat_rel_var, entry.repeat_df) if entry.repeat_df > 0 else None
    shift = shift_variance(Estimate(entry.rel_var, entry.df), repeat, design_of(cells, baseline),
                           Design(max(1, entry.launches), max(1, entry.repeats)))
    test = speed_consistent(d, shift)
    if test.ok:
        return None
    return (f"baseline speed {100 * (math.exp(d) - 1):+.0f}% against {Path(entry.source_run).name or 'the entry'}'s at "
            f"{len(shared)} shared point{'s' if len(shared) != 1 else ''}, beyond its launch CV "
            f"{100 * math.sqrt(entry.rel_var):.1f}% (speed t test p = {test.p:.2g} < {SPEED_ALPHA:g}): not this setup")


@dataclass(frozen=True)
class HistoryUse:
    """What a run's intervals take from its copied history after the checks: the pooled figure (None:
    nothing; its components go into the intervals as estimated, on their df), which entries it pools and
    which were refused here (with why); `notes` are the report's lines."""

    used: Calibration | None
    pooled: list[str] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def variance(self, where: str) -> LaunchVariance | None:
        return None if self.used is None else self.used.variance(where)

    def to_dict(self) -> dict[str, Any]:
        used = None
        if self.used is not None:
            used = {"history": self.used.history, "entries": len(self.pooled), "rel_var": self.used.rel_var,
                    "df": self.used.df, "repeat_rel_var": self.used.repeat_rel_var, "repeat_df": self.used.repeat_df,
                    "source_run": self.used.source_run}
        return {"used": used, "pooled": self.pooled, "refused": self.refused, "notes": self.notes}


def check_run(cells: pd.DataFrame, variants: list[str], cal: Calibration | None) -> HistoryUse:
    """The copied history against the run's own cells (computed without it): entries whose baseline speed
    says they are another setup are refused one by one (`speed_refusal`); the rest are pooled, and refused
    together when any variant's own components are inconsistent with them (`inconsistency`). variants[0]
    is the baseline. Nothing here depends on the launches configured: how many launches each variant measured
    is in its cells, and the intervals read it from the windows (`metrics.speedup.speedup_ci`)."""
    if cal is None:
        return HistoryUse(None)
    entries = [from_dict(d) for d in cal.candidates] or [cal]  # an older copy: its pooled figure as one entry
    kept, refused = [], []
    for e in entries:
        if why := speed_refusal(e, cells, variants[0]):
            refused.append({"source_run": e.source_run, "reason": why})
        else:
            kept.append(e)
    notes = [f"variance history: {r['source_run']} not pooled: {r['reason']}" for r in refused]
    use = pooled(kept, cal.history) if kept else None
    if use is not None and (why := inconsistency(cells, variants, use)):
        refused += [{"source_run": e.source_run, "reason": why} for e in kept]
        notes.append(f"variance history not pooled: {why}")
        use = None
    return HistoryUse(use, pooled=[e.source_run for e in kept] if use else [],
                      refused=refused, notes=notes)


# ---------------------------------------------------------------------------------------------------
# A finished run's estimate, and the history a new run starts from


def _same_run(a: str, b: str) -> bool:
    """Two spellings of one run directory (relative or absolute)."""
    return a == b or (bool(a) and bool(b) and Path(a).resolve() == Path(b).resolve())


def add(entry: Calibration, path: Path) -> Calibration:
    """Append an estimate to a history (replacing an entry of the same run), after the F test of each of
    its components against the pooled full-sweep entries of its own setup (a calibration probe is tested
    against them, never the reverse: `probe_check`); returns the entry as stored (pooled False when
    refused)."""
    entries = [e for e in load_history(path) if not _same_run(e.source_run, entry.source_run)]
    same = full_sweep(lookup(entries, entry.setup).candidates) if entry.setup else []
    notes = []
    for name, new, old in (
            ("between-launch", estimate_of(entry.rel_var, entry.df),
             pool([x for e in same if (x := estimate_of(e.rel_var, e.df)) is not None])),
            ("between-repeat", estimate_of(entry.repeat_rel_var, entry.repeat_df),
             pool([x for e in same if (x := estimate_of(e.repeat_rel_var, e.repeat_df)) is not None]))):
        if new is None or old is None:
            continue
        test = consistent(new, old)
        if not test.ok:
            notes.append(f"{name} CV {100 * math.sqrt(new.var):.1f}% (df {new.df:g}) is inconsistent with the "
                         f"history's {100 * math.sqrt(old.var):.1f}% (df {old.df:g}; F test p = {test.p:.3g})")
    entry = replace(entry, pooled=not notes, note="; ".join(notes))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"hardware": entry.hardware, "entries": [asdict(e) for e in [*entries, entry]]},
                              indent=2) + "\n")
    tmp.replace(path)
    return entry



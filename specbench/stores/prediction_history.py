"""The prediction ledger: the time model's past errors against measurements of one setup (docs/metrics.md,
"Prediction from the model"). One JSON file per hardware in the history directory, next to its variance
history (`<hardware>.predictions.json` beside `<hardware>.json`), of entries (`PastError`): a variant's
predicted and measured speedup at one concurrency, keyed by the run's setup (run.json's
`variance_history.setup`, stores.setupkey), the variant's drafter family and the concurrency.

A prediction compared with a measurement is recorded (`RunLedger.record`; one entry per run, variant and
concurrency, re-recording replaces); a later prediction of a run of the same setup takes the errors of the
same drafter family at the same concurrency into the model's own error (`RunLedger.widen`), never the
run's own."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.config import RunConfig
from specbench.records.rundir import RunDir, atomic_write
from specbench.stores.setupkey import differences
from specbench.stores.variance_history import history_dir

SUFFIX = ".predictions.json"


@dataclass(frozen=True)
class PastError:
    """One prediction against its measurement (a row of surface.model_predict.predict_from_model)."""

    run: str  # the run's id (run.json's run_id)
    variant: str
    drafter: str  # the variant's drafter family (its config's `drafter`)
    reference: str  # the surface or run directory the model came from
    concurrency: int
    predicted: float
    measured: float
    error: float  # predicted / measured - 1
    date: str
    setup: dict[str, str] = field(default_factory=dict)

    def same_slot(self, other: PastError) -> bool:
        return (self.run, self.variant, self.concurrency) == (other.run, other.variant, other.concurrency)


def ledger_path(setup: Mapping[str, str], cache: Path | None = None) -> Path:
    """The ledger of a setup's hardware in `cache` (a history directory; default history_dir())."""
    return (cache or history_dir()) / f"{setup['hardware']}{SUFFIX}"


def load_ledger(path: Path) -> list[PastError]:
    """The entries of a ledger file; [] when there is none or it is unreadable (then it is not used)."""
    names = {f.name for f in fields(PastError)}
    try:
        items = json.loads(path.read_text())["entries"]
        return [PastError(**{k: v for k, v in e.items() if k in names}) for e in items]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return []


def save_ledger(entries: list[PastError], path: Path) -> None:
    """Write the ledger atomically (a temporary file renamed: a reader never sees half of it)."""
    atomic_write(path, json.dumps({"entries": [asdict(e) for e in entries]}, indent=2) + "\n")


def merge(old: list[PastError], new: list[PastError]) -> list[PastError]:
    """`old` with each entry of `new` replacing the one of the same run, variant and concurrency."""
    return [e for e in old if not any(e.same_slot(n) for n in new)] + new


def measured_enough(cells: pd.DataFrame, row: pd.Series) -> bool:
    """Whether a prediction row's measurement may be recorded: it has an interval (finite ends), or its
    variant's valid cells at that concurrency were measured in 2 or more launches."""
    if all(math.isfinite(float(row[c])) for c in ("measured_low", "measured_high")):
        return True
    c = cells[(cells["variant"] == row["variant"]) & (cells["concurrency"] == row["concurrency"]) & cells["valid"]]
    launches = c["launches"].dropna() if "launches" in c else pd.Series(dtype=float)
    return bool(len(launches)) and float(launches.min()) >= 2


@dataclass(frozen=True)
class RunLedger:
    """The ledger as one run sees it: its setup ({}: the run recorded none, so nothing is read or
    recorded), its id, its variants' drafter families and the entries of its setup's hardware."""

    path: Path | None
    setup: dict[str, str]
    run: str
    drafters: dict[str, str]
    entries: list[PastError]

    def past(self, drafter: str, concurrency: int) -> list[PastError]:
        """This setup's errors of a drafter family at a concurrency, from runs other than this one."""
        return [e for e in self.entries if e.run != self.run and e.drafter == drafter
                and e.concurrency == concurrency and e.setup and not differences(e.setup, self.setup)]

    def widen(self, errors: dict[tuple[str, int], list[float]], pairs: Mapping[str, str]) -> dict[tuple[str, int], int]:
        """Add the past errors to a Reference's `errors` ((reference variant, C) -> errors; `pairs`: run
        variant -> reference variant); returns how many were added per (reference variant, C)."""
        added: dict[tuple[str, int], int] = {}
        for rv in sorted(set(pairs.values())):
            families = sorted({self.drafters[v] for v, r in pairs.items() if r == rv and v in self.drafters})
            for c in sorted({e.concurrency for e in self.entries}):
                past = [e.error for d in families for e in self.past(d, c)]
                if past:
                    errors.setdefault((rv, c), []).extend(past)
                    added[(rv, c)] = len(past)
        return added

    def record(self, pred: pd.DataFrame, cells: pd.DataFrame, reference: str) -> list[PastError]:
        """Record the rows of a prediction whose measurement has an interval or 2+ launches (and a finite
        error); returns the entries recorded ([] without a setup)."""
        if self.path is None:
            return []
        date = datetime.now(UTC).isoformat(timespec="seconds")
        new = [PastError(run=self.run, variant=str(r["variant"]), drafter=self.drafters.get(str(r["variant"]), ""),
                         reference=reference, concurrency=int(r["concurrency"]), predicted=float(r["predicted"]),
                         measured=float(r["measured"]), error=float(r["error"]), date=date, setup=self.setup)
               for _, r in pred.iterrows() if math.isfinite(float(r["error"])) and measured_enough(cells, r)]
        if new:
            save_ledger(merge(load_ledger(self.path), new), self.path)
        return new


def for_run(rd: RunDir, cfg: RunConfig) -> RunLedger:
    """The ledger of a run's setup (in the config's history directory, as the variance history)."""
    setup = rd.setup()
    meta: dict[str, Any] = rd.load_meta()
    path = ledger_path(setup, history_dir(cfg.verdict.history_dir)) if setup.get("hardware") else None
    return RunLedger(path=path, setup=setup if path else {}, run=str(meta.get("run_id") or rd.path.resolve()),
                     drafters={v.name: v.drafter for v in cfg.variants}, entries=load_ledger(path) if path else [])

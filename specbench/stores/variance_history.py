"""The variance history: one JSON file per hardware of entries (`Calibration`), each a measured launch and
repeat variance with its degrees of freedom and its setup; read, pooled and appended here. Which entries a
run may pool is decided in `history_lookup.py`, whether they fit the run in `history_checks.py`."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.config import RunConfig
from specbench.decide.decision import (
    Estimate,
    pool,
)
from specbench.decide.intervals import LaunchVariance
from specbench.records.rundir import atomic_write
from specbench.stores.setupkey import hardware_key

FILE = "calibration.json"  # the copy inside a run directory
HISTORY_ENV = "SPECBENCH_HISTORY"


@dataclass(frozen=True)
class Calibration:
    rel_var: float  # between-launch variance of throughput / mean^2 (launch CV squared)
    df: float  # launches - 1: cells of one launch share its effect, so they add no degrees of freedom
    launches: int
    cells: int
    hardware: dict[str, Any]
    engine: str
    model: str
    created: str
    source_run: str
    repeat_rel_var: float = math.nan  # between repeats inside a launch (repeat CV squared)
    repeat_df: float = 0.0
    kind: str = "calibration"  # or "run": a run with 2+ launches (or repeats) added it; "probe": `calibrate --probe`
    pooled: bool = True  # False: refused by the F test against the history, kept for the record
    note: str = ""  # why it was refused
    entries: int = 1  # in a pooled figure: how many history entries it pools
    history: str = ""  # ... and the history file it comes from
    startup_s: float = math.nan  # the baseline's engine startup (for `specbench plan`)
    rates: dict[str, float] = field(default_factory=dict)  # concurrency -> the baseline's per-request tok/s
    setup: dict[str, str] = field(default_factory=dict)  # setupkey.setup_of; {}: unkeyed (an older entry)
    speeds: dict[str, float] = field(default_factory=dict)  # point_id -> the baseline's output tok/s (speed test)
    repeats: int = 1  # windows per cell and launch
    candidates: list[dict[str, Any]] = field(default_factory=list)  # a pooled figure: the entries it pools

    def variance(self, where: str) -> LaunchVariance:
        """The components as an interval adds them: each estimate on its df (the interval's t quantile is
        at the Welch-Satterthwaite df of the sum, `stats.satterthwaite_df`)."""
        return LaunchVariance(rel_var=self.rel_var, df=self.df, source=where,
                              repeat_rel_var=self.repeat_rel_var, repeat_df=self.repeat_df)

    @property
    def launch_cv(self) -> float:
        return math.sqrt(self.rel_var)


def model_key(cfg: RunConfig) -> str:
    """The model a history entry was measured on: its folder, or demo:<name>."""
    return str(cfg.model.path or f"demo:{cfg.model.demo}")


def history_dir(configured: str | None = None) -> Path:
    """Where histories live: the config's verdict.history_dir, else $SPECBENCH_HISTORY, else the cache."""
    from specbench.demo_models import cache_dir

    if configured:
        return Path(configured).expanduser()
    env = os.environ.get(HISTORY_ENV)
    return Path(env).expanduser() if env else cache_dir() / "calibration"


def store_path(hardware: dict[str, Any], cache: Path | None = None) -> Path:
    """This hardware's history file in `cache` (a history directory; default history_dir())."""
    return (cache or history_dir()) / f"{hardware_key(hardware)}.json"


def estimate(cells: pd.DataFrame, variant: str, *, hardware: dict[str, Any], engine: str, model: str,
             source_run: str) -> Calibration | None:
    """The between-launch variance from one variant's cells measured in 2+ launches: the mean over its
    valid cells of launch_cv^2 (each a truncated Kalibera-Jones estimate). None without such cells."""
    c = cells[(cells["variant"] == variant) & cells["valid"].astype(bool) & (cells["launches"] >= 2)]
    cv = c["launch_cv"].dropna()
    if cv.empty:
        return None
    launches = int(c["launches"].min())
    rep_var, rep_df = _repeat_component(c)
    return Calibration(rel_var=float((cv**2).mean()), df=float(launches - 1), launches=launches, cells=int(len(cv)),
                       hardware=hardware, engine=engine, model=model,
                       created=datetime.now(UTC).isoformat(timespec="seconds"), source_run=source_run,
                       repeat_rel_var=rep_var, repeat_df=rep_df)


def estimate_repeats(cells: pd.DataFrame, variant: str, *, hardware: dict[str, Any], engine: str, model: str,
                     source_run: str) -> Calibration | None:
    """The repeat component alone, from a run launched once with 2+ repeats (no launch df)."""
    c = cells[(cells["variant"] == variant) & cells["valid"].astype(bool)]
    rep_var, rep_df = _repeat_component(c)
    if not rep_df > 0:
        return None
    return Calibration(rel_var=math.nan, df=0.0, launches=int(c["launches"].min()), cells=int(len(c)),
                       hardware=hardware, engine=engine, model=model,
                       created=datetime.now(UTC).isoformat(timespec="seconds"), source_run=source_run,
                       repeat_rel_var=rep_var, repeat_df=rep_df, kind="run")


def _repeat_component(c: pd.DataFrame) -> tuple[float, float]:
    """Mean repeat_cv^2 over the cells, with the df of one cell (windows - launches): cells measured in
    the same launches may share a drift, so they are not counted as independent."""
    if "repeat_cv" not in c or "repeats" not in c:
        return math.nan, 0.0
    ok = c[c["repeat_cv"].notna()]
    if ok.empty:
        return math.nan, 0.0
    df = float((ok["repeats"] - ok["launches"]).min())
    return float((ok["repeat_cv"] ** 2).mean()), max(0.0, df)


def save(cal: Calibration, path: Path) -> Path:
    """Write the calibration atomically (a temporary file renamed): a crash mid-write, or a second run
    reading it, never leaves or sees half a history."""
    atomic_write(path, json.dumps(asdict(cal), indent=2) + "\n")
    return path


def from_dict(data: dict[str, Any]) -> Calibration:
    names = {f.name for f in fields(Calibration)}
    return Calibration(**{k: v for k, v in data.items() if k in names})


def load(path: Path) -> Calibration | None:
    """A stored calibration, or None when there is none (or it is unreadable: then it is not used)."""
    try:
        return from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def load_history(path: Path) -> list[Calibration]:
    """The entries of a history file (a file from before histories: its one calibration); [] if none."""
    try:
        data = json.loads(path.read_text())
        items = data["entries"] if isinstance(data.get("entries"), list) else [data]
        return [from_dict(e) for e in items]
    except (OSError, ValueError, TypeError, AttributeError):
        return []


def estimate_of(var: float, df: float) -> Estimate | None:
    return Estimate(var, df) if df > 0 and math.isfinite(var) else None


def pooled(entries: list[Calibration], where: str = "") -> Calibration | None:
    """The pooled figure of accepted entries (of one setup: `lookup` picks them): each component
    sum(df_i v_i) / sum(df_i) with df sum(df_i); None without a launch component (repeats alone say
    nothing about launches). Its `candidates` are the entries it pools, for `check_run`; its `rates` at each
    concurrency the newest entry's that measured it (a calibration probe measures one level only)."""
    use = [e for e in entries if e.pooled]
    launch = pool([x for e in use if (x := estimate_of(e.rel_var, e.df)) is not None])
    if launch is None:
        return None
    repeat = pool([x for e in use if (x := estimate_of(e.repeat_rel_var, e.repeat_df)) is not None])
    last = use[-1]
    startups = sorted(e.startup_s for e in use if math.isfinite(e.startup_s))
    rates: dict[str, float] = {}
    for e in use:
        rates.update(e.rates)
    return replace(last, startup_s=startups[len(startups) // 2] if startups else math.nan, rel_var=launch.var,
                   df=launch.df, repeat_rel_var=repeat.var if repeat else math.nan,
                   repeat_df=repeat.df if repeat else 0.0, entries=len(use), history=where, rates=rates,
                   launches=sum(e.launches for e in use), cells=sum(e.cells for e in use),
                   candidates=[asdict(replace(e, candidates=[])) for e in use])


# ---------------------------------------------------------------------------------------------------
# One setup's entries


def setup_path(setup: dict[str, str], cache: Path | None = None) -> Path:
    """The history file of a setup's hardware (the same file `store_path` names)."""
    return (cache or history_dir()) / f"{setup['hardware']}.json"

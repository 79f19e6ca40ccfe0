"""This hardware's variance components, measured by calibrations and runs and pooled as they accumulate.

`specbench calibrate CONFIG` launches the config's baseline `--launches` times and estimates the variance
between launches of the window throughput (relative, i.e. a CV^2, so it transfers across cells) with
Kalibera & Jones' two-level estimator (`metrics.variance_levels`), and the variance between repeats
inside a launch. Every calibration, and every run with 2+ launches (or 2+ repeats), appends its estimates
with their degrees of freedom to the history of this hardware fingerprint: `<dir>/<hardware key>.json`,
`<dir>` = `verdict.history_dir` from the config, else $SPECBENCH_HISTORY, else `<cache>/calibration`.
Before an estimate is pooled, an F test checks it against the pooled history (`metrics.decision`):
an inconsistent one (a driver or BIOS change) is kept but not pooled, with a warning.

A later run on the same fingerprint whose variants are launched once copies the pooled history into its
run directory (`calibration.json`): every interval of that run adds the pooled launch variance with its
df (df add up across entries, so t falls towards 2), and a cell measured once gets an interval from the
pooled launch and repeat components alone. The report says which history it used and its pooled df.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from .config import RunConfig
from .errors import RunDirError, UsageError
from .metrics.decision import Estimate, consistent, pool
from .metrics.intervals import LaunchVariance

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
    kind: str = "calibration"  # or "run": a run with 2+ launches (or repeats) added it
    pooled: bool = True  # False: refused by the F test against the history, kept for the record
    note: str = ""  # why it was refused
    entries: int = 1  # in a pooled figure: how many history entries it pools
    history: str = ""  # ... and the history file it comes from
    startup_s: float = math.nan  # the baseline's engine startup (for `specbench plan`)
    rates: dict[str, float] = field(default_factory=dict)  # concurrency -> the baseline's per-request tok/s

    def variance(self, where: str) -> LaunchVariance:
        return LaunchVariance(rel_var=self.rel_var, df=self.df, source=where,
                              repeat_rel_var=self.repeat_rel_var, repeat_df=self.repeat_df)

    @property
    def launch_cv(self) -> float:
        return math.sqrt(self.rel_var)


def model_key(cfg: RunConfig) -> str:
    """The model a history entry was measured on: its folder, or demo:<name>."""
    return str(cfg.model.path or f"demo:{cfg.model.demo}")


def hardware_key(hardware: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(hardware, sort_keys=True).encode()).hexdigest()[:16]


def history_dir(configured: str | None = None) -> Path:
    """Where histories live: the config's verdict.history_dir, else $SPECBENCH_HISTORY, else the cache."""
    from .models import cache_dir

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
                       created=datetime.now(timezone.utc).isoformat(timespec="seconds"), source_run=source_run,
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
                       created=datetime.now(timezone.utc).isoformat(timespec="seconds"), source_run=source_run,
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
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(cal), indent=2) + "\n")
    return path


def _from_dict(data: dict[str, Any]) -> Calibration:
    names = {f.name for f in fields(Calibration)}
    return Calibration(**{k: v for k, v in data.items() if k in names})


def load(path: Path) -> Calibration | None:
    """A stored calibration, or None when there is none (or it is unreadable: then it is not used)."""
    try:
        return _from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def load_history(path: Path) -> list[Calibration]:
    """The entries of a history file (a file from before histories: its one calibration); [] if none."""
    try:
        data = json.loads(path.read_text())
        items = data["entries"] if isinstance(data.get("entries"), list) else [data]
        return [_from_dict(e) for e in items]
    except (OSError, ValueError, TypeError, AttributeError):
        return []


def _est(var: float, df: float) -> Estimate | None:
    return Estimate(var, df) if df > 0 and math.isfinite(var) else None


def pooled(entries: list[Calibration], where: str = "") -> Calibration | None:
    """The pooled figure of a history's accepted entries: each component sum(df_i v_i) / sum(df_i) with
    df sum(df_i); None without a launch component (repeats alone say nothing about launches)."""
    use = [e for e in entries if e.pooled]
    launch = pool([x for e in use if (x := _est(e.rel_var, e.df)) is not None])
    if launch is None:
        return None
    repeat = pool([x for e in use if (x := _est(e.repeat_rel_var, e.repeat_df)) is not None])
    last = use[-1]
    startups = sorted(e.startup_s for e in use if math.isfinite(e.startup_s))
    return replace(last, startup_s=startups[len(startups) // 2] if startups else math.nan, rel_var=launch.var, df=launch.df, repeat_rel_var=repeat.var if repeat else math.nan,
                   repeat_df=repeat.df if repeat else 0.0, entries=len(use), history=where,
                   launches=sum(e.launches for e in use), cells=sum(e.cells for e in use))


def add(entry: Calibration, path: Path) -> Calibration:
    """Append an estimate to a history (replacing an entry of the same run), after the F test of each of
    its components against the pooled history; returns the entry as stored (pooled False when refused)."""
    entries = [e for e in load_history(path) if e.source_run != entry.source_run]
    notes = []
    for name, new, old in (
            ("between-launch", _est(entry.rel_var, entry.df),
             pool([x for e in entries if e.pooled and (x := _est(e.rel_var, e.df)) is not None])),
            ("between-repeat", _est(entry.repeat_rel_var, entry.repeat_df),
             pool([x for e in entries if e.pooled and (x := _est(e.repeat_rel_var, e.repeat_df)) is not None]))):
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


def calibration_config(cfg: RunConfig, launches: int) -> RunConfig:
    """The A/A calibration of a config: its baseline alone, launched `launches` times, the same sweep with
    at least 2 repeats per launch, so that both components are estimated apart (a run measured once per
    cell needs both for its interval)."""
    if launches < 2:
        raise UsageError("calibrate: --launches must be at least 2 (one launch has no between-launch variance)")
    sweep = cfg.sweep.model_copy(update={"launches": launches, "adaptive": None, "repeats": max(2, cfg.sweep.repeats),
                                         "until": "fixed"})
    return cfg.model_copy(update={"name": f"{cfg.name}-calibration", "variants": [cfg.baseline], "sweep": sweep})


def inconsistency(cells: pd.DataFrame, baseline: str, history: Calibration) -> str | None:
    """Why a run's own launch and repeat estimates (its baseline's cells, 2+ launches) must not be pooled
    with the history it was given (the F test of `add`); None when they may be, or cannot be tested."""
    own = estimate(cells, baseline, hardware={}, engine="", model="", source_run="")
    if own is None:
        return None
    notes = []
    for name, new, old in (("between-launch", _est(own.rel_var, own.df), _est(history.rel_var, history.df)),
                           ("between-repeat", _est(own.repeat_rel_var, own.repeat_df),
                            _est(history.repeat_rel_var, history.repeat_df))):
        if new is not None and not (test := consistent(new, old)).ok:
            assert old is not None
            notes.append(f"this run's {name} CV {100 * math.sqrt(new.var):.1f}% (df {new.df:g}) is inconsistent "
                         f"with the history's {100 * math.sqrt(old.var):.1f}% (df {old.df:g}; F test p = {test.p:.3g})")
    return "; ".join(notes) or None


def usable(history: Calibration | None, launches: int, cells: Callable[[], pd.DataFrame],
           baseline: str) -> tuple[Calibration | None, str | None]:
    """The history a run's intervals may use, and why not when refused: a run with 2+ launches first
    tests its own estimates (`cells()`: its cells without the history) against it (`inconsistency`).
    runner.matrix.derive_cells and benchmarks/decision_cost.py both decide by this function."""
    if history is None or launches < 2:
        return history, None
    reason = inconsistency(cells(), baseline, history)
    return (None, reason) if reason else (history, None)


def run_estimate(run_dir: Path, cfg: RunConfig, kind: str) -> Calibration | None:
    """What a finished run can add to its hardware's history: the baseline's launch and repeat
    components (2+ launches), or its repeat component alone (one launch, 2+ repeats); None otherwise."""
    from . import environment

    cells = pd.read_csv(run_dir / "cells.csv")
    env = json.loads((run_dir / "environment.json").read_text()) if (run_dir / "environment.json").exists() else {}
    engine = env.get("engine") or {}
    facts: dict[str, Any] = dict(hardware=environment.hardware_fingerprint(),
                                 engine=f"{engine.get('kind')} {engine.get('version') or ''}".strip(),
                                 model=model_key(cfg), source_run=str(run_dir))
    cal = estimate(cells, cfg.baseline.name, **facts)
    if cal is None:
        cal = estimate_repeats(cells, cfg.baseline.name, **facts) if kind == "run" else None
    if cal is None:
        return None
    meta = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    startup = ((meta.get("variants") or {}).get(cfg.baseline.name) or {}).get("startup_s")
    return replace(cal, kind=kind, startup_s=float(startup) if startup else math.nan,
                   rates=_rates(cells, cfg.baseline.name))


def _rates(cells: pd.DataFrame, variant: str) -> dict[str, float]:
    """Median per-request speed of a variant's valid cells at each concurrency."""
    c = cells[(cells["variant"] == variant) & cells["valid"].astype(bool)]
    if "per_user_tok_s" not in c:
        return {}
    med = c.groupby("concurrency")["per_user_tok_s"].median().dropna()
    return {str(int(float(str(k)))): float(v) for k, v in med.items() if v > 0}


def record(run_dir: Path, cfg: RunConfig, kind: str = "calibration") -> tuple[Calibration, Path] | None:
    """Add a finished run's estimate to this hardware's history; (entry as stored, history path), None
    when the run estimates no component. A calibration that estimates nothing is an error."""
    cal = run_estimate(run_dir, cfg, kind)
    if cal is None:
        if kind == "calibration":
            raise RunDirError(f"calibrate: {run_dir} has no valid cell measured in 2 or more launches")
        return None
    path = store_path(cal.hardware, history_dir(cfg.verdict.history_dir))
    return add(cal, path), path


def attach(run_dir: Path, hardware: dict[str, Any], cache: Path | None = None) -> Calibration | None:
    """Copy this hardware's pooled history into a run directory (so the run stays self-contained and
    re-rendering it later gives the same intervals); None when this hardware has none."""
    path = store_path(hardware, cache)
    cal = pooled(load_history(path), str(path))
    if cal is not None:
        save(cal, run_dir / FILE)
    return cal

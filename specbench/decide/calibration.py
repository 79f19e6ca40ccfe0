"""This machine's variance components, measured by calibrations and runs and pooled per setup.

`specbench calibrate CONFIG` launches the config's baseline `--launches` times and estimates the variance
between launches of the window throughput (relative, i.e. a CV^2, so it transfers across cells) with
Kalibera & Jones' two-level estimator (`metrics.variance_levels`), and the variance between repeats
inside a launch. Every calibration, and every run with 2+ launches (or 2+ repeats), appends its estimates
with their degrees of freedom to the history file of this hardware, `<dir>/<hardware key>.json`
(`<dir>` = `verdict.history_dir`, else $SPECBENCH_HISTORY, else `<cache>/calibration`), each entry keyed
by its **setup** (`setup_of`): what determines launch variance, i.e. the hardware, the engine kind and
version, the launch (interpreter or prefix, environment, engine args other than the drafter's), the
model's identity (a hash of its config and file list, not its path) and the parallelism.

A run pools only the entries of its own setup (`lookup`); an entry of another setup on this hardware (a
near match) and an entry from before histories were keyed (unkeyed) are named and never pooled. Before a
pooled history goes into a run's intervals (`check_run`), each entry's baseline speed is tested against
the run's, and every variant's own launch and repeat components against the history's (F tests); a run
launched once adds the history's upper confidence bound, not its estimate, where its df are few
(`metrics.decision.variance_bound`). docs/metrics.md states each rule.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.config import RunConfig
from specbench.decide.decision import (
    SPEED_ALPHA,
    Design,
    Estimate,
    consistent,
    pool,
    shift_variance,
    speed_consistent,
    variance_bound,
)
from specbench.decide.intervals import LaunchVariance
from specbench.decide.setupkey import differences, hardware_key, setup_of
from specbench.records.rundir import RunDir
from specbench.shared.errors import RunDirError, UsageError

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
    setup: dict[str, str] = field(default_factory=dict)  # setupkey.setup_of; {}: unkeyed (an older entry)
    speeds: dict[str, float] = field(default_factory=dict)  # point_id -> the baseline's output tok/s (speed test)
    repeats: int = 1  # windows per cell and launch
    candidates: list[dict[str, Any]] = field(default_factory=list)  # a pooled figure: the entries it pools

    def variance(self, where: str, bounded: bool = False) -> LaunchVariance:
        """The components as an interval adds them; `bounded` (a run launched once): each component's
        upper confidence bound where its df are few (`decision.variance_bound`)."""
        launch, repeat = Estimate(self.rel_var, self.df), Estimate(self.repeat_rel_var, self.repeat_df)
        if bounded:
            launch, repeat = variance_bound(launch), variance_bound(repeat)
        return LaunchVariance(rel_var=launch.var, df=launch.df, source=where,
                              repeat_rel_var=repeat.var, repeat_df=repeat.df)

    @property
    def launch_cv(self) -> float:
        return math.sqrt(self.rel_var)


def model_key(cfg: RunConfig) -> str:
    """The model a history entry was measured on: its folder, or demo:<name>."""
    return str(cfg.model.path or f"demo:{cfg.model.demo}")


def history_dir(configured: str | None = None) -> Path:
    """Where histories live: the config's verdict.history_dir, else $SPECBENCH_HISTORY, else the cache."""
    from specbench.plan.models import cache_dir

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
    """The pooled figure of accepted entries (of one setup: `lookup` picks them): each component
    sum(df_i v_i) / sum(df_i) with df sum(df_i); None without a launch component (repeats alone say
    nothing about launches). Its `candidates` are the entries it pools, for `check_run`."""
    use = [e for e in entries if e.pooled]
    launch = pool([x for e in use if (x := _est(e.rel_var, e.df)) is not None])
    if launch is None:
        return None
    repeat = pool([x for e in use if (x := _est(e.repeat_rel_var, e.repeat_df)) is not None])
    last = use[-1]
    startups = sorted(e.startup_s for e in use if math.isfinite(e.startup_s))
    return replace(last, startup_s=startups[len(startups) // 2] if startups else math.nan, rel_var=launch.var,
                   df=launch.df, repeat_rel_var=repeat.var if repeat else math.nan,
                   repeat_df=repeat.df if repeat else 0.0, entries=len(use), history=where,
                   launches=sum(e.launches for e in use), cells=sum(e.cells for e in use),
                   candidates=[asdict(replace(e, candidates=[])) for e in use])


# ---------------------------------------------------------------------------------------------------
# One setup's entries


def _runs(runs: list[str]) -> str:
    names = [Path(r).name or r for r in runs]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _entries(n: int) -> str:
    return f"{n} entr{'ies' if n != 1 else 'y'}"


@dataclass(frozen=True)
class Lookup:
    """What a history file holds for one setup: the entries it may pool (exact matches that the F test
    accepted when they were added) and the others, each with why it is not pooled; `notes` says so in
    one line per reason (near matches grouped by what differs)."""

    setup: dict[str, str]
    history: str
    candidates: list[Calibration]
    not_pooled: list[dict[str, str]]  # {"source_run", "reason"}
    notes: list[str]

    @property
    def pooled(self) -> Calibration | None:
        return pooled(self.candidates, self.history)

    def to_dict(self) -> dict[str, Any]:
        return {"setup": self.setup, "history": self.history, "candidates": [e.source_run for e in self.candidates],
                "not_pooled": self.not_pooled, "notes": self.notes}


def lookup(entries: list[Calibration], setup: dict[str, str], where: str = "") -> Lookup:
    """Split a history's entries by setup: only exact matches (every field of `setupkey.FIELDS` equal) are
    candidates; an entry of another setup on this hardware (a near match) and an entry without a setup
    (from before entries were keyed: unkeyed) are never pooled, and are named."""
    candidates: list[Calibration] = []
    not_pooled: list[dict[str, str]] = []
    near: dict[str, list[str]] = {}
    unkeyed: list[str] = []
    for e in entries:
        if not e.setup:
            unkeyed.append(e.source_run)
            reason = "unkeyed: measured before history entries were keyed by setup"
        elif diff := differences(e.setup, setup):
            near.setdefault(", ".join(diff), []).append(e.source_run)
            reason = f"another setup on this hardware: {', '.join(diff)} differ"
        elif not e.pooled:
            reason = f"refused when added: {e.note}"
        else:
            candidates.append(e)
            continue
        not_pooled.append({"source_run": e.source_run, "reason": reason})
    notes = [f"variance history: {_entries(len(runs))} ({_runs(runs)}) not pooled: measured on this hardware with "
             f"another setup: {diff} differ" for diff, runs in near.items()]
    if unkeyed:
        notes.append(f"variance history: {_entries(len(unkeyed))} ({_runs(unkeyed)}) not pooled: unkeyed (measured "
                     "before entries were keyed by setup); `specbench calibrate` measures this setup")
    return Lookup(setup, where, candidates, not_pooled, notes)


def setup_path(setup: dict[str, str], cache: Path | None = None) -> Path:
    """The history file of a setup's hardware (the same file `store_path` names)."""
    return (cache or history_dir()) / f"{setup['hardware']}.json"


def find(setup: dict[str, str], cache: Path | None = None) -> Lookup:
    path = setup_path(setup, cache)
    return lookup(load_history(path), setup, str(path))


def add(entry: Calibration, path: Path) -> Calibration:
    """Append an estimate to a history (replacing an entry of the same run), after the F test of each of
    its components against the pooled entries of its own setup; returns the entry as stored (pooled False
    when refused)."""
    entries = [e for e in load_history(path) if e.source_run != entry.source_run]
    same = lookup(entries, entry.setup).candidates if entry.setup else []
    notes = []
    for name, new, old in (
            ("between-launch", _est(entry.rel_var, entry.df),
             pool([x for e in same if (x := _est(e.rel_var, e.df)) is not None])),
            ("between-repeat", _est(entry.repeat_rel_var, entry.repeat_df),
             pool([x for e in same if (x := _est(e.repeat_rel_var, e.repeat_df)) is not None]))):
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


# ---------------------------------------------------------------------------------------------------
# A run against its copied history: the speed test, the variance tests, what its intervals add


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
        for name, new, old in (("between-launch", _est(own.rel_var, own.df), _est(history.rel_var, history.df)),
                               ("between-repeat", _est(own.repeat_rel_var, own.repeat_df),
                                _est(history.repeat_rel_var, history.repeat_df))):
            if new is not None and not (test := consistent(new, old)).ok:
                assert old is not None
                notes.append(f"{variant}'s {name} CV {100 * math.sqrt(new.var):.1f}% (df {new.df:g}) is inconsistent "
                             f"with the history's {100 * math.sqrt(old.var):.1f}% (df {old.df:g}; "
                             f"F test p = {test.p:.3g})")
    return "; ".join(notes) or None


def _speeds(cells: pd.DataFrame, variant: str) -> dict[str, float]:
    """point_id -> a variant's output throughput, over its valid cells."""
    c = cells[(cells["variant"] == variant) & cells["valid"].astype(bool)]
    if "output_throughput_tok_s" not in c or "point_id" not in c:
        return {}
    return {str(p): float(v) for p, v in zip(c["point_id"], c["output_throughput_tok_s"]) if v > 0}


def _design(cells: pd.DataFrame, variant: str) -> Design:
    c = cells[(cells["variant"] == variant) & cells["valid"].astype(bool)]
    if c.empty:
        return Design(1, 1)
    launches = max(1, int(c["launches"].min()))
    return Design(launches, max(1, int((c["repeats"] // c["launches"].clip(lower=1)).min())))


def speed_refusal(entry: Calibration, cells: pd.DataFrame, baseline: str) -> str | None:
    """Why an entry is not this run's setup by its baseline speed; None when it may be (or cannot be told).
    d = mean over the points both measured of ln(run's / entry's baseline throughput), tested against 0
    with the entry's own bounded components (`decision.speed_consistent`, p < SPEED_ALPHA refuses)."""
    run = _speeds(cells, baseline)
    shared = sorted(set(run) & set(entry.speeds))
    if not shared or not (entry.df > 0 and math.isfinite(entry.rel_var)):
        return None
    d = sum(math.log(run[p] / entry.speeds[p]) for p in shared) / len(shared)
    repeat = variance_bound(Estimate(entry.repeat_rel_var, entry.repeat_df)) if entry.repeat_df > 0 else None
    shift = shift_variance(variance_bound(Estimate(entry.rel_var, entry.df)), repeat, _design(cells, baseline),
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
    nothing), whether its upper bound is added (a run launched once), which entries it pools and which
    were refused here (with why); `notes` are the report's lines."""

    used: Calibration | None
    bounded: bool = False
    pooled: list[str] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def variance(self, where: str) -> LaunchVariance | None:
        return None if self.used is None else self.used.variance(where, bounded=self.bounded)

    def to_dict(self) -> dict[str, Any]:
        used = None
        if self.used is not None:
            bound = self.used.variance("", bounded=self.bounded)
            used = {"history": self.used.history, "entries": len(self.pooled), "rel_var": self.used.rel_var,
                    "df": self.used.df, "repeat_rel_var": self.used.repeat_rel_var, "repeat_df": self.used.repeat_df,
                    "bounded": self.bounded, "added_rel_var": bound.rel_var, "added_df": bound.df,
                    "source_run": self.used.source_run}
        return {"used": used, "pooled": self.pooled, "refused": self.refused, "notes": self.notes}


def check_run(cells: pd.DataFrame, variants: list[str], cal: Calibration | None, launches: int) -> HistoryUse:
    """The copied history against the run's own cells (computed without it): entries whose baseline speed
    says they are another setup are refused one by one (`speed_refusal`); the rest are pooled, and refused
    together when any variant's own components are inconsistent with them (`inconsistency`). variants[0]
    is the baseline. A run launched once adds the pooled components' upper bounds (`variance_bound`)."""
    if cal is None:
        return HistoryUse(None)
    entries = [_from_dict(d) for d in cal.candidates] or [cal]  # an older copy: its pooled figure as one entry
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
    return HistoryUse(use, bounded=launches < 2, pooled=[e.source_run for e in kept] if use else [],
                      refused=refused, notes=notes)


# ---------------------------------------------------------------------------------------------------
# A finished run's estimate, and the history a new run starts from


def run_estimate(run_dir: Path, cfg: RunConfig, kind: str) -> Calibration | None:
    """What a finished run can add to its hardware's history: the baseline's launch and repeat
    components (2+ launches), or its repeat component alone (one launch, 2+ repeats); None otherwise.
    Keyed by the setup the run recorded when it started (run.json `variance_history.setup`)."""
    from specbench.shared import environment

    rd = RunDir(run_dir)
    cells = pd.read_csv(rd.cells)
    engine = rd.load_environment().get("engine") or {}
    facts: dict[str, Any] = dict(hardware=environment.hardware_fingerprint(),
                                 engine=f"{engine.get('kind')} {engine.get('version') or ''}".strip(),
                                 model=model_key(cfg), source_run=str(run_dir))
    cal = estimate(cells, cfg.baseline.name, **facts)
    if cal is None:
        cal = estimate_repeats(cells, cfg.baseline.name, **facts) if kind == "run" else None
    if cal is None:
        return None
    meta = rd.load_meta()
    startup = ((meta.get("variants") or {}).get(cfg.baseline.name) or {}).get("startup_s")
    setup = (meta.get("variance_history") or {}).get("setup") or {}
    return replace(cal, kind=kind, startup_s=float(startup) if startup else math.nan,
                   rates=_rates(cells, cfg.baseline.name), setup=dict(setup), speeds=_speeds(cells, cfg.baseline.name),
                   repeats=_design(cells, cfg.baseline.name).repeats)


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


def attach(run_dir: Path, setup: dict[str, str], cache: Path | None = None) -> Lookup:
    """This setup's entries of the hardware's history: their pooled figure (with the entries) is copied
    into the run directory (calibration.json, so the run stays self-contained and re-rendering it later
    gives the same intervals) when there is one."""
    found = find(setup, cache)
    cal = found.pooled
    if cal is not None:
        save(cal, run_dir / FILE)
    return found


def config_setup(cfg: RunConfig) -> dict[str, str]:
    """The setup a config's baseline would run (`setupkey.setup_of`), before any launch or model build."""
    from specbench.plan.models import demo_model_path
    from specbench.server.launch import make_engine, plan_launches
    from specbench.shared.environment import hardware_fingerprint

    path = str(demo_model_path(cfg.model.demo) if cfg.model.demo else Path(cfg.model.path or "").expanduser())
    engine = make_engine(cfg, path, cfg.model.served_name or path)
    base = next(vl for vl in plan_launches(cfg, engine) if vl.name == cfg.baseline.name)
    return setup_of(hardware_fingerprint(), engine, base, cfg.engine.nodes)


def for_config(cfg: RunConfig) -> Lookup:
    """This config's setup's entries of the variance history (`specbench plan` and `tune` pool them)."""
    return find(config_setup(cfg), history_dir(cfg.verdict.history_dir))
def history_for(cfg: RunConfig) -> Calibration | None:
    """The pooled variance history of this config's setup (`specbench plan`, `tune`, `surface`), each note
    on what is not pooled and why printed to stderr."""
    found = for_config(cfg)
    for note in found.notes:
        print(note, file=sys.stderr)
    return found.pooled



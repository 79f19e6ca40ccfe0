"""This machine's variance components, measured by calibrations and runs and pooled per setup.

`specbench calibrate CONFIG` launches the config's baseline `--launches` times (with `--probe`: at one point
of its sweep, `probe_config`, checked in `probe_check.py`) and estimates the variance
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
the run's, and every variant's own launch and repeat components against the history's (F tests); the
history's components then enter the intervals as estimated, on their df (t at the Welch-Satterthwaite df
of the pooled variance). docs/metrics.md states each rule.
"""


from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.config import RunConfig
from specbench.records.rundir import RunDir
from specbench.server.engines import ENGINES
from specbench.shared.errors import RunDirError, UsageError
from specbench.stores.history_checks import add, design_of, speeds
from specbench.stores.variance_history import (
    Calibration,
    estimate,
    estimate_repeats,
    history_dir,
    model_key,
    store_path,
)


def calibration_config(cfg: RunConfig, launches: int) -> RunConfig:
    """The A/A calibration of a config: its baseline alone, launched `launches` times, the same sweep with
    at least 2 repeats per launch, so that both components are estimated apart (a run measured once per
    cell needs both for its interval)."""
    if launches < 2:
        raise UsageError("calibrate: --launches must be at least 2 (one launch has no between-launch variance)")
    if not ENGINES.get(cfg.engine.kind).launched:
        raise UsageError("calibrate: engine.kind external is an endpoint specbench does not launch: it cannot be "
                         "relaunched, so there is no between-launch variance to measure; calibrate with a config "
                         "that launches the engine (vllm, sglang or command)")
    sweep = cfg.sweep.model_copy(update={"launches": launches, "adaptive": None, "repeats": max(2, cfg.sweep.repeats),
                                         "until": "fixed"})
    return cfg.model_copy(update={"name": f"{cfg.name}-calibration", "variants": [cfg.baseline], "sweep": sweep})


PROBE_LAUNCHES = 11  # `calibrate --probe`'s default: launch df 10
PROBE_REPEATS = 2  # windows per launch: the repeat component is estimated apart from the launch one


def probe_config(cfg: RunConfig, launches: int = PROBE_LAUNCHES) -> RunConfig:
    """The calibration probe of a config (`calibrate --probe`): its baseline alone at one point, the first
    category of the first prompt set, the first output length (and input length and temperature) at the
    largest concurrency (the fastest window, and the level that sizes the engine's batch, so the launch is the
    full run's: same setup), PROBE_REPEATS windows in each of `launches` launches. A launch costs its startup
    and two short windows, so launches, the df of the launch variance, come cheap; `probe_check` tests the
    result against the full sweep's launch variance."""
    from specbench.plan.prompts import load_prompts

    base = calibration_config(cfg, launches)
    first = cfg.sweep.prompts[0]
    found = first.categories or [p.category for p in load_prompts([first])][:1]
    if not found:
        raise UsageError(f"calibrate --probe: sweep.prompts[0] (set {first.set}) selects no prompts")
    s, cap = cfg.sweep, cfg.baseline.max_concurrency
    top = max(c for c in s.concurrency if cap is None or c <= cap)  # the largest level the baseline measures
    sweep = base.sweep.model_copy(update={
        "prompts": [first.model_copy(update={"categories": found[:1]})], "output_lens": s.output_lens[:1],
        "concurrency": [top], "input_lens": s.input_lens[:1] if s.input_lens else None,
        "temperatures": s.temperatures[:1], "repeats": PROBE_REPEATS})
    return base.model_copy(update={"name": f"{cfg.name}-probe-calibration", "sweep": sweep})


# ---------------------------------------------------------------------------------------------------
# A run against its copied history: the speed test, the variance tests, what its intervals add


def run_estimate(run_dir: Path, cfg: RunConfig, kind: str) -> Calibration | None:
    """What a finished run can add to its hardware's history: the baseline's launch and repeat
    components (2+ launches), or its repeat component alone (one launch, 2+ repeats); None otherwise.
    Keyed by the setup the run recorded when it started (run.json `variance_history.setup`)."""
    from specbench.shared import environment

    if not ENGINES.get(cfg.engine.kind).launched:
        return None  # its server's hardware is not this host's: nothing to key the history by
    rd = RunDir(run_dir)
    cells = pd.read_csv(rd.cells)
    engine = rd.load_environment().get("engine") or {}
    facts: dict[str, Any] = dict(hardware=environment.hardware_fingerprint(),
                                 engine=f"{engine.get('kind')} {engine.get('version') or ''}".strip(),
                                 model=model_key(cfg), source_run=measured_in(run_dir, cfg.baseline.name))
    cal = estimate(cells, cfg.baseline.name, **facts)
    if cal is None:
        cal = estimate_repeats(cells, cfg.baseline.name, **facts) if kind == "run" else None
    if cal is None:
        return None
    meta = rd.load_meta()
    startup = ((meta.get("variants") or {}).get(cfg.baseline.name) or {}).get("startup_s")
    return replace(cal, kind=kind, startup_s=float(startup) if startup else math.nan,
                   rates=_rates(cells, cfg.baseline.name), setup=rd.setup(), speeds=speeds(cells, cfg.baseline.name),
                   repeats=design_of(cells, cfg.baseline.name).repeats)


def measured_in(run_dir: Path, baseline: str) -> str:
    """The run whose launches the baseline's cells come from: the run itself, or, when `--reuse` copied
    the baseline, the run it was copied from (followed back to the run that measured it). The history
    keeps one entry per source run (`add`), so a reused baseline enters it once, not once per reuse."""
    seen = {Path(run_dir).resolve()}
    here = Path(run_dir)
    while True:
        vs = (RunDir(here).load_meta().get("variants") or {}).get(baseline) or {}
        src = vs.get("reused_from") if vs.get("status") == "reused" else None
        if not src or Path(src).resolve() in seen or not RunDir(Path(src)).meta.exists():
            return str(here)
        here = Path(src)
        seen.add(here.resolve())


def _rates(cells: pd.DataFrame, variant: str) -> dict[str, float]:
    """Median per-request speed of a variant's valid cells at each concurrency."""
    c = cells[(cells["variant"] == variant) & cells["valid"].astype(bool)]
    if "per_user_tok_s" not in c:
        return {}
    med = c.groupby("concurrency")["per_user_tok_s"].median().dropna()
    return {str(int(float(str(k)))): float(v) for k, v in med.items() if v > 0}


def record(run_dir: Path, cfg: RunConfig, kind: str = "calibration") -> tuple[Calibration, Path] | None:
    """Add a finished run's estimate to this hardware's history; (entry as stored, history path), None
    when the run estimates no component. A calibration (kind "calibration", or "probe": `probe_config`'s
    run) that estimates nothing is an error."""
    cal = run_estimate(run_dir, cfg, kind)
    if cal is None:
        if kind != "run":
            raise RunDirError(f"calibrate: {run_dir} has no valid cell measured in 2 or more launches")
        return None
    path = store_path(cal.hardware, history_dir(cfg.verdict.history_dir))
    return add(cal, path), path




def add_run(run_dir: Path, cfg: RunConfig) -> str | None:
    """A run's variance estimates join its hardware's history (a calibration adds its own in `specbench
    calibrate`); the warning to print when that failed or the F test refused the estimate (kept, not pooled)."""
    if cfg.name.endswith("-calibration"):
        return None
    try:
        got = record(run_dir, cfg, kind="run")
    except (OSError, ValueError, KeyError) as exc:
        return f"warning: the variance history was not updated: {exc}"
    if got is not None and not got[0].pooled:
        return f"warning: {got[0].note}: kept in {got[1]} but not pooled (a driver, BIOS or load change?)"
    return None

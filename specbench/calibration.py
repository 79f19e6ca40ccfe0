"""This hardware's between-launch variance, measured once by an A/A calibration and reused.

`specbench calibrate CONFIG` launches the config's baseline `--launches` times (interleaved with nothing:
one variant) and estimates the variance between launches of the window throughput (relative, i.e. a
CV^2, so it transfers across cells) with Kalibera & Jones' two-level estimator (`metrics.variance_levels`).
The result is stored under `<cache>/calibration/<hardware key>.json`. A later run on the same hardware
fingerprint whose variants are launched once copies it into its run directory (`calibration.json`), and
every interval of that run adds it as a variance component with its degrees of freedom; the report says so.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from .config import RunConfig
from .errors import RunDirError, UsageError
from .metrics.intervals import LaunchVariance

FILE = "calibration.json"  # the copy inside a run directory


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

    def variance(self, where: str) -> LaunchVariance:
        return LaunchVariance(rel_var=self.rel_var, df=self.df, source=where)

    @property
    def launch_cv(self) -> float:
        return math.sqrt(self.rel_var)


def hardware_key(hardware: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(hardware, sort_keys=True).encode()).hexdigest()[:16]


def store_path(hardware: dict[str, Any], cache: Path | None = None) -> Path:
    from .models import cache_dir

    return (cache or cache_dir()) / "calibration" / f"{hardware_key(hardware)}.json"


def estimate(cells: pd.DataFrame, variant: str, *, hardware: dict[str, Any], engine: str, model: str,
             source_run: str) -> Calibration | None:
    """The between-launch variance from one variant's cells measured in 2+ launches: the mean over its
    valid cells of launch_cv^2 (each a truncated Kalibera-Jones estimate). None without such cells."""
    c = cells[(cells["variant"] == variant) & cells["valid"].astype(bool) & (cells["launches"] >= 2)]
    cv = c["launch_cv"].dropna()
    if cv.empty:
        return None
    launches = int(c["launches"].min())
    return Calibration(rel_var=float((cv**2).mean()), df=float(launches - 1), launches=launches, cells=int(len(cv)),
                       hardware=hardware, engine=engine, model=model,
                       created=datetime.now(timezone.utc).isoformat(timespec="seconds"), source_run=source_run)


def save(cal: Calibration, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(cal), indent=2) + "\n")
    return path


def load(path: Path) -> Calibration | None:
    """A stored calibration, or None when there is none (or it is unreadable: then it is not used)."""
    try:
        data = json.loads(path.read_text())
        return Calibration(**data)
    except (OSError, ValueError, TypeError):
        return None


def calibration_config(cfg: RunConfig, launches: int) -> RunConfig:
    """The A/A calibration of a config: its baseline alone, launched `launches` times, same sweep."""
    if launches < 2:
        raise UsageError("calibrate: --launches must be at least 2 (one launch has no between-launch variance)")
    sweep = cfg.sweep.model_copy(update={"launches": launches, "adaptive": None})
    return cfg.model_copy(update={"name": f"{cfg.name}-calibration", "variants": [cfg.baseline], "sweep": sweep})


def record(run_dir: Path, cfg: RunConfig, cache: Path | None = None) -> tuple[Calibration, Path]:
    """Estimate the calibration from a finished calibration run and store it for this hardware."""
    from . import environment

    cells = pd.read_csv(run_dir / "cells.csv")
    env = json.loads((run_dir / "environment.json").read_text())
    engine = env.get("engine") or {}
    hw = environment.hardware_fingerprint()
    cal = estimate(cells, cfg.baseline.name, hardware=hw,
                   engine=f"{engine.get('kind')} {engine.get('version') or ''}".strip(),
                   model=str(cfg.model.path or f"demo:{cfg.model.demo}"), source_run=str(run_dir))
    if cal is None:
        raise RunDirError(f"calibrate: {run_dir} has no valid cell measured in 2 or more launches")
    return cal, save(cal, store_path(hw, cache))


def attach(run_dir: Path, hardware: dict[str, Any], cache: Path | None = None) -> Calibration | None:
    """Copy this hardware's stored calibration into a run directory (so the run stays self-contained and
    re-rendering it later gives the same intervals); None when this hardware has none."""
    cal = load(store_path(hardware, cache))
    if cal is not None:
        save(cal, run_dir / FILE)
    return cal

"""A run directory loaded for analysis: `load_run(path) -> Run` (also `specbench.load_run`), its tables as
DataFrames, the measured requests from the columnar store."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from specbench.records.columnar import open_store
from specbench.records.rundir import RunDir, read_csv, records_frame
from specbench.shared.errors import RunDirError


@dataclass
class Run:
    """A run directory loaded for analysis (`specbench.load_run`)."""

    path: Path
    requests: pd.DataFrame
    windows: pd.DataFrame
    cells: pd.DataFrame
    break_even: pd.DataFrame
    meta: dict[str, Any]
    environment: dict[str, Any]
    config: dict[str, Any]
    open_loop: pd.DataFrame = field(default_factory=pd.DataFrame)  # per variant x rate (open loop only)
    capacity: pd.DataFrame = field(default_factory=pd.DataFrame)  # per variant x SLO (open loop only)


def load_run(path: str | os.PathLike[str], columns: Sequence[str] | None = None) -> Run:
    """Load a run directory into DataFrames: requests, windows (raw), cells and break_even (derived).

    `requests` holds the measured requests (completed windows, no warmup), read from the columnar store
    (built from requests.jsonl on first read); `columns` limits it to those fields (all by default), e.g.
    without the per-chunk lists of a large run. RunDir.request_records() reads requests.jsonl itself."""
    rd = RunDir(Path(path))
    if not rd.path.is_dir():
        raise RunDirError(f"not a run directory: {rd.path}")
    if not rd.meta.exists():
        raise RunDirError(f"not a run directory (no run.json): {rd.path}")
    cfg = yaml.safe_load(rd.config.read_text()) if rd.config.exists() else {}
    return Run(path=rd.path, requests=open_store(rd).frame(columns=columns),
               windows=records_frame(rd.window_records()), cells=rd.load_cells(), break_even=read_csv(rd.break_even),
               meta=rd.load_meta(), environment=rd.load_environment(), config=cfg, open_loop=read_csv(rd.open_loop),
               capacity=read_csv(rd.capacity))

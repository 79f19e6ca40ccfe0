"""Raw records -> derived files: cells.csv, break_even.csv, then the report. Re-runnable at any time."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from . import calibration
from .config import RunConfig, parse_config
from .rundir import RunDir, atomic_write, records_frame
from .warnings_ import CellWarning


def analyse_run_dir(rd: RunDir, cfg: RunConfig | None = None, render: bool = True) -> pd.DataFrame:
    from .metrics import break_even_table, compute_cells

    if cfg is None:
        cfg = parse_config(yaml.safe_load(rd.config.read_text()), str(rd.config))
    requests = records_frame(rd.request_records())
    windows = records_frame(rd.window_records())
    cal = calibration.load(rd.path / calibration.FILE)
    cells = compute_cells(requests, windows, baseline=cfg.baseline.name,
                          max_error_rate=cfg.sweep.max_error_rate, run_gates=launch_gates(rd),
                          calibration=cal.variance(f"{calibration.FILE} ({cal.source_run})") if cal else None)
    atomic_write(rd.cells, cells.to_csv(index=False))
    atomic_write(rd.break_even, break_even_table(cells).to_csv(index=False))
    if render:
        from .report import render as render_report

        render_report(rd.path)
    return cells


def launch_gates(rd: RunDir) -> dict[str, list[CellWarning]]:
    """Gate warnings read from the run directory rather than the records: a GPU engine launched without
    CUDA graphs (each variant's command.json argv, environment.json's GPUs)."""
    from .metrics.gates import eager_engine

    env = json.loads(rd.environment.read_text()) if rd.environment.exists() else {}
    argv = {}
    for cmd in sorted(rd.path.glob("variants/*/command.json")):
        argv[cmd.parent.name] = list(json.loads(cmd.read_text()).get("argv") or [])
    return {v: [w] for v, w in eager_engine(argv, bool(env.get("gpus"))).items()}


def report_paths(run_dir: Path) -> list[Path]:
    return [p for p in (run_dir / "report.md", run_dir / "report.html") if p.exists()]

"""Raw records -> derived files: cells.csv, break_even.csv, then the report. Re-runnable at any time."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from .config import RunConfig, parse_config
from .hardware import HardwareCheck, check, withhold_speedups
from .rundir import RunDir, atomic_write, records_frame


def analyse_run_dir(rd: RunDir, cfg: RunConfig | None = None, render: bool = True) -> pd.DataFrame:
    from .metrics import break_even_table, compute_cells

    if cfg is None:
        cfg = parse_config(yaml.safe_load(rd.config.read_text()), str(rd.config))
    requests = records_frame(rd.request_records())
    windows = records_frame(rd.window_records())
    cells = compute_cells(requests, windows, baseline=cfg.baseline.name,
                          max_error_rate=cfg.sweep.max_error_rate)
    cells = withhold_speedups(cells, hardware_check(rd, cfg))
    atomic_write(rd.cells, cells.to_csv(index=False))
    atomic_write(rd.break_even, break_even_table(cells).to_csv(index=False))
    if render:
        from .report import render as render_report

        render_report(rd.path)
    return cells


def hardware_check(rd: RunDir, cfg: RunConfig) -> HardwareCheck:
    env = json.loads(rd.environment.read_text()) if rd.environment.exists() else {}
    return check(env, cfg.baseline.name, cfg.scheduler.allow_mixed_hardware)


def report_paths(run_dir: Path) -> list[Path]:
    return [p for p in (run_dir / "report.md", run_dir / "report.html") if p.exists()]

"""Raw records -> derived files: cells.csv, break_even.csv, then the report. Re-runnable at any time."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from .config import RunConfig, parse_config
from .rundir import RunDir, atomic_write, records_frame


def analyse_run_dir(rd: RunDir, cfg: RunConfig | None = None, render: bool = True) -> pd.DataFrame:
    from .metrics import break_even_table, compute_cells, reconciliation_table, request_acceptance_table

    if cfg is None:
        cfg = parse_config(yaml.safe_load(rd.config.read_text()), str(rd.config))
    requests = records_frame(rd.request_records())
    windows = records_frame(rd.window_records())
    cells = compute_cells(requests, windows, baseline=cfg.baseline.name,
                          max_error_rate=cfg.sweep.max_error_rate)
    atomic_write(rd.cells, cells.to_csv(index=False))
    atomic_write(rd.break_even, break_even_table(cells).to_csv(index=False))
    atomic_write(rd.acceptance, request_acceptance_table(requests, windows).to_csv(index=False))
    atomic_write(rd.reconciliation, reconciliation_table(requests, windows).to_csv(index=False))
    if render:
        from .report import render as render_report

        render_report(rd.path)
    return cells


def report_paths(run_dir: Path) -> list[Path]:
    return [p for p in (run_dir / "report.md", run_dir / "report.html") if p.exists()]

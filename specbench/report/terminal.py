"""The table printed at the end of a run: where the run is, and per variant the headline numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from ..metrics.warnings import warning_rows
from ..rundir import RunDir
from .audits import failure_lines


def headline(cells: pd.DataFrame) -> pd.DataFrame:
    """Per variant and concurrency over all categories and lengths: geometric-mean speedup (ratios
    average geometrically), mean acceptance length, total cells and invalid ones."""
    if cells.empty:
        return cells

    def gmean(x: pd.Series) -> float:
        x = x.dropna()
        return float(np.exp(np.log(x).mean())) if len(x) and (x > 0).all() else float("nan")

    g = cells.groupby(["variant", "concurrency"], sort=False)
    return pd.DataFrame({
        "speedup_gmean": g["speedup"].apply(gmean),
        "acceptance_length": g["acceptance_length"].mean(),
        "output_tok_s": g["output_throughput_tok_s"].mean(),
        "cells": g.size(),
    }).reset_index()


def print_summary(run_dir: Path, console: Console | None = None) -> None:
    """Reads run.json and cells.csv only: the raw records (possibly millions of lines) stay unread."""
    console = console or Console()
    rd = RunDir(run_dir)
    cells = pd.read_csv(rd.cells) if rd.cells.exists() else pd.DataFrame()
    console.print(f"run directory: {rd.path}", markup=False, highlight=False)
    for name, vm in rd.load_meta().get("variants", {}).items():
        if vm.get("status") != "done":
            console.print(f"  {name}: {vm.get('status')} {vm.get('reason') or vm.get('reused_from') or ''}",
                          markup=False, highlight=False)
    if rd.capacity.exists() and rd.capacity.stat().st_size:  # an open loop: capacity per SLO instead
        _capacity_table(pd.read_csv(rd.capacity), console)
        h = pd.DataFrame()
    else:
        h = headline(cells)
    if h.empty and not rd.capacity.exists():
        console.print("no completed cells")
        return
    t = Table(title="speedup vs baseline (geometric mean over categories and output lengths)")
    for col in ("variant", "C", "speedup", "accept len", "output tok/s", "cells"):
        t.add_column(col, justify="left" if col == "variant" else "right")
    for _, r in h.iterrows():
        t.add_row(str(r.variant), str(r.concurrency), _fmt(r.speedup_gmean), _fmt(r.acceptance_length),
                  _fmt(r.output_tok_s, 1), str(r.cells))
    if not h.empty:
        console.print(t)
    for line in warning_lines(cells):
        console.print(line, markup=False, highlight=False, style="yellow", soft_wrap=True)
    errors = pd.read_csv(rd.errors) if rd.errors.exists() and rd.errors.stat().st_size else pd.DataFrame()
    for line in failure_lines(errors):
        console.print(f"failed requests: {line}", markup=False, highlight=False, style="yellow", soft_wrap=True)
    for p in ("report.md", "report.html"):
        if (rd.path / p).exists():
            console.print(f"report: {rd.path / p}", markup=False, highlight=False)


def _capacity_table(cap: pd.DataFrame, console: Console) -> None:
    """capacity.csv as printed: per variant and SLO, the capacity with its interval and the gain."""
    t = Table(title="capacity under each SLO (req/s, 95% interval)")
    for col in ("variant", "SLO", "capacity", "interval", "status", "gain"):
        t.add_column(col, justify="left" if col in ("variant", "SLO", "status") else "right")
    for _, r in cap.iterrows():
        t.add_row(str(r.variant), str(r.slo), _fmt(r.capacity_req_s), f"{_fmt(r.capacity_ci_low)}-"
                  f"{_fmt(r.capacity_ci_high)}", str(r.status).replace("_", " "), _fmt(r.gain))
    console.print(t)


def warning_lines(cells: pd.DataFrame) -> list[str]:
    """One line per warning code: how many cells, an example with what was measured, and the remedy."""
    if cells.empty or "warnings" not in cells:
        return []
    return [f"warning: {w.code} in {len(w.cells)} cell(s), e.g. {w.cells[0]}"
            + (f" ({w.detail})" if w.detail else "") + f": {w.remedy}"
            for w in warning_rows(cells.to_dict("records"))]


def _fmt(x: float, nd: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{nd}f}"

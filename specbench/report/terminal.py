"""What a run prints at its end: where the run is, one verdict sentence per drafter, and per variant the headline
numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from specbench.metrics.common import geometric_mean
from specbench.metrics.warnings import warning_rows
from specbench.records.rundir import RunDir
from specbench.report.audits import failure_lines
from specbench.report.openloop_section import crossing_text, open_loop_warnings_text


def headline(cells: pd.DataFrame) -> pd.DataFrame:
    """Per variant and concurrency over all categories and lengths: geometric-mean speedup (ratios
    average geometrically; non-positive speedups left out and counted), mean acceptance length, total cells."""
    if cells.empty:
        return cells

    g = cells.groupby(["variant", "concurrency"], sort=False)
    gm = g["speedup"].apply(lambda x: geometric_mean(x.dropna()))  # an empty speedup (an invalid cell) is no value
    return pd.DataFrame({
        "speedup_gmean": gm.map(lambda m: m.value),
        "speedup_left_out": gm.map(lambda m: m.left_out),
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
    for line in verdict_lines(run_dir):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for name, vm in rd.load_meta().get("variants", {}).items():
        if vm.get("status") != "done":
            console.print(f"  {name}: {vm.get('status')} {vm.get('reason') or vm.get('reused_from') or ''}",
                          markup=False, highlight=False)
    if rd.capacity.exists() and rd.capacity.stat().st_size:  # an open loop: capacity per SLO instead
        _capacity_table(pd.read_csv(rd.capacity), console)
        if rd.open_loop.exists() and rd.open_loop.stat().st_size:
            for line in open_loop_warnings_text(pd.read_csv(rd.open_loop)):
                console.print("warning: " + line, markup=False, highlight=False, style="yellow", soft_wrap=True)
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
        left_out = f" ({r.speedup_left_out} left out)" if r.speedup_left_out else ""
        t.add_row(str(r.variant), str(r.concurrency), _fmt(r.speedup_gmean) + left_out, _fmt(r.acceptance_length),
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


def verdict_lines(run_dir: Path) -> list[str]:
    """The report's opening sentences, one per drafter (report/opening.py), from the derived files only."""
    from specbench.report.derived import load_report_data
    from specbench.report.opening import opening_lines, plain

    if not RunDir(run_dir).cells.exists():
        return []
    return [plain(parts) for parts in opening_lines(load_report_data(run_dir))]


def _capacity_table(cap: pd.DataFrame, console: Console) -> None:
    """capacity.csv as printed: per variant and SLO, the capacity with its interval and the gain."""
    t = Table(title="capacity under each SLO (offered req/s: highest met, lowest missed, estimate)")
    for col in ("variant", "SLO", "met", "missed", "estimate", "status", "gain"):
        t.add_column(col, justify="left" if col in ("variant", "SLO", "status") else "right")
    for _, r in cap.iterrows():
        t.add_row(str(r.variant), str(r.slo), _fmt(r.capacity_offered_req_s), _fmt(r.missed_offered_req_s),
                  crossing_text(r), str(r.status).replace("_", " "), _fmt(r.gain))
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

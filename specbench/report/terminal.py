"""The table printed at the end of a run: where the run is, and per variant the headline numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from ..rundir import RunDir


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
    h = headline(cells)
    if h.empty:
        console.print("no completed cells")
        return
    t = Table(title="speedup vs baseline (geometric mean over categories and output lengths)")
    for col in ("variant", "C", "speedup", "accept len", "output tok/s", "cells"):
        t.add_column(col, justify="left" if col == "variant" else "right")
    for _, r in h.iterrows():
        t.add_row(str(r.variant), str(r.concurrency), _fmt(r.speedup_gmean), _fmt(r.acceptance_length),
                  _fmt(r.output_tok_s, 1), str(r.cells))
    console.print(t)
    for line in warning_lines(cells):
        console.print(line, markup=False, highlight=False, style="yellow", soft_wrap=True)
    for p in ("report.md", "report.html"):
        if (rd.path / p).exists():
            console.print(f"report: {rd.path / p}", markup=False, highlight=False)


def warning_lines(cells: pd.DataFrame) -> list[str]:
    """One line per warning code: how many cells, an example, and the remedy."""
    from ..metrics.warnings import REMEDY, WarningCode

    if cells.empty or "warnings" not in cells:
        return []
    found: dict[str, list[str]] = {}
    for _, r in cells.iterrows():
        for code in filter(None, str(r["warnings"] if isinstance(r["warnings"], str) else "").split(";")):
            found.setdefault(code, []).append(f"{r['variant']} {r['point_id']}")
    lines = []
    for code, where in found.items():
        remedy = REMEDY.get(WarningCode(code), "") if code in WarningCode._value2member_map_ else ""
        lines.append(f"warning: {code} in {len(where)} cell(s), e.g. {where[0]}: {remedy}")
    return lines


def _fmt(x: float, nd: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{nd}f}"

"""From the raw records to every derived file of a run directory: cells.csv (with the history's pooled
intervals, speedups withheld across unlike hardware, always-valid intervals for a sequential run),
break_even.csv, acceptance.csv, reconciliation.csv, decomposition.csv, for an open loop open_loop.csv and
capacity.csv, and the report. Re-runnable at any time (`specbench report`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.config import RunConfig, load_yaml, parse_config
from specbench.decide.hardware import check as hardware_check
from specbench.decide.hardware import withhold_speedups
from specbench.decide.sampling import SubsetSampling
from specbench.decide.stopping import always_valid
from specbench.metrics import (
    CellOptions,
    break_even_table,
    compute_cells,
    reconciliation_table,
    request_acceptance_table,
)
from specbench.metrics.claims import secondary_level
from specbench.metrics.decomposition import decomposition_table
from specbench.metrics.drift import launch_effects
from specbench.metrics.gates import cpu_bf16_fallback, eager_engine
from specbench.metrics.openloop import capacity_table, open_loop_table, open_loop_warnings
from specbench.metrics.requests import failure_reasons
from specbench.metrics.slo import parse_slos
from specbench.metrics.source import LIGHT_COLUMNS, CellSource
from specbench.metrics.warnings import CellWarning
from specbench.plan.windows import capped_variants
from specbench.records.columnar import open_store
from specbench.records.rundir import RunDir, atomic_write, records_frame
from specbench.report import render
from specbench.runner.state import RunState
from specbench.stores import history_checks, variance_history


def plain_variants(cfg: RunConfig) -> frozenset[str]:
    """Variants that decode without a drafter (autoregressive under another name, as in an A/A check)."""
    from specbench.plan.drafter import get_drafter

    return frozenset(v.name for v in cfg.variants if not get_drafter(v.drafter).speculative)


def launch_gates(rd: RunDir) -> dict[str, list[CellWarning]]:
    """Gate warnings read from the run directory rather than the records: a GPU engine launched without
    CUDA graphs (each variant's command.json argv, environment.json's GPUs); and the warning of an engine
    log showing vLLM-CPU's bf16 fallback (each variant's server.log)."""
    gpus = bool(rd.load_environment().get("gpus"))
    out = {v: [w] for v, w in eager_engine(rd.launch_argv(), gpus).items()}
    logs = {p.parent.name: _lines(p) for p in sorted(rd.path.glob("variants/*/server.log"))}
    for v, w in cpu_bf16_fallback(logs).items():
        out.setdefault(v, []).append(w)
    return out


def _lines(path: Path) -> Iterator[str]:
    """A log's lines, read lazily (a long run's server.log holds every request's access line)."""
    with open(path, errors="replace") as f:
        yield from f


def _subset_sampling(cfg: RunConfig) -> SubsetSampling | None:
    """sweep.subset as the mix intervals take it: per category, the prompts its subset kept of its set."""
    sub = cfg.sweep.subset
    if sub is None:
        return None
    from collections import Counter

    from specbench.plan.prompts import load_prompts

    total = Counter(p.category for p in load_prompts(cfg.sweep.prompts))
    return SubsetSampling(sub.up_to, cfg.estimates.prompt_cv, {c: min(n, sub.per_category) for c, n in total.items()},
                          dict(total))


def derive_cells(rd: RunDir, cfg: RunConfig, requests: pd.DataFrame | CellSource | None = None,
                 windows: pd.DataFrame | None = None) -> pd.DataFrame:
    """The cells table from the raw records (by default the columnar store, read cell by cell): intervals
    with the pooled history where it applies, speedups withheld across unlike hardware, always-valid
    intervals for a sequential run."""
    return _derive(rd, cfg, requests, windows)[0]


def _derive(rd: RunDir, cfg: RunConfig, requests: pd.DataFrame | CellSource | None = None,
            windows: pd.DataFrame | None = None) -> tuple[pd.DataFrame, history_checks.HistoryUse]:
    """derive_cells, with what the intervals took from the variance history (history_checks.check_run)."""
    if requests is None or windows is None:
        requests, windows = open_store(rd), records_frame(rd.window_records())
    cal = variance_history.load(rd.path / variance_history.FILE)
    opts = CellOptions(baseline=cfg.baseline.name, max_error_rate=cfg.sweep.max_error_rate, run_gates=launch_gates(rd),
                       plain=plain_variants(cfg), eos_ids=tuple(rd.eos_token_ids() or ()),
                       stop_at_eos=cfg.sweep.stop_at_eos,
                       forced=frozenset(v.name for v in cfg.variants if v.forced_acceptance is not None),
                       subset=_subset_sampling(cfg))
    variants = [cfg.baseline.name, *(v.name for v in cfg.variants if v.name != cfg.baseline.name)]
    # the launches each variant measured are in its cells and windows (a run stopped after launch 1, a failed
    # second launch): never the configured sweep.launches
    use = history_checks.check_run(compute_cells(requests, windows, opts) if cal is not None else pd.DataFrame(),
                                   variants, cal)
    for note in use.notes:  # the run's own estimates first, then the checks
        print(f"warning: {note}", file=sys.stderr)
    if (lv := use.variance(f"{variance_history.FILE} ({cal.source_run if cal else ''})")) is not None:
        opts = replace(opts, calibration=lv)
    cells = compute_cells(requests, windows, opts)
    check = hardware_check(rd.load_environment(), cfg.baseline.name, cfg.scheduler.allow_mixed_hardware)
    cells = withhold_speedups(cells, check)
    if cfg.sweep.load.open and len(cells):
        cells["warnings"] = cells["warnings"].map(open_loop_warnings)
    return always_valid(cells, cfg.sweep), use


def history_record(rd: RunDir, use: history_checks.HistoryUse) -> dict[str, Any]:
    """variance_history.json: the setup and the history file (run.json's `variance_history`, from the
    run's start), every entry pooled into the intervals (`pooled`), every one not pooled with why
    (`not_pooled`: another setup or unkeyed; `refused`: by this run's checks), the figure added (`used`)."""
    start = dict(RunState.load(rd).variance_history or {}) if rd.meta.exists() else {}
    out = {"setup": start.get("setup") or {}, "history": start.get("history") or "", **use.to_dict()}
    out["not_pooled"] = start.get("not_pooled") or []
    out["notes"] = [*(start.get("notes") or []), *use.notes]
    return out


def finalize(rd: RunDir, cfg: RunConfig | None = None) -> list[Path]:
    """Raw records -> cells.csv, break_even.csv, acceptance.csv, reconciliation.csv, variance_history.json
    and launch_drift.csv (and for an open loop open_loop.csv and capacity.csv), rewritten atomically, then
    the report; returns the report's paths. Re-runnable at any time (`specbench report`)."""
    if cfg is None:
        cfg = parse_config(load_yaml(rd.config.read_text(), str(rd.config)), str(rd.config))
    store, windows = open_store(rd), records_frame(rd.window_records())
    cells, use = _derive(rd, cfg, store, windows)
    atomic_write(rd.cells, cells.to_csv(index=False))
    atomic_write(rd.variance_history, json.dumps(history_record(rd, use), indent=2) + "\n")
    closed = cells[cells["rate"].isna()] if "rate" in cells else cells  # break-even is over concurrency
    used = use.to_dict()["used"]
    levels = {v.name: secondary_level(closed, v.name, cfg.baseline.name, used) for v in cfg.variants
              if v.name != cfg.baseline.name}
    caps = capped_variants(cfg.variants, cfg.sweep.concurrency)
    atomic_write(rd.break_even, break_even_table(closed, caps=caps, levels=levels).to_csv(index=False))
    # the per-request tables read scalars and acceptance only: no chunk offsets, no outputs, and each
    # request's tokens per chunk summed (all that request_output_tokens asks of them)
    requests = store.frame(columns=LIGHT_COLUMNS, summed=("chunk_tokens",))
    if cfg.sweep.load.open:
        slos = parse_slos(cfg.slo)
        bound = cfg.sweep.load.max_send_lag_s
        points = open_loop_table(requests, windows, slos, lag_bound_s=bound)
        atomic_write(rd.open_loop, points.to_csv(index=False))
        by_launch = (open_loop_table(requests, windows, slos, by_launch=True, lag_bound_s=bound)
                     if "launch" in windows and windows["launch"].nunique() > 1 else None)
        atomic_write(rd.capacity, capacity_table(points, slos, cfg.baseline.name, by_launch).to_csv(index=False))
    atomic_write(rd.launch_drift, launch_effects(requests, windows, cfg.baseline.name).to_csv(index=False))
    atomic_write(rd.acceptance, request_acceptance_table(requests, windows).to_csv(index=False))
    atomic_write(rd.reconciliation, reconciliation_table(requests, windows).to_csv(index=False))
    atomic_write(rd.decomposition, decomposition_table(requests, windows, cells, cfg.baseline.name,
                                                       plain_variants(cfg)).to_csv(index=False))
    atomic_write(rd.errors, failure_reasons(requests, windows).to_csv(index=False))
    return render(rd.path)

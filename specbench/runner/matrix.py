"""The matrix run: plan, run directory, run state, then every variant's launch, then the analysis.

Flow: config -> plan (launches, sweep) -> server -> client -> records -> statistics -> report.
Each variant is launched once for its whole sweep (runner.unit). Request records are appended one by
one; a window (one repeat of one cell) counts only once its WindowRecord is written, so an interrupted
window is measured again from scratch on resume, and nothing already measured is ever rewritten.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import pandas as pd
import yaml

from .. import calibration
from ..config import RunConfig, parse_config
from ..environment import hardware_fingerprint
from ..errors import ConfigError, Interrupted, PreflightError, RunDirError
from ..hardware import check as hardware_check
from ..hardware import withhold_speedups
from ..metrics import CellOptions, break_even_table, compute_cells, reconciliation_table, request_acceptance_table
from ..metrics.gates import eager_engine
from ..metrics.sequential import always_valid
from ..metrics.openloop import capacity_table, open_loop_table, open_loop_warnings
from ..metrics.slo import parse_slos
from ..metrics.warnings import CellWarning
from ..progress import Reporter, make_reporter
from ..report import render
from ..reuse import copy_reusable, variant_fingerprints
from ..rundir import RunDir, atomic_write, records_frame
from .prepare import Plan, check_run_dir, config_hash, default_run_path, open_run_dir, prepare_plan, write_side_files
from .scheduler import launch_order, run_schedule
from .sequential import Looks, until_decided
from .session import RecordSink
from .state import RunState, VariantState
from .unit import measure_launch, open_context


@dataclass
class RunOptions:
    out: Path | None = None  # the run directory; default <output_dir>/<name>-<timestamp>
    resume: bool = False
    force: bool = False
    reuse: Path | None = None  # an earlier run whose unchanged variants are taken as they are
    skip_preflight: bool = False
    reporter: Reporter | None = None
    scheduler: Literal["local", "slurm"] = "local"  # slurm: variants side by side on the allocation's nodes


@dataclass
class RunResult:
    run_dir: Path
    status: dict[str, str] = field(default_factory=dict)  # variant -> done | failed | reused
    interrupted: str | None = None


class MatrixRun:
    """One `specbench run`: holds what the interrupt path needs (run directory and state)."""

    def __init__(self, cfg: RunConfig, opts: RunOptions):
        self.cfg = cfg
        self.opts = opts
        self.reporter = opts.reporter or make_reporter()
        self.rd: RunDir | None = None
        self.state: RunState | None = None

    def _start_state(self, rd: RunDir, plan: Plan) -> RunState:
        fingerprints = variant_fingerprints(self.cfg, plan.engine, plan.launches, plan.sweep)
        state = RunState.load(rd) if self.opts.resume else RunState.new()
        if self.opts.resume:
            if state.config_hash not in (None, config_hash(self.cfg)):
                raise RunDirError(f"--resume: the config differs from the one {rd.path} was started with")
            state.note_resume()
        state.name, state.baseline, state.config_hash = self.cfg.name, self.cfg.baseline.name, config_hash(self.cfg)
        if self.cfg.sweep.input_lens:
            from ..prompts import padding_document

            state.padding_document = padding_document().source
        for vl in plan.launches:
            vs = state.variants.setdefault(vl.name, VariantState())
            vs.drafter, vs.fingerprint = vl.drafter.name, fingerprints[vl.name]
        return state

    async def run(self) -> RunResult:
        o = self.opts
        started = time.monotonic()
        if o.out is not None:
            check_run_dir(o.out, o.resume, o.force)  # before model resolution and preflight
        alloc = None
        if self.cfg.engine.nodes > 1 and o.scheduler != "slurm":
            raise ConfigError("engine.nodes", f"{self.cfg.engine.nodes} nodes per variant need --scheduler slurm "
                              "(inside a Slurm allocation)")
        if o.scheduler == "slurm":
            from ..slurm import current_allocation

            alloc = current_allocation()  # refused outside an allocation, before anything is prepared
        plan = prepare_plan(self.cfg)
        if not o.skip_preflight:
            from ..preflight import preflight

            problems = preflight(self.cfg, plan.engine, plan.launches, self.cfg.engine.port)
            if problems:
                raise PreflightError("; ".join(problems))
        if o.out is None:
            o.out = default_run_path(self.cfg)
        self.rd = rd = open_run_dir(o.out, o.resume, o.force)
        self.state = state = self._start_state(rd, plan)
        write_side_files(rd, plan)
        if not o.resume:  # this hardware's pooled variance history, if any
            cal = calibration.attach(rd.path, hardware_fingerprint(),
                                     calibration.history_dir(self.cfg.verdict.history_dir))
            if cal is not None:
                self.reporter.log(f"between-launch CV {100 * cal.launch_cv:.1f}% (pooled df {cal.df:g}, "
                                  f"{cal.entries} entries of {cal.history}) goes into every interval")
        state.save(rd)

        sink = RecordSink.open(rd, state.run_id)  # opening repairs a torn tail (before --reuse appends too)
        try:
            if self.cfg.sweep.until == "decided" and (alloc is not None or o.reuse):
                raise ConfigError("sweep.until", "decided runs locally and measures every variant itself "
                                  "(no --scheduler slurm, no --reuse)")
            if o.reuse:
                self._reuse(o.reuse, {vl.name: state.variants[vl.name].fingerprint or "" for vl in plan.launches})
            placer = None
            if alloc is not None:
                from .cluster import SlurmPlacer

                placer = SlurmPlacer(self.cfg, rd, state, sink, alloc, self.reporter.log)
                placer.merge_all()  # what a previous head measured but did not merge (resume)
            ctx = open_context(rd.path, plan=plan, sink=sink, reporter=self.reporter)
            ctx.checkpoint = lambda: state.save(rd)
            names = [vl.name for vl in plan.launches]
            units = launch_order(names, self.cfg.sweep.launches)
            if placer is not None:  # Slurm: one launch per variant on its own node(s)
                await placer.run(units, lambda n: bool(ctx.todo(n)), ctx.checkpoint)
            else:
                self.reporter.start(sum(ctx.requests_todo(n) for n in names))
                execute = lambda u, vs: measure_launch(ctx, u, vs)  # noqa: E731
                await run_schedule(units, state, execute, lambda u: bool(ctx.todo(u.variant, u.launch)),
                                   ctx.checkpoint)
                if self.cfg.sweep.until == "decided":
                    await until_decided(ctx, state, self.cfg.baseline.name,
                                        Looks(cells=lambda: derive_cells(rd, self.cfg), execute=execute,
                                              started=started, log=self.reporter.log))
        finally:
            sink.close()
            state.save(rd)
            self.reporter.close()
        return RunResult(run_dir=rd.path, status=dict(state.statuses()))

    def _reuse(self, source: Path, fingerprints: dict[str, str]) -> None:
        assert self.rd is not None and self.state is not None
        reusable = copy_reusable(source, self.rd, fingerprints)
        for name in sorted(reusable):
            vs = self.state.variants[name]
            vs.status, vs.reused_from, vs.wall_s = "reused", str(source), 0.0
            self.reporter.log(f"{name}: unchanged since {source}: reusing its measurements")
        for name in sorted(set(fingerprints) - reusable):
            self.reporter.log(f"{name}: changed or not measured in {source}: measuring")
        self.state.save(self.rd)


def run_matrix(cfg: RunConfig, opts: RunOptions) -> RunResult:
    """Run (or resume) a matrix, then derive cells and the report. SIGINT/SIGTERM stop every engine."""
    run = MatrixRun(cfg, opts)

    async def main() -> RunResult:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        try:
            return await run.run()
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    try:
        result = asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        rd, state = run.rd, run.state
        if rd is None or state is None:
            raise Interrupted("interrupted before anything was measured") from None
        state.mark_interrupted()
        state.save(rd)
        try:
            finalize(rd, cfg)  # whatever was measured is still analysed and reported
        except Exception as exc:  # never let the report hide the interruption
            print(f"warning: could not analyse the partial run: {exc}", file=sys.stderr)
        raise Interrupted(f"interrupted: every engine was stopped; measurements kept in {rd.path}; "
                          f"finish with: specbench run --resume {rd.path}") from None
    finalize(RunDir(result.run_dir), cfg)
    _add_to_history(result.run_dir, cfg)
    return result


def _add_to_history(run_dir: Path, cfg: RunConfig) -> None:
    """A run's variance estimates join its hardware's history (a calibration adds its own in
    `specbench calibrate`); an estimate the F test refuses is kept there but not pooled, with a warning."""
    if cfg.name.endswith("-calibration"):
        return
    try:
        got = calibration.record(run_dir, cfg, kind="run")
    except (OSError, ValueError, KeyError) as exc:
        print(f"warning: the variance history was not updated: {exc}", file=sys.stderr)
        return
    if got is not None and not got[0].pooled:
        print(f"warning: {got[0].note}: kept in {got[1]} but not pooled (a driver, BIOS or load change?)",
              file=sys.stderr)


def plain_variants(cfg: RunConfig) -> frozenset[str]:
    """Variants that decode without a drafter (autoregressive under another name, as in an A/A check)."""
    from ..drafter import get_drafter

    return frozenset(v.name for v in cfg.variants if not get_drafter(v.drafter).speculative)


def launch_gates(rd: RunDir) -> dict[str, list[CellWarning]]:
    """Gate warnings read from the run directory rather than the records: a GPU engine launched without
    CUDA graphs (each variant's command.json argv, environment.json's GPUs)."""
    env = json.loads(rd.environment.read_text()) if rd.environment.exists() else {}
    argv = {cmd.parent.name: list(json.loads(cmd.read_text()).get("argv") or [])
            for cmd in sorted(rd.path.glob("variants/*/command.json"))}
    return {v: [w] for v, w in eager_engine(argv, bool(env.get("gpus"))).items()}


def derive_cells(rd: RunDir, cfg: RunConfig, requests: pd.DataFrame | None = None,
                 windows: pd.DataFrame | None = None) -> pd.DataFrame:
    """The cells table from the raw records: intervals with the pooled history where it applies, speedups
    withheld across unlike hardware, always-valid intervals for a sequential run."""
    if requests is None or windows is None:
        requests, windows = records_frame(rd.request_records()), records_frame(rd.window_records())
    cal = calibration.load(rd.path / calibration.FILE)
    opts = CellOptions(baseline=cfg.baseline.name, max_error_rate=cfg.sweep.max_error_rate, run_gates=launch_gates(rd),
                       plain=plain_variants(cfg))
    if cal is not None and cfg.sweep.launches >= 2:  # the run's own estimates first, then the F test
        reason = calibration.inconsistency(compute_cells(requests, windows, opts), cfg.baseline.name, cal)
        if reason:
            print(f"warning: {reason}: the history is not pooled into this run's intervals", file=sys.stderr)
            cal = None
    if cal is not None:
        opts = replace(opts, calibration=cal.variance(f"{calibration.FILE} ({cal.source_run})"))
    cells = compute_cells(requests, windows, opts)
    env = json.loads(rd.environment.read_text()) if rd.environment.exists() else {}
    cells = withhold_speedups(cells, hardware_check(env, cfg.baseline.name, cfg.scheduler.allow_mixed_hardware))
    if cfg.sweep.load.open and len(cells):
        cells["warnings"] = cells["warnings"].map(open_loop_warnings)
    return always_valid(cells, cfg.sweep)


def finalize(rd: RunDir, cfg: RunConfig | None = None) -> list[Path]:
    """Raw records -> cells.csv, break_even.csv, acceptance.csv and reconciliation.csv (and for an open
    loop open_loop.csv and capacity.csv), rewritten atomically, then the report; returns the report's paths. Re-runnable at any time (`specbench report`)."""
    if cfg is None:
        cfg = parse_config(yaml.safe_load(rd.config.read_text()), str(rd.config))
    requests, windows = records_frame(rd.request_records()), records_frame(rd.window_records())
    cells = derive_cells(rd, cfg, requests, windows)
    atomic_write(rd.cells, cells.to_csv(index=False))
    closed = cells[cells["rate"].isna()] if "rate" in cells else cells  # break-even is over concurrency
    atomic_write(rd.break_even, break_even_table(closed).to_csv(index=False))
    if cfg.sweep.load.open:
        slos = parse_slos(cfg.slo)
        points = open_loop_table(requests, windows, slos)
        atomic_write(rd.open_loop, points.to_csv(index=False))
        atomic_write(rd.capacity, capacity_table(points, slos, cfg.baseline.name).to_csv(index=False))
    atomic_write(rd.acceptance, request_acceptance_table(requests, windows).to_csv(index=False))
    atomic_write(rd.reconciliation, reconciliation_table(requests, windows).to_csv(index=False))
    return render(rd.path)

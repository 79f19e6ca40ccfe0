"""The matrix run: plan, run directory, run state, then every variant's launch, then the analysis.

Flow: config -> plan (launches, sweep) -> server -> client -> records -> statistics -> report.
Each variant is launched once for its whole sweep (runner.unit). Request records are appended one by
one; a window (one repeat of one cell) counts only once its WindowRecord is written, so an interrupted
window is measured again from scratch on resume, and nothing already measured is ever rewritten.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NoReturn

from specbench.config import RunConfig
from specbench.records.rundir import RunDir
from specbench.runner.finalize import derive_cells, finalize
from specbench.runner.prepare import (
    Plan,
    check_run_dir,
    check_writable,
    config_hash,
    default_run_path,
    open_run_dir,
    prepare_plan,
    write_side_files,
)
from specbench.runner.reuse import Borrow, copy_reusable, copy_windows, planned_windows, variant_fingerprints
from specbench.runner.scheduler import launch_order, run_schedule
from specbench.runner.sequential import Looks, until_decided
from specbench.runner.session import RecordSink
from specbench.runner.signals import describe, stop_on_signals
from specbench.runner.state import RunState, VariantState
from specbench.runner.unit import measure_launch, open_context
from specbench.shared.environment import hardware_fingerprint
from specbench.shared.errors import ConfigError, Interrupted, PreflightError, RunDirError, StorageError
from specbench.shared.progress import Reporter, make_reporter
from specbench.stores import calibration, history_lookup, variance_history
from specbench.stores.setupkey import setup_of

if TYPE_CHECKING:
    from specbench.server.slurm import Allocation



@dataclass
class RunOptions:
    out: Path | None = None  # the run directory; default <output_dir>/<name>-<timestamp>
    resume: bool = False
    force: bool = False
    reuse: Path | None = None  # an earlier run whose unchanged variants are taken as they are
    borrow: Borrow | None = None  # one variant's windows taken from an earlier run (specbench update)
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
        self.started = 0.0  # time.monotonic() at the start of run() (sweep.until: decided budgets from it)

    def _start_state(self, rd: RunDir, plan: Plan) -> RunState:
        fingerprints = variant_fingerprints(self.cfg.sweep, plan.engine, plan.launches, plan.sweep)
        state = RunState.load(rd) if self.opts.resume else RunState.new()
        if self.opts.resume:
            if state.config_hash not in (None, config_hash(self.cfg)):
                raise RunDirError(f"--resume: the config differs from the one {rd.path} was started with")
            state.note_resume()
        else:
            state.launch_order = "abba"
        state.name, state.baseline, state.config_hash = self.cfg.name, self.cfg.baseline.name, config_hash(self.cfg)
        if state.verdict is None:  # a resume keeps the settings the run was started with
            state.verdict = {"min_speedup": self.cfg.verdict.min_speedup}
        if self.cfg.sweep.input_lens:
            from specbench.plan.padding import padding_document

            state.padding_document = padding_document().source
        for vl in plan.launches:
            vs = state.variants.setdefault(vl.name, VariantState())
            vs.drafter, vs.fingerprint = vl.drafter.name, fingerprints[vl.name]
        return state

    async def run(self) -> RunResult:
        o = self.opts
        self.started = time.monotonic()
        if o.out is None:
            o.out = default_run_path(self.cfg)
        check_run_dir(o.out, o.resume, o.force)  # before model resolution, preflight and any launch
        check_writable(o.out, o.resume)
        alloc = None
        if self.cfg.engine.nodes > 1 and o.scheduler != "slurm":
            raise ConfigError("engine.nodes", f"{self.cfg.engine.nodes} nodes per variant need --scheduler slurm "
                              "(inside a Slurm allocation)")
        if o.scheduler == "slurm":
            from specbench.server.slurm import current_allocation

            alloc = current_allocation()  # refused outside an allocation, before anything is prepared
        plan = prepare_plan(self.cfg)
        if not o.skip_preflight:
            from specbench.checks.preflight import preflight, preflight_warnings

            problems = preflight(self.cfg, plan.engine, plan.launches, self.cfg.engine.port)
            if problems:
                raise PreflightError("; ".join(problems))
            for w in preflight_warnings(self.cfg, plan.engine, plan.launches):
                say(f"warning: {w}")
        self.rd = rd = open_run_dir(o.out, o.resume, o.force)
        self.state = state = self._start_state(rd, plan)
        write_side_files(rd, plan)
        if not o.resume:  # this setup's pooled variance history, if any
            self._attach_history(plan, rd, state)
        state.save(rd)

        sink = RecordSink.open(rd, state.run_id)  # opening repairs a torn tail (before --reuse appends too)
        try:
            await self._measure(plan, rd, state, sink, alloc)
        except BaseException:
            self._close(sink, rd, state, quiet=True)  # the error in flight is the one to report
            raise
        self._close(sink, rd, state, quiet=False)
        return RunResult(run_dir=rd.path, status=dict(state.statuses()))

    def _attach_history(self, plan: Plan, rd: RunDir, state: RunState) -> None:
        """Copy this setup's pooled variance history into the run (calibration.json) and record in run.json
        (`variance_history`) the setup, the entries that may be pooled and why the others are not."""
        baseline = plan.launch(self.cfg.baseline.name)
        setup = setup_of(hardware_fingerprint(), plan.engine, baseline, self.cfg.engine.nodes)
        found = history_lookup.attach(rd.path, setup, variance_history.history_dir(self.cfg.verdict.history_dir))
        state.variance_history = found.to_dict()
        for note in found.notes:
            self.reporter.log(note)
        cal = found.pooled
        if cal is not None:
            self.reporter.log(f"between-launch CV {100 * cal.launch_cv:.1f}% (pooled df {cal.df:g}, "
                              f"{cal.entries} entries of {cal.history}, this setup) goes into every interval")

    def _close(self, sink: RecordSink, rd: RunDir, state: RunState, quiet: bool) -> None:
        """Close the record files, save run.json, stop the progress display: each is tried even when an
        earlier one fails (a full disk); unless `quiet`, the first failure is raised afterwards."""
        first: OSError | None = None
        for step in (sink.close, lambda: state.save(rd), self.reporter.close):
            try:
                step()
            except OSError as exc:
                first = first or exc
        if first is not None and not quiet:
            raise first

    async def _measure(self, plan: Plan, rd: RunDir, state: RunState, sink: RecordSink,
                       alloc: Allocation | None) -> None:
        """--reuse, then every unit of the schedule (here, or on the Slurm allocation's nodes)."""
        o = self.opts
        if self.cfg.sweep.until == "decided" and (alloc is not None or o.reuse):
            raise ConfigError("sweep.until", "decided runs locally and measures every variant itself "
                              "(no --scheduler slurm, no --reuse)")
        if o.reuse:
            self._reuse(o.reuse, {vl.name: state.variants[vl.name].fingerprint or "" for vl in plan.launches})
        if o.borrow and copy_windows(o.borrow, rd, planned_windows(self.cfg.sweep, plan.sweep, o.borrow.variant)):
            self._mark_reused(o.borrow.source, {o.borrow.variant}, "its windows of this sweep, same launch")
        placer = None
        if alloc is not None:
            from specbench.runner.cluster import SlurmPlacer

            placer = SlurmPlacer(self.cfg, rd, state, sink, alloc, self.reporter.log)
            placer.merge_all()  # what a previous head measured but did not merge (resume)
        ctx = open_context(rd.path, plan=plan, sink=sink, reporter=self.reporter)
        ctx.checkpoint = lambda: state.save(rd)
        names = [vl.name for vl in plan.launches]
        units = launch_order(names, self.cfg.sweep.launches, state.launch_order or "interleaved")
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
                                          started=self.started, log=self.reporter.log))

    def _reuse(self, source: Path, fingerprints: dict[str, str]) -> None:
        assert self.rd is not None and self.state is not None
        reusable = copy_reusable(source, self.rd, fingerprints)
        self._mark_reused(source, reusable, "unchanged: reusing its measurements")
        for name in sorted(set(fingerprints) - reusable):
            self.reporter.log(f"{name}: changed or not measured in {source}: measuring")

    def _mark_reused(self, source: Path, names: set[str], why: str) -> None:
        assert self.rd is not None and self.state is not None
        for name in sorted(names):
            vs = self.state.variants[name]
            vs.status, vs.reused_from, vs.wall_s = "reused", str(source), 0.0
            self.reporter.log(f"{name}: from {source} ({why})")
        self.state.save(self.rd)


def run_matrix(cfg: RunConfig, opts: RunOptions) -> RunResult:
    """Run (or resume) a matrix, then derive cells and the report. SIGINT, SIGTERM and SIGHUP stop every
    engine and end in Interrupted; a write that fails mid-run (a full disk) ends in StorageError."""
    run = MatrixRun(cfg, opts)
    received: list[signal.Signals] = []

    async def main() -> RunResult:
        task = asyncio.current_task()
        assert task is not None
        with stop_on_signals(task) as got:
            try:
                result = await run.run()
            except BaseException:
                received.extend(got)
                if got:  # whatever the signal caused on the way out (a write to a closed terminal), it wins
                    raise asyncio.CancelledError from None
                raise
            received.extend(got)
        if received:  # a cancellation swallowed on the way (it should not be): still an interruption
            raise asyncio.CancelledError
        return result

    try:
        result = asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        _interrupted(run, cfg, received)
    except OSError as exc:
        _storage_failed(run, exc)
    try:
        finalize(RunDir(result.run_dir), cfg)
    except OSError as exc:
        raise StorageError(f"the measurements are complete and kept in {result.run_dir}, but writing the "
                           f"analysis failed: {_problem(exc)}; once fixed: specbench report {result.run_dir}") from None
    if (warning := calibration.add_run(result.run_dir, cfg)) is not None:
        say(warning)
    return result


def _interrupted(run: MatrixRun, cfg: RunConfig, received: list[signal.Signals]) -> NoReturn:
    by = f" by {describe(received)}" if received else ""
    rd, state = run.rd, run.state
    if rd is None or state is None:
        raise Interrupted(f"interrupted{by} before anything was measured") from None
    state.mark_interrupted()
    try:
        state.save(rd)
        finalize(rd, cfg)  # whatever was measured is still analysed and reported
    except Exception as exc:  # never let the report hide the interruption
        say(f"warning: could not analyse the partial run: {exc}")
    raise Interrupted(f"interrupted{by}: every engine was stopped; measurements kept in {rd.path}; "
                      f"finish with: specbench run --resume {rd.path}") from None


def _storage_failed(run: MatrixRun, exc: OSError) -> NoReturn:
    """A write into the run directory failed mid-run: the engines are already stopped (the session left
    its `async with`), every record written before it is complete on disk; say so and how to resume."""
    rd, state, problem = run.rd, run.state, _problem(exc)
    if rd is None or state is None:
        raise StorageError(f"{problem}; nothing was measured") from None
    state.mark_interrupted()
    try:
        state.save(rd)
    except OSError:
        pass  # run.json keeps its last saved state; --resume reads it all the same
    raise StorageError(f"writing {rd.path} failed: {problem}; every engine was stopped; the measurements "
                       f"recorded before it are kept in {rd.path}; free space (or fix the disk), then finish "
                       f"with: specbench run --resume {rd.path}") from None


def _problem(exc: OSError) -> str:
    return f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc.strerror or exc)


def say(line: str) -> None:
    """A line to stderr that never raises (stderr may be a terminal that has gone: SIGHUP)."""
    try:
        print(line, file=sys.stderr)
    except (OSError, ValueError):
        pass


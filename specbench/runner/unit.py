"""The scheduler's unit of work: measure one launch of one variant.

    outcome = await measure_launch(ctx, LaunchUnit("ngram", launch=1), state)

A unit launches the variant's engine once (VariantSession), warms it up and measures every window of the
sweep that the run still needs for that variant, then stops the engine. Everything it needs is in a
RunContext, which `open_context(run_dir)` rebuilds from the run directory alone (its config.yaml is the
resolved config; run.json, requests.jsonl and windows.jsonl say what is already measured). So a unit can:
- be called for the same variant several times: each call is a new launch (`launch` numbers them) that
  measures only the windows still missing;
- run in another process or on another node, given the run directory, the config and the variant name;
  it then appends to the sink it is given and reports its outcome as a VariantState.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specbench.client.stream import run_closed_loop
from specbench.config import RunConfig, load_config
from specbench.metrics import window_throughput
from specbench.plan.windows import (
    SweepPoint,
    measured,
    point_requests,
    warmup_requests,
    window_id,
    window_requests,
)
from specbench.records.rundir import RunDir
from specbench.report.fmt import fmt_output_len
from specbench.runner.prepare import Plan, prepare_plan
from specbench.runner.rate_search import pending
from specbench.runner.repeats import RepeatRule
from specbench.runner.session import RecordSink, VariantSession
from specbench.runner.state import RunState, VariantState
from specbench.runner.window import measure_window
from specbench.shared.errors import ClientWorkerError, EngineDiedError, EngineStartError, ScrapeError
from specbench.shared.progress import Reporter, make_reporter
from specbench.shared.schema import RequestRecord

UNIT_FAILURES = (EngineStartError, EngineDiedError, ScrapeError, ClientWorkerError)  # end the unit; the next one runs


@dataclass(frozen=True)
class LaunchUnit:
    """One launch of one variant: what a scheduler places (in this process, or on a node via srun)."""

    variant: str
    launch: int = 1  # 1-based: the n-th launch of this variant in the run


@dataclass
class RunContext:
    """What every unit of a run shares: the plan, the run directory, where records go, what is done."""

    plan: Plan
    rd: RunDir
    sink: RecordSink
    done: set[str]  # window ids with a WindowRecord
    throughput: dict[str, float]  # window id -> output throughput (the adaptive stopping rule)
    reporter: Reporter
    checkpoint: Callable[[], None] = field(default=lambda: None)  # persist the variants' states
    # (variant, launch) -> the point ids that launch measures (sequential launches); absent: every point
    only: dict[tuple[str, int], frozenset[str]] = field(default_factory=dict)
    # open loop with capacity.search: window id -> its records (the search decides from them)
    window_records: dict[str, list[RequestRecord]] = field(default_factory=dict)

    @property
    def cfg(self) -> RunConfig:
        return self.plan.cfg

    def wanted(self, variant: str, launch: int, point: SweepPoint) -> bool:
        if not measured(self.cfg.variants, variant, point):  # above the variant's max_concurrency
            return False
        allowed = self.only.get((variant, launch))
        return allowed is None or point.key(variant).point_id in allowed

    def todo(self, variant: str, launch: int = 1) -> list[tuple[SweepPoint, int]]:
        """(point, number of windows) still to measure for one launch of `variant`, as far as is known now."""
        rule = RepeatRule(self.cfg.sweep)
        out = []
        for p in self.plan.sweep.points:
            if not self.wanted(variant, launch, p):
                continue
            n = len(rule.next_repeats(p.key(variant).cell_id, self.done, self.throughput, launch))
            if n:
                out.append((p, n))
        if launch == 1 and self.cfg.capacity.search:  # the next bisection rates (first launch only)
            out += [(p, n) for p in pending(self.cfg, variant, self.plan.sweep.points, self.done, self.window_records)
                    if (n := len(rule.next_repeats(p.key(variant).cell_id, self.done, self.throughput, launch)))]
        return out

    def requests_todo(self, variant: str) -> int:
        """Requests still to send for `variant`, over all its launches (progress and ETA)."""
        return sum(n * point_requests(self.cfg.sweep, self.plan.sweep, p)
                   for la in range(1, self.cfg.sweep.launches + 1) for p, n in self.todo(variant, la))


def open_context(run_dir: Path, cfg: RunConfig | None = None, plan: Plan | None = None,
                 sink: RecordSink | None = None, reporter: Reporter | None = None) -> RunContext:
    """A RunContext from a run directory (the remote entry point: only the path is required)."""
    rd = RunDir(run_dir)
    if plan is None:
        plan = prepare_plan(cfg or load_config(rd.config))
    if sink is None:
        sink = RecordSink.open(rd, RunState.load(rd).run_id)
    done = {w.window_id for w in rd.window_records()}
    return RunContext(plan=plan, rd=rd, sink=sink, done=done, throughput=_throughputs(rd, plan.cfg, done),
                      reporter=reporter or make_reporter(quiet=True), window_records=_searched(rd, plan.cfg, done))


def _searched(rd: RunDir, cfg: RunConfig, done: set[str]) -> dict[str, list[RequestRecord]]:
    """Finished windows' records, for a capacity search to continue on resume (read only when searching)."""
    if not cfg.capacity.search:
        return {}
    out: dict[str, list[RequestRecord]] = {}
    for rec in rd.request_records():
        if rec.window_id in done:
            out.setdefault(rec.window_id, []).append(rec)
    return out


def _throughputs(rd: RunDir, cfg: RunConfig, done: set[str]) -> dict[str, float]:
    """Finished windows' throughputs: on resume the adaptive rule needs them (read only in adaptive mode)."""
    if not cfg.sweep.adaptive:
        return {}
    by_window: dict[str, list[RequestRecord]] = {}
    for rec in rd.request_records():
        if rec.window_id in done:
            by_window.setdefault(rec.window_id, []).append(rec)
    return {w: tp for w, recs in by_window.items() if (tp := window_throughput(recs)) is not None}


async def measure_launch(ctx: RunContext, unit: LaunchUnit, state: VariantState) -> VariantState:
    """Launch `unit.variant`, measure its missing windows, stop it. Updates and returns `state` (status
    done or failed with a one-line reason; startup, pid, wall time); engine faults never propagate."""
    vl = ctx.plan.launch(unit.variant)
    t0 = time.monotonic()
    session = VariantSession(ctx.cfg, vl, ctx.sink, ctx.rd.variant_dir(vl.name), ctx.reporter)
    state.status = "starting"  # so an interruption during startup is recorded as one
    try:
        async with session:
            state.pid, state.startup_s = session.pid, session.startup_s
            state.status = "running"
            ctx.checkpoint()
            await _measure(ctx, session, unit.launch)
        state.succeed()
    except UNIT_FAILURES as exc:
        state.fail(str(exc))
        ctx.reporter.log(f"{vl.name}: FAILED: {exc}")
    finally:
        if state.pid is None:
            state.pid = session.pid  # a launch that never became ready still names its process
        state.wall_s = round((state.wall_s or 0) + time.monotonic() - t0, 1)
    return state


async def _measure(ctx: RunContext, session: VariantSession, launch: int) -> None:
    cfg, sweep, name = ctx.cfg, ctx.plan.sweep, session.name
    warm = warmup_requests(cfg.sweep, sweep, name, launch)  # every launch warms its own engine
    if warm:
        ctx.reporter.phase(name, f"warmup ({len(warm)} requests)")
        await run_closed_loop(session.endpoint, warm, 1, ctx.sink.request)
    for point in sweep.points:
        if not ctx.wanted(name, launch, point):
            continue
        await _measure_point(ctx, session, point, launch)
    while launch == 1 and (more := pending(cfg, name, sweep.points, ctx.done, ctx.window_records)):
        # capacity.search: the next bisection rate of each unfinished curve (stop if none had a window to measure)
        if not [await _measure_point(ctx, session, point, launch) for point in more].count(True):
            break


async def _measure_point(ctx: RunContext, session: VariantSession, point: SweepPoint, launch: int) -> bool:
    """Every window of one point still missing in this launch; False when none was."""
    cfg, sweep, name = ctx.cfg, ctx.plan.sweep, session.name
    rule = RepeatRule(cfg.sweep)
    cell_id = point.key(name).cell_id
    flushed = measured = False
    while todo := rule.next_repeats(cell_id, ctx.done, ctx.throughput, launch):
        repeat = todo[0]
        if not flushed:
            await session.engine.between_cells(session.http, session.base_url)
            flushed = True
        where = f"launch {launch} " if cfg.sweep.launches > 1 else ""
        load = f"c={point.concurrency}" if point.rate is None else f"{point.rate:g} req/s"
        ctx.reporter.phase(name, f"{where}{point.category} out={fmt_output_len(point.output_len)} {load} rep {repeat}")
        wid = window_id(cell_id, repeat, launch)
        await measure_window(session, window_requests(cfg.sweep, sweep, point, name, repeat, launch), wid)
        ctx.done.add(wid)
        if rule.adaptive and (tp := window_throughput(session.last_window)) is not None:
            ctx.throughput[wid] = tp
        if cfg.capacity.search:
            ctx.window_records[wid] = list(session.last_window)
        measured = True
    return measured

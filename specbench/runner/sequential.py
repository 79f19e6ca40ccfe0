"""`sweep.until: decided`: after the configured launches, one more launch at a time, only where a point is
still undecided, until every point is decided, `sweep.max_launches` is reached or `sweep.budget_h` would
be exceeded. Each round launches the baseline (every still-undecided point) and then each drafter with
undecided points (only those), in the counterbalanced order of `scheduler.round_order` (round n reversed
when n is even, as the first launches). The decision at each look reads the always-valid intervals of
decide/stopping.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from specbench.decide.stopping import next_round
from specbench.pricing.relaunch import launch_seconds, measuring_share
from specbench.runner.scheduler import Execute, round_order, run_schedule
from specbench.runner.state import RunState
from specbench.runner.unit import LaunchUnit, RunContext


@dataclass
class Looks:
    """What the loop needs from the run: its cells as measured so far, how to run a unit, when it began."""

    cells: Callable[[], pd.DataFrame]
    execute: Execute
    started: float  # time.monotonic() at the start of the run
    log: Callable[[str], None]


def _round_cost(state: RunState, cells: pd.DataFrame, launches: dict[str, int],
                todo: dict[str, frozenset[str]]) -> float:
    """Seconds the next round should take: per variant, one more launch of its still undecided points
    (pricing.relaunch: its startup plus their share of its measuring time per launch so far)."""
    return sum(launch_seconds(state.variants[v].startup_s, state.variants[v].wall_s, launches.get(v, 1),
                              measuring_share(cells, v, points)) for v, points in todo.items())


async def until_decided(ctx: RunContext, state: RunState, baseline: str, looks: Looks) -> None:
    sweep = ctx.cfg.sweep
    order = [vl.name for vl in ctx.plan.launches]
    launches = {v: sweep.launches for v in order}
    n = sweep.launches
    while True:
        status = {v: state.variants[v].status for v in order}
        cells = looks.cells()
        nxt = next_round(cells, sweep, ctx.cfg.verdict.min_speedup, baseline, n, status)
        if not nxt.todo:
            looks.log(f"sequential: {nxt.reason}")
            return
        todo = dict(nxt.todo)
        if sweep.budget_h is not None:
            spent, cost = time.monotonic() - looks.started, _round_cost(state, cells, launches, todo)
            if spent + cost > sweep.budget_h * 3600:
                looks.log(f"sequential: stopping after {n} launches: another round (about {cost / 60:.0f} min) "
                          f"would exceed budget_h {sweep.budget_h:g}")
                return
        n += 1
        names = round_order(list(todo), n, state.launch_order or "interleaved")
        k = len(todo[baseline])
        looks.log(f"sequential: launch {n} of {', '.join(names)} for {k} undecided point{'s' if k != 1 else ''}")
        for v in names:
            ctx.only[(v, n)] = todo[v]
            launches[v] += 1
        await run_schedule([LaunchUnit(v, n) for v in names], state, looks.execute,
                           lambda u: bool(ctx.todo(u.variant, u.launch)), ctx.checkpoint)

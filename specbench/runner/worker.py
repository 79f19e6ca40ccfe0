"""`specbench worker RUN_DIR --variant NAME`: one launch of one variant on this node, run as a Slurm step.

The head (runner/cluster.py) starts it with srun on the variant's rank-0 node. It rebuilds the plan from
the run directory, launches the engine next to itself (through a second srun step over all of the
variant's nodes when `engine.nodes > 1`), measures the variant's missing windows with the same unit as a
single-node run (`measure_launch`), appends the records to the variant's part files, and writes its
outcome (variants/<name>/outcome.json) for the head. SIGTERM (Slurm cancelling the step, the allocation
ending) stops the engine and records the variant as interrupted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from specbench.config import RunConfig, load_config
from specbench.records.rundir import RunDir, write_json
from specbench.runner.parts import open_part_sink, record_placement
from specbench.runner.prepare import Plan, prepare_plan
from specbench.runner.signals import stop_on_signals
from specbench.runner.state import RunState, VariantState
from specbench.runner.unit import LaunchUnit, RunContext, measure_launch, open_context
from specbench.server.multinode import Placement, outer_step_env, ranked_launch
from specbench.shared.environment import node_fingerprint
from specbench.shared.errors import SpecbenchError

INTERRUPTED = "stopped by a signal: Slurm cancelled the step, or the allocation ended"


def outcome_file(rd: RunDir, variant: str) -> Path:
    return rd.variant_dir(variant) / "outcome.json"


def shifted(cfg: RunConfig, offset: int) -> RunConfig:
    """The config with the engine's ports moved by `offset` (nodes that share one host)."""
    if not offset:
        return cfg
    e = cfg.engine
    engine = e.model_copy(update={"port": e.port + offset, "dist_init_port": e.dist_init_port + offset})
    return cfg.model_copy(update={"engine": engine})


def with_ranks(plan: Plan, variant: str, nodes: list[str], init_addr: str | None, job_id: str | None) -> Plan:
    """The plan with `variant` launched as one srun step over `nodes` (one rank per node)."""
    vl = plan.launch(variant)
    if vl.spec is None or vl.engine is None:
        return plan
    ranked = ranked_launch(vl.engine, vl.spec, Placement(tuple(nodes), init_addr, job_id),
                           plan.cfg.scheduler.srun_args, variant)
    new = dataclasses.replace(vl, spec=ranked.spec)
    return dataclasses.replace(plan, launches=[new if la.name == variant else la for la in plan.launches])


def rank_fingerprints(nodes: list[str], job_id: str | None, engine_version: str | None,
                      srun_args: list[str]) -> dict[str, dict[str, Any]]:
    """The other ranks' node fingerprints, each collected on its node by a one-task-per-node srun step
    (`specbench fingerprint`). A node that does not answer is recorded by name only (not compared)."""
    if not nodes:
        return {}
    argv = ["srun", *(["--jobid", job_id] if job_id else []), "--overlap", "--nodes", str(len(nodes)),
            "--ntasks", str(len(nodes)), "--ntasks-per-node", "1", "--nodelist", ",".join(nodes), *srun_args,
            sys.executable, "-m", "specbench.cli", "fingerprint", *(["--engine-version", engine_version]
                                                                    if engine_version else [])]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=300).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    found: dict[str, dict[str, Any]] = {}
    for line in out.splitlines():
        try:
            found.update(json.loads(line))
        except ValueError:
            continue
    return {n: found.get(n, {"host": n}) for n in nodes}


def run_worker(run_dir: Path, variant: str, launch: int, nodes: list[str], port_offset: int = 0,
               init_addr: str | None = None) -> int:
    """Measure one launch of `variant`; 0 when it finished, 1 when it failed or was interrupted."""
    rd = RunDir(run_dir)
    run_id = RunState.load(rd).run_id
    job_id = os.environ.get("SLURM_JOB_ID")
    # the engine's own step (and anything else started from here) must not inherit this step's SLURM_*
    kept = outer_step_env(dict(os.environ))
    os.environ.clear()
    os.environ.update(kept)
    state = VariantState()
    sink = open_part_sink(rd, variant, run_id)
    try:
        cfg = shifted(load_config(rd.config), port_offset)
        plan = prepare_plan(cfg)  # on this node: its model folder, its engine install
        if cfg.engine.nodes > 1:
            plan = with_ranks(plan, variant, nodes, init_addr, job_id)
        version = plan.engine.version()
        record_placement(rd, variant, launch, {
            nodes[0]: node_fingerprint(version),
            **rank_fingerprints(nodes[1:], job_id, version, cfg.scheduler.srun_args)})
        ctx = open_context(rd.path, plan=plan, sink=sink)
        asyncio.run(_measure(ctx, LaunchUnit(variant, launch), state))
    except SpecbenchError as exc:  # what this node cannot do (no model folder here, ...): the head says so
        state.fail(f"{variant} on {nodes[0]}: {exc}")
    except (KeyboardInterrupt, asyncio.CancelledError):
        state.status, state.reason = "interrupted", INTERRUPTED
    finally:
        sink.close()
        write_json(outcome_file(rd, variant), state.model_dump(mode="json", exclude_none=True))
    return 0 if state.status == "done" else 1


async def _measure(ctx: RunContext, unit: LaunchUnit, state: VariantState) -> None:
    task = asyncio.current_task()
    assert task is not None
    with stop_on_signals(task) as received:  # SIGINT, SIGTERM (scancel), SIGHUP: the engine is stopped
        await measure_launch(ctx, unit, state)
    if received:
        raise asyncio.CancelledError

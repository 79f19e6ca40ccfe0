"""`specbench run --scheduler slurm`: the variants side by side, each on its own node(s) of the allocation.

The head (this process, inside salloc/sbatch) hands each unit (one launch of one variant) to a worker
step, `srun --exclusive --nodes 1 --nodelist <rank-0 node> specbench worker RUN_DIR --variant NAME`, as
soon as enough nodes are free (`engine.nodes` per variant). When a step ends, the head merges the
variant's part files into the run's record files, updates environment.json with the nodes that served it
and takes the worker's outcome into run.json; a step that ended without an outcome (killed, node lost)
fails the variant with Slurm's reason. The other variants go on. Interrupted (SIGINT/SIGTERM, e.g. the
allocation's time limit), the head stops every step through srun and marks unfinished variants
interrupted; `specbench run --resume` then measures what is missing.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from specbench.config import RunConfig
from specbench.records.rundir import RunDir, write_json
from specbench.runner.parts import merge_parts, placements
from specbench.runner.session import RecordSink
from specbench.runner.state import RunState, VariantState
from specbench.runner.unit import LaunchUnit
from specbench.runner.worker import INTERRUPTED, outcome_file
from specbench.server.slurm import Allocation, cancel_step, step_reason, worker_step


class SlurmPlacer:
    """Runs units as worker steps on free nodes of the allocation, as many at once as the nodes allow."""

    def __init__(self, cfg: RunConfig, rd: RunDir, state: RunState, sink: RecordSink, alloc: Allocation,
                 log: Callable[[str], None]):
        self.cfg, self.rd, self.state, self.sink, self.alloc, self.log = cfg, rd, state, sink, alloc, log
        self.free = list(alloc.nodes)
        self.freed = asyncio.Condition()

    def merge_all(self) -> None:
        """Merge every variant's part files (after a crash of the head, before a resume measures more)."""
        for name in self.state.variants:
            merge_parts(self.rd, name, self.state.run_id, self.sink)
        self.update_environment()

    def update_environment(self) -> None:
        env = _read(self.rd.environment) or {}
        env["nodes"], env["variant_nodes"] = placements(self.rd, list(self.state.variants))
        env["scheduler"] = {"kind": "slurm", "job_id": self.alloc.job_id, "allocation": list(self.alloc.nodes)}
        write_json(self.rd.environment, env)

    async def run(self, units: Sequence[LaunchUnit], has_work: Callable[[str], bool],
                  save: Callable[[], None]) -> None:
        need = self.cfg.engine.nodes
        if need > len(self.alloc.nodes):
            from specbench.shared.errors import ConfigError

            raise ConfigError("engine.nodes", f"each variant needs {need} nodes; the allocation has "
                              f"{len(self.alloc.nodes)} ({','.join(self.alloc.nodes)})")
        tasks = []
        try:
            for unit in units:
                vs = self.state.variants[unit.variant]
                if vs.status == "reused":
                    continue
                if not has_work(unit.variant):
                    vs.status = "done"
                    continue
                nodes = await self._take(need)
                tasks.append(asyncio.create_task(self._run_unit(unit, vs, nodes, save)))
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _take(self, n: int) -> list[str]:
        async with self.freed:
            await self.freed.wait_for(lambda: len(self.free) >= n)
            nodes, self.free = self.free[:n], self.free[n:]
            return nodes

    async def _give_back(self, nodes: list[str]) -> None:
        async with self.freed:
            self.free = sorted([*self.free, *nodes], key=self.alloc.nodes.index)  # allocation order
            self.freed.notify_all()

    def _argv(self, unit: LaunchUnit, nodes: list[str]) -> list[str]:
        head = nodes[0]
        worker = [sys.executable, "-m", "specbench.cli", "worker", str(self.rd.path), "--variant", unit.variant,
                  "--launch", str(unit.launch), "--nodes", ",".join(nodes),
                  "--port-offset", str(self.alloc.port_offset(head)), "--init-addr", self.alloc.addresses[head]]
        return worker_step(self.alloc, head, unit.variant, worker, self.cfg.scheduler.srun_args)

    async def _run_unit(self, unit: LaunchUnit, vs: VariantState, nodes: list[str], save: Callable[[], None]) -> None:
        name = unit.variant
        vdir = self.rd.variant_dir(name)
        vdir.mkdir(parents=True, exist_ok=True)
        outcome_file(self.rd, name).unlink(missing_ok=True)
        log_path = vdir / "slurm-step.log"
        argv = self._argv(unit, nodes)
        vs.status = "running"
        vs.nodes = nodes
        save()
        self.log(f"{name}: measuring on {','.join(nodes)} (srun step specbench-worker-{name})")
        rc: int | None = None
        t0 = time.monotonic()
        with open(log_path, "ab") as log:
            log.write(f"$ {' '.join(argv)}\n".encode())
            log.flush()
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL, stdout=log,
                                                        stderr=log, start_new_session=True)
            try:
                rc = await proc.wait()
            except asyncio.CancelledError:
                await self._stop(proc, name)
                rc = proc.returncode
                raise
            finally:
                self._collect(name, vs, rc, log_path, time.monotonic() - t0)
                save()
                await self._give_back(nodes)

    async def _stop(self, proc: asyncio.subprocess.Process, name: str) -> None:
        """Stop a worker step: SIGTERM to srun (forwarded to the worker, which stops its engine), then what
        Slurm itself can do (scancel) once the engine's grace period and Slurm's KillWait are over."""
        grace = self.cfg.engine.stop_timeout_s + 30
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), grace)
            except TimeoutError:
                cancel_step(self.alloc.job_id, f"specbench-worker-{name}")
                proc.kill()
                await proc.wait()

    def _collect(self, name: str, vs: VariantState, rc: int | None, log_path: Path, elapsed: float) -> None:
        """Merge the variant's records and take its outcome (or Slurm's reason when the worker left none).
        wall_s is the step's time as the head saw it (a killed worker reports none)."""
        merge_parts(self.rd, name, self.state.run_id, self.sink)
        self.update_environment()
        vs.wall_s = round((vs.wall_s or 0.0) + elapsed, 1)
        out = _read(outcome_file(self.rd, name))
        if out is not None:
            got = VariantState.model_validate(out)
            vs.status, vs.reason, vs.startup_s, vs.pid = got.status, got.reason, got.startup_s, got.pid
            if vs.status == "interrupted":  # what Slurm said, when it said something
                vs.reason = f"{INTERRUPTED} ({step_reason(log_path, rc)})"
        else:
            vs.fail(f"{name}: the worker step ended without an outcome: {step_reason(log_path, rc)}")
        self.log(f"{name}: {vs.status}" + (f" ({vs.reason})" if vs.reason else ""))


def _read(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None

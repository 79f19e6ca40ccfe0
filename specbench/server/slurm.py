"""What specbench asks of Slurm: the allocation it runs in, its nodes' addresses, a worker step's argv, and
why a step ended. Only Slurm's own commands are used (scontrol, sinfo, srun, scancel)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specbench.shared.errors import UsageError

# what srun and slurmstepd print when a step ends: Slurm's banner first, else their last error
_BANNER = re.compile(r"\*\*\* (?:STEP|JOB) .*? \*\*\*")  # *** STEP 12.3 ON n2 CANCELLED AT ... ***
_ERROR = re.compile(r"(?:srun|slurmstepd\S*): error: (.*)")


@dataclass(frozen=True)
class Allocation:
    """The Slurm job specbench runs in (salloc/sbatch)."""

    job_id: str
    nodes: tuple[str, ...]
    addresses: dict[str, str]  # node -> NodeAddr (how the others reach it)

    @property
    def shared_host(self) -> bool:
        """Several nodes on one address (a test cluster on one machine): engines need distinct ports."""
        return len(set(self.addresses.values())) < len(self.nodes)

    def port_offset(self, node: str) -> int:
        """0 on separate hosts; the node's index in the allocation when nodes share one host."""
        return self.nodes.index(node) if self.shared_host else 0


def _run(argv: list[str]) -> str:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"--scheduler slurm: cannot run {argv[0]} ({type(exc).__name__}: {exc})") from None
    if r.returncode != 0:
        raise UsageError(f"--scheduler slurm: {' '.join(argv)} failed: {r.stderr.strip()[:200]}")
    return r.stdout


def current_allocation() -> Allocation:
    """The allocation this process runs in; UsageError outside one."""
    job = os.environ.get("SLURM_JOB_ID")
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not job or not nodelist:
        raise UsageError("--scheduler slurm runs inside a Slurm allocation (salloc or sbatch): "
                         "SLURM_JOB_ID is not set")
    nodes = tuple(_run(["scontrol", "show", "hostnames", nodelist]).split())
    addresses = {}
    for line in _run(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N %o"]).splitlines():
        name, _, addr = line.strip().partition(" ")
        addresses[name] = addr.strip() or name
    return Allocation(job_id=job, nodes=nodes, addresses={n: addresses.get(n, n) for n in nodes})


def worker_step(alloc: Allocation, node: str, name: str, argv: Sequence[str],
                srun_args: Sequence[str] = ()) -> list[str]:
    """The srun step that runs `argv` (specbench's worker) alone on `node`: one task, the node exclusive to
    it within the allocation. The worker's engine steps join it with --overlap (server/multinode.py)."""
    return ["srun", "--jobid", alloc.job_id, "--exclusive", "--nodes", "1", "--ntasks", "1", "--nodelist", node,
            "--kill-on-bad-exit=1", "--job-name", f"specbench-worker-{name}", *srun_args, *argv]


def step_reason(log: Path, returncode: int | None) -> str:
    """Why a step ended, from its srun output (after the last `$ srun` line: the log holds every launch):
    Slurm's own words, else the exit code."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        text = ""
    text = text[text.rfind("$ srun"):] if "$ srun" in text else text
    found = _BANNER.findall(text) or [e.strip() for e in _ERROR.findall(text)]
    if found:
        return f"Slurm: {found[-1]}"
    return f"the srun step exited with code {returncode}"


def cancel_step(job_id: str, step_name: str) -> None:
    """Cancel the allocation's steps named `step_name` (what is left when srun itself could not be stopped)."""
    r = subprocess.run(["squeue", "-h", "-s", "-j", job_id, "-o", "%i %j"], capture_output=True, text=True,
                       timeout=60)
    for line in r.stdout.splitlines():
        step, _, name = line.strip().partition(" ")
        if name.strip() == step_name:
            subprocess.run(["scancel", step], capture_output=True, timeout=60)

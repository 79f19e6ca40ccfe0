"""An engine that spans several nodes (`engine.nodes: N`): one srun step, one task per node, each its rank.

SGLang's multi-node launch is the single-node argv plus `--nnodes N --dist-init-addr HOST:PORT` (the same
for every rank, HOST = rank 0's node) and `--node-rank R`. The step is

    srun --overlap --nodes N --ntasks N --ntasks-per-node 1 --nodelist n1,n2 --kill-on-bad-exit=1 ...
         /bin/sh -c 'exec "$@" --node-rank "$SLURM_NODEID"' specbench-rank <argv> --nnodes N --dist-init-addr ..

The shell only appends the rank that Slurm sets inside the step and execs the engine (no string from the
config is ever parsed by it: the argv is passed as "$@"). `--overlap` because specbench's own worker step
already holds rank 0's node; `--kill-on-bad-exit` so that one rank dying ends every rank; stopping srun
stops the step on every node (srun forwards the signal; Slurm kills what is left after KillWait).
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.server.engines import Engine, LaunchSpec
from specbench.shared.errors import ConfigError

RANK_SHELL = 'exec "$@" {flag} "$SLURM_NODEID"'


@dataclass(frozen=True)
class RankedLaunch:
    spec: LaunchSpec  # what is started: the srun step (srun passes the environment on to every rank)
    nodes: tuple[str, ...]  # rank 0 first
    ranks: tuple[tuple[str, ...], ...]  # each rank's engine argv as it runs on its node

    @property
    def init_host(self) -> str:
        return self.nodes[0]


def placeholder_nodes(n: int) -> list[str]:
    """Node names for printing a launch before Slurm has placed it."""
    return [f"<node{i}>" for i in range(n)]


def rank_flags(engine: Engine) -> tuple[str, str, str]:
    """(nnodes, node rank, init address) flags of an engine that runs across nodes; ConfigError otherwise."""
    flags = engine.rank_flags
    if flags is None:
        raise ConfigError("engine.nodes", f"engine kind {engine.kind} cannot span several nodes "
                          f"(engine.kind sglang can)")
    return flags


@dataclass(frozen=True)
class Placement:
    """Where Slurm puts a multi-node step: `nodes` (rank r on nodes[r]); `init_addr`, how the other ranks
    reach rank 0 (default: its node name); `job_id`, the allocation to start the step in, when srun runs
    inside another step (see `outer_step_env`)."""

    nodes: tuple[str, ...]
    init_addr: str | None = None
    job_id: str | None = None


def ranked_launch(engine: Engine, spec: LaunchSpec, place: Placement,
                  srun_args: list[str] | tuple[str, ...] = (), name: str = "engine") -> RankedLaunch:
    """The srun step that starts `spec` as one rank per node of `place`; the rendezvous port is
    engine.dist_init_port. `srun_args` are added to srun's own; `name` names the step."""
    nnodes_flag, rank_flag, addr_flag = rank_flags(engine)
    nodes, init_addr, job_id = place.nodes, place.init_addr, place.job_id
    n = len(nodes)
    port = engine.config.dist_init_port
    common = [*spec.argv, nnodes_flag, str(n), addr_flag, f"{init_addr or nodes[0]}:{port}"]
    srun = ["srun", *(["--jobid", job_id] if job_id else []), "--overlap", "--nodes", str(n), "--ntasks", str(n),
            "--ntasks-per-node", "1", "--nodelist", ",".join(nodes), "--kill-on-bad-exit=1",
            "--job-name", f"specbench-{name}", *srun_args,
            "/bin/sh", "-c", RANK_SHELL.format(flag=rank_flag), "specbench-rank", *common]
    ranks = tuple(tuple([*common, rank_flag, str(r)]) for r in range(n))
    return RankedLaunch(spec=LaunchSpec(argv=srun, env=spec.env), nodes=tuple(nodes), ranks=ranks)


def outer_step_env(env: dict[str, str]) -> dict[str, str]:
    """`env` without the SLURM_* variables of the step it was inherited from (SLURM_CONF kept).

    srun inside a step reads them as the allocation (SLURM_NNODES=1, SLURM_JOB_NODELIST=<this node>) and
    refuses a step on more nodes ("Only allocated 1 nodes asked for 2"); with them gone and `--jobid`
    given, it asks slurmctld for the real allocation."""
    return {k: v for k, v in env.items() if not k.startswith("SLURM") or k == "SLURM_CONF"}

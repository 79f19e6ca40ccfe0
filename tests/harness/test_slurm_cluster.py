"""The local Slurm the scheduler tests run on: three real slurmd nodes that run srun steps side by side."""

from __future__ import annotations

import subprocess
import time

from tests.slurm_cluster import SlurmCluster, slurm, slurm_cluster  # noqa: F401  (the fixture)

pytestmark = slurm


def test_three_idle_nodes(slurm_cluster: SlurmCluster) -> None:
    r = slurm_cluster.run("sinfo", "-h", "-N", "-o", "%N %t")
    states = dict(line.split() for line in r.stdout.splitlines())
    assert states == {"n1": "idle", "n2": "idle", "n3": "idle"}


def test_exclusive_steps_run_in_parallel_on_named_nodes(slurm_cluster: SlurmCluster) -> None:
    """Inside one allocation, one `srun --exclusive -w nX` step per node, all at once: each step lands on
    the node it named, sees its own SLURM_NODEID, and the three overlap in time."""
    script = ("import os, time; t0 = time.time(); time.sleep(1.5); "
              "print(os.environ['SLURMD_NODENAME'], os.environ['SLURM_NODEID'], t0, time.time())")
    steps = " & ".join(f"srun --exclusive -N1 -n1 -w {n} python3 -c \"{script}\"" for n in slurm_cluster.nodes)
    t0 = time.monotonic()
    r = slurm_cluster.run("salloc", "-N3", "--quiet", "bash", "-c", f"{steps} & wait", timeout=120)
    wall = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()]
    assert sorted(row[0] for row in rows) == ["n1", "n2", "n3"]
    assert {row[1] for row in rows} == {"0"}  # a one-node step: node 0 of its own step
    starts, ends = [float(row[2]) for row in rows], [float(row[3]) for row in rows]
    assert max(starts) < min(ends), "the steps ran one after another, not side by side"
    assert wall < 3 * 1.5 + 10


def test_scancel_of_one_step_leaves_the_others(slurm_cluster: SlurmCluster) -> None:
    r = slurm_cluster.run("salloc", "-N2", "--no-shell", "--quiet", "-J", "cancel-one")
    assert r.returncode == 0, r.stderr
    job = slurm_cluster.run("squeue", "-h", "-n", "cancel-one", "-o", "%i").stdout.strip()
    procs = [subprocess.Popen(["srun", "--jobid", job, "--exclusive", "-N1", "-n1", "-w", n, "sleep", "30"],
                              env=slurm_cluster.env, stderr=subprocess.DEVNULL) for n in slurm_cluster.nodes[:2]]
    try:
        deadline = time.monotonic() + 20
        steps: list[str] = []
        while len(steps) < 2 and time.monotonic() < deadline:
            steps = slurm_cluster.run("squeue", "-h", "-s", "-j", job, "-o", "%i %N").stdout.split("\n")
            steps = [s for s in steps if s.strip() and not s.endswith(".extern")]
            time.sleep(0.2)
        first = next(s.split()[0] for s in steps if s.split()[1] == "n1")
        slurm_cluster.run("scancel", first)
        assert procs[0].wait(timeout=20) != 0
        assert procs[1].poll() is None, "cancelling one step ended the other"
    finally:
        slurm_cluster.run("scancel", job)
        for p in procs:
            p.wait(timeout=30)

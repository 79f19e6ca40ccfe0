"""A real Slurm cluster on this machine for the tests: munged, slurmctld and three slurmd daemons from
Debian's packages, started by scripts/slurm_local.sh with a generated slurm.conf in a temporary folder.

Where Slurm is not installed the tests that need it are skipped with a message saying how to install it,
unless SPECBENCH_REQUIRE_SLURM=1 (set by .ci/run, which installs it): then they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import unavailable

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "slurm_local.sh"
NODES = 3
DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "sinfo")

slurm = pytest.mark.slurm


@dataclass(frozen=True)
class SlurmCluster:
    state: Path
    conf: Path
    nodes: tuple[str, ...]

    @property
    def env(self) -> dict[str, str]:
        """The environment a Slurm client needs to talk to this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout)


def missing_slurm() -> list[str]:
    return [d for d in DAEMONS if not shutil.which(d)]


def _free_port_range(n: int) -> int:
    """A base port such that base .. base+n are all free now."""
    for base in range(16817, 30000, n + 3):
        ok = True
        for p in range(base, base + n + 1):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port range for the local Slurm")


def _skip_or_fail(reason: str) -> None:
    """Fail where Slurm must be there (.ci/run sets SPECBENCH_REQUIRE_SLURM=1; CI=true), else skip loudly."""
    if os.environ.get("SPECBENCH_REQUIRE_SLURM") == "1":
        pytest.fail(f"{reason} (SPECBENCH_REQUIRE_SLURM=1)")
    unavailable(f"SLURM TESTS NOT RUN: {reason}: run `scripts/slurm_local.sh install` (as root) to test the "
                f"Slurm scheduler")


def start_cluster(state: Path) -> SlurmCluster:
    env = {**os.environ, "SLURM_LOCAL_NODES": str(NODES), "SLURM_LOCAL_PORT": str(_free_port_range(NODES))}
    r = subprocess.run(["bash", str(SCRIPT), "start", str(state)], env=env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"scripts/slurm_local.sh start failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return SlurmCluster(state=state, conf=state / "slurm.conf", nodes=tuple(f"n{i}" for i in range(1, NODES + 1)))


def stop_cluster(state: Path) -> None:
    subprocess.run(["bash", str(SCRIPT), "stop", str(state)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """One cluster for the whole session (start ~1 s, stop ~2 s); every daemon is stopped afterwards."""
    missing = missing_slurm()
    if missing:
        _skip_or_fail(f"Slurm is not installed (missing: {', '.join(missing)})")
    if os.geteuid() != 0:
        _skip_or_fail("the local Slurm runs its daemons as root and this is not root")
    state = tmp_path_factory.mktemp("slurm")
    cluster = start_cluster(state)
    try:
        yield cluster
    finally:
        stop_cluster(state)

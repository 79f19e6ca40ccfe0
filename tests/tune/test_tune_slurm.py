"""`specbench tune --scheduler slurm` on the local Slurm (three slurmd nodes on this machine): each
round's settings run side by side, one per node, and the tune finds the same answer as on one node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, assert_no_survivors, kill_leftovers, write_config
from tests.slurm_cluster import SlurmCluster, slurm, slurm_cluster  # noqa: F401  (the fixture)
from tests.tune.test_tune import tune_config

pytestmark = slurm


def test_tune_rounds_run_side_by_side_on_the_nodes(tmp_path: Path, model_dir: Path, port: int,
                                                    slurm_cluster: SlurmCluster) -> None:
    data = tune_config(model_dir, port)
    data["sweep"].update(concurrency=[1, 4])
    data["tune"]["variants"]["ngram"]["num_tokens"] = [1, 4]  # 2 settings + the baseline: 3 nodes
    cfg = write_config(tmp_path / "tune.yaml", data)
    out = tmp_path / "tune"
    head = ["salloc", "-N3", "--exclusive", "--quiet", "-J", f"specbench-tune-{port}", sys.executable, "-m",
            "specbench.cli", "tune", str(cfg), "--out", str(out), "--scheduler", "slurm", "--skip-preflight"]
    r = subprocess.run(head, env={**slurm_cluster.env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                       timeout=600)
    try:
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        env = json.loads((out / "search-1" / "environment.json").read_text())
        assert sorted(n for ns in env["variant_nodes"].values() for n in ns) == ["n1", "n2", "n3"]
        levels = json.loads((out / "tune.json").read_text())["variants"]["ngram"]["concurrency"]
        assert levels["1"]["params"] == {"num_tokens": 4} and levels["4"]["params"] == {"num_tokens": 1}
    finally:
        for p in range(port, port + 3):  # node i's engine listens on port + i
            try:
                assert_no_survivors(p, within_s=15)
            finally:
                kill_leftovers(p)

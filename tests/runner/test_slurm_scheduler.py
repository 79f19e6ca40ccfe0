"""`specbench run --scheduler slurm` on a real Slurm (three slurmd nodes on this machine, see
tests/slurm_cluster.py): the variants as parallel srun steps, one report like a single-node run's, a step
killed mid-sweep, `--resume`, and no process left behind. The engines are the stand-in server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.config import parse_config
from specbench.records.loaded_run import load_run
from specbench.runner import RunOptions, run_matrix
from tests.conftest import REPO, assert_no_survivors, kill_leftovers, set_faults, standin_config, write_config
from tests.slurm_cluster import SlurmCluster, slurm, slurm_cluster  # noqa: F401  (the fixture)

pytestmark = slurm

VARIANTS = [{"name": "base", "drafter": "autoregressive", "baseline": True},
            {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}},
            {"name": "ngram5", "drafter": "ngram", "params": {"num_tokens": 5}}]


def _config(model_dir: Path, port: int, **sweep: Any) -> Path:
    data = standin_config(model_dir, port, variants=VARIANTS, sweep={"repeats": 3, **sweep}, name="slurm")
    return write_config(model_dir.parent / "cfg.yaml", data)


def _head(cluster: SlurmCluster, *args: str, job: str = "specbench-test") -> list[str]:
    """The head, inside a fresh three-node allocation (as `salloc ... specbench run` on a login node)."""
    return ["salloc", "-N3", "--exclusive", "--quiet", "-J", job, sys.executable, "-m", "specbench.cli", "run",
            *args, "--scheduler", "slurm", "--skip-preflight"]


def _env(cluster: SlurmCluster) -> dict[str, str]:
    return {**cluster.env, "PYTHONPATH": str(REPO)}


def _status(run: Path) -> dict[str, tuple[str, str | None]]:
    meta = json.loads((run / "run.json").read_text())
    return {k: (v["status"], v.get("reason")) for k, v in meta["variants"].items()}


def _no_engines_left(port: int) -> None:
    """The stand-ins run under slurmstepd, not under the test: look for them by their ports (the nodes
    share this host, so node i's engine listens on port + i)."""
    for p in range(port, port + 3):
        try:
            assert_no_survivors(p, within_s=15)
        finally:
            kill_leftovers(p)


def _headings(report: Path) -> list[str]:
    """The report's section headings (the title names the run id: left out)."""
    return [line for line in report.read_text().splitlines() if line.startswith("##")]


def test_variants_run_side_by_side_and_report_like_a_single_node_run(
        tmp_path: Path, model_dir: Path, port: int, slurm_cluster: SlurmCluster) -> None:
    cfg = _config(model_dir, port, repeats=2)
    for v in VARIANTS:  # each variant measures for several seconds: side by side shows past start-up skew
        set_faults(model_dir.parent, v["name"], ["--ms-per-token", "150"])
    local = run_matrix(parse_config(__import__("yaml").safe_load(cfg.read_text())),
                       RunOptions(out=tmp_path / "local", skip_preflight=True))
    assert set(local.status.values()) == {"done"}

    run = tmp_path / "slurm"
    r = subprocess.run(_head(slurm_cluster, str(cfg), "--out", str(run)), env=_env(slurm_cluster),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert {k: s for k, (s, _) in _status(run).items()} == {"base": "done", "ngram": "done", "ngram5": "done"}

    env = json.loads((run / "environment.json").read_text())
    assert env["variant_nodes"] == {"base": ["n1"], "ngram": ["n2"], "ngram5": ["n3"]}
    assert set(env["nodes"]) == {"n1", "n2", "n3"} and env["scheduler"]["kind"] == "slurm"
    # side by side: every variant's measuring began before any variant's measuring ended
    windows = load_run(run).windows
    spans = windows.groupby("variant").agg(start=("t_start", "min"), end=("t_end", "max"))
    assert spans["start"].max() < spans["end"].min(), spans

    # one report of the same form as the single-node run's: same cells, same columns, same sections
    a, b = pd.read_csv(tmp_path / "local" / "cells.csv"), pd.read_csv(run / "cells.csv")
    assert list(a.columns) == list(b.columns)
    assert sorted(zip(a.variant, a.point_id)) == sorted(zip(b.variant, b.point_id)) and len(b) == 6
    assert b["valid"].all() and (b["repeats"] == 2).all()
    assert _headings(tmp_path / "local" / "report.md") == _headings(run / "report.md")
    # the merged record files hold exactly what the nodes measured
    for name in ("base", "ngram", "ngram5"):
        (part,) = (run / "variants" / name).glob("windows.*.jsonl")
        assert len(part.read_text().splitlines()) == len(windows[windows.variant == name]) == 4
    assert slurm_cluster.run("squeue", "-h").stdout.strip() == ""
    _no_engines_left(port)


def _wait_for(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _lines(pattern: str, folder: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in folder.glob(pattern)) if folder.exists() else 0


def test_a_killed_step_fails_its_variant_only_and_resume_completes(
        tmp_path: Path, model_dir: Path, port: int, slurm_cluster: SlurmCluster) -> None:
    cfg = _config(model_dir, port)
    set_faults(model_dir.parent, "ngram", ["--ms-per-token", "100"])  # slow enough to be killed mid-sweep
    run = tmp_path / "run"
    job = f"specbench-kill-{port}"
    head = subprocess.Popen(_head(slurm_cluster, str(cfg), "--out", str(run), job=job), env=_env(slurm_cluster),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ngram_dir = run / "variants" / "ngram"
        _wait_for(lambda: _lines("windows.*.jsonl", ngram_dir) >= 1, 120, "ngram's first window")
        job_id = slurm_cluster.run("squeue", "-h", "-n", job, "-o", "%i").stdout.strip()
        steps = slurm_cluster.run("squeue", "-h", "-s", "-j", job_id, "-o", "%i %j").stdout.splitlines()
        (step,) = [s.split()[0] for s in steps if s.split()[1:] == ["specbench-worker-ngram"]]
        slurm_cluster.run("scancel", step)
        out, _ = head.communicate(timeout=180)
    finally:
        if head.poll() is None:
            head.kill()
            head.wait()
    assert head.returncode == 1, out[-3000:]
    status = _status(run)
    assert status["base"] == ("done", None) and status["ngram5"] == ("done", None), status
    assert status["ngram"][0] == "failed" and f"STEP {step} ON n2 CANCELLED" in str(status["ngram"][1]), status
    measured = load_run(run).windows
    assert (measured.variant == "ngram").sum() < 6 and (measured.variant == "base").sum() == 6
    assert "ngram" in (run / "report.md").read_text()  # the partial run is still analysed and reported
    _no_engines_left(port)

    set_faults(model_dir.parent, "ngram", None)
    r = subprocess.run(_head(slurm_cluster, "--resume", str(run)), env=_env(slurm_cluster), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert {k: s for k, (s, _) in _status(run).items()} == {"base": "done", "ngram": "done", "ngram5": "done"}
    ids = [json.loads(line)["window_id"] for line in (run / "windows.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 18  # every window once: nothing measured twice, nothing missing
    cells = pd.read_csv(run / "cells.csv")
    assert len(cells) == 6 and cells["valid"].all() and (cells["repeats"] == 3).all()
    _no_engines_left(port)
    os.environ.get("SLURM_CONF")  # the test never changed this process's Slurm settings


def test_a_two_node_variant_runs_one_rank_per_node_and_leaves_none(
        tmp_path: Path, model_dir: Path, port: int, slurm_cluster: SlurmCluster) -> None:
    """engine.nodes: 2 with SGLang (the fake in tests/standin/fake_sglang, whose ranks meet at
    --dist-init-addr like SGLang's): each variant's ranks as one srun step on two nodes, readiness and the
    client on rank 0, every rank gone after each variant; the other rank's node fingerprinted there."""
    fake = REPO / "tests" / "standin" / "fake_sglang"
    dist = port + 10
    data = {"name": "two-nodes", "model": {"path": str(model_dir), "served_name": "standin"},
            "engine": {"kind": "sglang", "version": "0.5.23", "port": port, "dist_init_port": dist, "nodes": 2,
                       "startup_timeout_s": 30, "stop_timeout_s": 3, "env": {"PYTHONPATH": f"{fake}:{REPO}"}},
            "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                         {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}],
            "sweep": {"prompts": [{"set": "seed", "categories": ["code"], "per_category": 2}], "output_lens": [8],
                      "concurrency": [1, 2], "repeats": 1, "warmup_requests": 0, "request_timeout_s": 10}}
    cfg = write_config(tmp_path / "two.yaml", data)
    run = tmp_path / "run"
    r = subprocess.run(_head(slurm_cluster, str(cfg), "--out", str(run)), env=_env(slurm_cluster),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert {k: s for k, (s, _) in _status(run).items()} == {"base": "done", "ngram": "done"}
    env = json.loads((run / "environment.json").read_text())
    assert env["variant_nodes"] == {"base": ["n1", "n2"], "ngram": ["n1", "n2"]}
    assert env["nodes"]["n2"]["cpu"] == env["nodes"]["n1"]["cpu"]  # collected on n2 by its own step
    for name in ("base", "ngram"):
        log = (run / "variants" / name / "server.log").read_text()
        assert "rank 0: 1 rank(s) joined at 127.0.0.1:" in log and "rank 1: joined 127.0.0.1:" in log
        argv = json.loads((run / "variants" / name / "command.json").read_text())["argv"]
        assert argv[:2] == ["srun", "--jobid"] and argv[argv.index("--nodelist") + 1] == "n1,n2"
    assert len(pd.read_csv(run / "cells.csv")) == 4
    for p in (port, dist):
        assert_no_survivors(p, within_s=15)

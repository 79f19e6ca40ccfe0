"""`engine.nodes: N`: one srun step with one SGLang rank per node; validate prints it; SGLang's parser and a
real Slurm accept it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from specbench.cli.validate import validate
from specbench.config import load_config
from specbench.server.engines import LaunchSpec
from specbench.server.launch import make_engine
from specbench.server.multinode import Placement, outer_step_env, placeholder_nodes, ranked_launch
from tests.slurm_cluster import SlurmCluster, slurm, slurm_cluster  # noqa: F401  (the fixture)

REPO = Path(__file__).resolve().parents[2]
KIMI = REPO / "configs" / "kimi-k2.6-tp8.yaml"
ECHO = [sys.executable, "-c", "import json, os, sys; print(json.dumps([os.environ.get('SLURMD_NODENAME'), "
        "sys.argv[1:]]))"]


def two_node_config(tmp_path: Path, **engine) -> Path:
    """The K2.6 matrix on two nodes (TP16): the baseline and EAGLE-3."""
    data = yaml.safe_load(KIMI.read_text())
    data["engine"].update(nodes=2, args=["--tp", "16", "--trust-remote-code"], **engine)
    data["variants"] = data["variants"][:2]
    data["scheduler"] = {"srun_args": ["--gres=gpu:8"]}
    p = tmp_path / "k2.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def _engine(path: Path):
    cfg = load_config(path)
    return cfg, make_engine(cfg, "/models/Kimi-K2.6", "kimi-k2.6")


def test_ranks_share_the_rendezvous_and_differ_in_rank(tmp_path: Path) -> None:
    cfg, engine = _engine(two_node_config(tmp_path))
    spec = LaunchSpec(argv=["python", "-m", "sglang.launch_server", "--tp", "16"], env={"NCCL_IB_DISABLE": "1"})
    rl = ranked_launch(engine, spec, Placement(("gpu07", "gpu08")), srun_args=["--gres=gpu:8"], name="eagle3")
    tail = ["--nnodes", "2", "--dist-init-addr", "gpu07:20000"]
    assert rl.ranks == (tuple(spec.argv + tail + ["--node-rank", "0"]), tuple(spec.argv + tail + ["--node-rank", "1"]))
    srun = rl.spec.argv
    assert srun[:9] == ["srun", "--overlap", "--nodes", "2", "--ntasks", "2", "--ntasks-per-node", "1", "--nodelist"]
    assert srun[9] == "gpu07,gpu08" and "--kill-on-bad-exit=1" in srun and "--gres=gpu:8" in srun
    assert srun[-len(spec.argv) - len(tail):] == spec.argv + tail
    assert rl.spec.env == spec.env and rl.init_host == "gpu07"
    with_job = ranked_launch(engine, spec, Placement(("a", "b"), init_addr="10.0.0.7", job_id="42"))
    assert with_job.spec.argv[1:3] == ["--jobid", "42"]
    assert "10.0.0.7:20000" in ranked_launch(engine, spec, Placement(("a", "b"), init_addr="10.0.0.7")).ranks[1]


def test_the_rank_shell_appends_slurms_rank_and_passes_argv_untouched(tmp_path: Path) -> None:
    """What runs on each node: the step's shell with SLURM_NODEID set, quoting-hostile arguments included."""
    cfg, engine = _engine(two_node_config(tmp_path))
    spec = LaunchSpec(argv=[*ECHO, "--speculative-config", '{"a": "$HOME `x` \'q\'"}', "two words"])
    rl = ranked_launch(engine, spec, Placement(("n1", "n2")))
    shell_at = rl.spec.argv.index("/bin/sh")
    for rank in (0, 1):
        out = subprocess.run(rl.spec.argv[shell_at:], env={**os.environ, "SLURM_NODEID": str(rank)},
                             capture_output=True, text=True, check=True).stdout
        assert json.loads(out)[1] == list(rl.ranks[rank][len(ECHO):])


def test_validate_prints_the_srun_line_and_every_rank(tmp_path: Path) -> None:
    lines: list[str] = []
    assert validate(two_node_config(tmp_path), print_commands=True, out=lines.append) == 0
    text = "\n".join(lines)
    assert "variant eagle3: drafter eagle3, engine sglang, 2 nodes" in text
    srun = [line for line in lines if line.startswith("  srun: ")]
    assert len(srun) == 2 and all("--nodelist '<node0>,<node1>'" in s and "--gres=gpu:8" in s for s in srun)
    rank1 = [line for line in lines if line.startswith("  rank 1 on <node1>: ")]
    assert len(rank1) == 2 and all(r.endswith("--dist-init-addr '<node0>:20000' --node-rank 1") for r in rank1)
    assert placeholder_nodes(2) == ["<node0>", "<node1>"]


def test_an_engine_that_cannot_span_nodes_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(two_node_config(tmp_path).read_text())
    data["engine"]["kind"] = "vllm"
    p = tmp_path / "v.yaml"
    p.write_text(yaml.safe_dump(data))
    from specbench.cli import main

    r = subprocess.run([sys.executable, "-m", "specbench.cli", "validate", str(p)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2 and "engine.nodes: engine kind vllm cannot span several nodes" in r.stderr
    assert main  # the same entry point as the console script


def test_real_sglang_parser_accepts_every_rank(tmp_path: Path, sglang_python: str) -> None:
    lines: list[str] = []
    assert validate(two_node_config(tmp_path, python=sglang_python), out=lines.append) == 0, "\n".join(lines)
    assert "checked with sglang's prepare_server_args: 4 of 4 argv(s) accepted" in "\n".join(lines)


def test_outer_step_env_keeps_only_the_config() -> None:
    env = {"SLURM_CONF": "/x/slurm.conf", "SLURM_NNODES": "1", "SLURM_JOB_NODELIST": "n1", "PATH": "/bin"}
    assert outer_step_env(env) == {"SLURM_CONF": "/x/slurm.conf", "PATH": "/bin"}


@slurm
def test_the_step_runs_one_rank_per_node_from_inside_a_step(tmp_path: Path, slurm_cluster: SlurmCluster) -> None:
    """As the worker will: from a one-node step on n1, start the ranked step on n1 and n2 with the exact argv."""
    cfg, engine = _engine(two_node_config(tmp_path))
    rl = ranked_launch(engine, LaunchSpec(argv=ECHO), Placement(("n1", "n2"), job_id="$JOB"))
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        "import json, os, subprocess, sys\n"
        "from specbench.server.multinode import outer_step_env\n"
        "argv = [os.environ['SLURM_JOB_ID'] if a == '$JOB' else a for a in json.loads(sys.argv[1])]\n"
        "sys.exit(subprocess.run(argv, env=outer_step_env(dict(os.environ))).returncode)\n")
    r = slurm_cluster.run("salloc", "-N2", "--exclusive", "--quiet", "srun", "--exclusive", "-N1", "-n1", "-w", "n1",
                          sys.executable, str(launcher), json.dumps(rl.spec.argv), timeout=120)
    assert r.returncode == 0, r.stderr
    got = sorted(json.loads(line) for line in r.stdout.splitlines())
    assert got == [["n1", list(rl.ranks[0][len(ECHO):])], ["n2", list(rl.ranks[1][len(ECHO):])]]


def test_the_shipped_two_node_config_validates_with_two_ranks_per_variant() -> None:
    lines: list[str] = []
    assert validate(REPO / "configs" / "kimi-k2.6-tp16-2nodes.yaml", print_commands=True, out=lines.append) == 0
    assert sum(line.startswith("  rank 1 on <node1>: ") for line in lines) == 3
    assert all("--tp 16" in line for line in lines if line.startswith("  rank "))

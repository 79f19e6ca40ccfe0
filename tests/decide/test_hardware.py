"""Node fingerprints and the refusal to compare variants (or runs) measured on unlike hardware."""

from __future__ import annotations

import copy
import json
import math

import pandas as pd
import pytest
import yaml

from specbench.cli import main
from specbench.config import parse_config
from specbench.decide.hardware import check, differences
from specbench.report.compare import compare
from specbench.report.compare_markdown import comparison_markdown
from specbench.runner import RunOptions, run_matrix
from specbench.shared.environment import cuda_version, topology
from specbench.shared.errors import UsageError
from tests.conftest import standin_config

SMI = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.124.06             Driver Version: 570.124.06     CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
"""
TOPO = """\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m
GPU0\t X \tNODE\t0-63\t0\t\tN/A
GPU1\tNODE\t X \t0-63\t0\t\tN/A

Legend:

  X    = Self
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
"""


def node(**over):
    fp = {"host": "a", "cpu": "AMD EPYC 9654", "cpus": 192, "memory_gib": 1511, "gpu_model": "NVIDIA RTX PRO 6000",
          "gpu_count": 8, "gpu_memory": "97887 MiB", "driver": "570.124.06", "cuda": "12.8",
          "topology": "GPU0 GPU1\nGPU0 X NODE", "engine_version": "0.5.23"}
    return {**fp, **over}


def test_nvidia_smi_parsing():
    assert cuda_version(SMI) == "12.8"
    assert cuda_version("no banner") is None
    topo = topology(TOPO)
    assert topo is not None and topo.splitlines()[1] == "GPU0 X NODE 0-63 0 N/A"
    assert "Legend" not in topo and "Self" not in topo
    assert topology("") is None


def test_host_name_is_not_part_of_the_fingerprint_but_hardware_is():
    assert differences(node(host="a"), node(host="b")) == {}
    assert differences(node(), node(cuda="12.4", gpu_count=4)) == {"gpu_count": (8, 4), "cuda": ("12.8", "12.4")}
    assert differences(node(), {"cpu": "AMD EPYC 9654"}) == {}  # an older record: only shared fields compared


def test_check_names_variants_on_unlike_nodes_and_unlike_ranks():
    env = {"nodes": {"n1": node(), "n2": node(host="n2"), "n3": node(host="n3", gpu_model="NVIDIA H100"),
                     "n4": node(host="n4", driver="550.54")},
           "variant_nodes": {"base": ["n1"], "eagle3": ["n2"], "ddtree": ["n3"], "wide": ["n1", "n4"]}}
    result = check(env, "base")
    assert set(result.mismatched) == {"ddtree", "wide"}
    assert "gpu_model: NVIDIA RTX PRO 6000 vs NVIDIA H100" in result.mismatched["ddtree"]
    assert result.mismatched["wide"] == "node n4 differs from the baseline's node n1: driver: 570.124.06 vs 550.54"
    assert result.withheld == {"ddtree", "wide"}
    assert check(env, "base", allowed=True).withheld == set()
    env["variant_nodes"]["base"] = ["n1", "n3"]  # the baseline itself on unlike nodes: nothing compares
    assert check(env, "base").withheld == {"base", "eagle3", "ddtree", "wide"}


def _run(tmp_path, model_dir, port, **over):
    data = standin_config(model_dir, port, sweep={"repeats": 2}, **over)
    return run_matrix(parse_config(data), RunOptions(out=tmp_path / "run", skip_preflight=True)), data


def test_single_host_run_records_one_node_and_compares(tmp_path, model_dir, port, no_survivors):
    result, _ = _run(tmp_path, model_dir, port)
    env = json.loads((result.run_dir / "environment.json").read_text())
    (host,) = env["nodes"]
    assert env["variant_nodes"] == {"base": [host], "ngram": [host]}
    assert env["nodes"][host]["cpu"] == env["cpu"]
    report = (result.run_dir / "report.md").read_text()
    assert "same fingerprint" in report
    no_survivors()


def test_unlike_hardware_withholds_speedups_until_overridden(tmp_path, model_dir, port, no_survivors):
    result, _ = _run(tmp_path, model_dir, port)
    run = result.run_dir
    env = json.loads((run / "environment.json").read_text())
    (host,) = env["nodes"]
    env["nodes"]["gpu-node"] = {**env["nodes"][host], "host": "gpu-node", "gpu_model": "NVIDIA H100"}
    env["variant_nodes"]["ngram"] = ["gpu-node"]
    (run / "environment.json").write_text(json.dumps(env))

    assert main(["report", str(run)]) == 0
    cells = pd.read_csv(run / "cells.csv")
    ngram = cells[cells.variant == "ngram"]
    assert ngram["speedup"].isna().all() and ngram["per_user_speedup"].isna().all()
    assert ngram["output_throughput_tok_s"].notna().all()  # the measurements themselves are kept
    report = (run / "report.md").read_text()
    assert "Speedups withheld" in report and "NVIDIA H100" in report
    assert "ngram**: no verdict: measured on hardware unlike the baseline's" in report

    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["scheduler"] = {"allow_mixed_hardware": True}
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["report", str(run)]) == 0
    cells = pd.read_csv(run / "cells.csv")
    assert not math.isnan(cells[cells.variant == "ngram"]["speedup"].iloc[0])
    report = (run / "report.md").read_text()
    assert "Compared across unlike hardware" in report and "Speedups withheld" not in report
    no_survivors()


def test_compare_refuses_runs_on_unlike_hardware(tmp_path, model_dir, port, capsys, no_survivors):
    result, data = _run(tmp_path, model_dir, port)
    other = tmp_path / "other"
    other.mkdir()
    for f in result.run_dir.iterdir():
        if f.is_file():
            (other / f.name).write_bytes(f.read_bytes())
    env = json.loads((other / "environment.json").read_text())
    for fp in env["nodes"].values():
        fp["engine_version"] = "9.9.9"
    (other / "environment.json").write_text(json.dumps(env))

    with pytest.raises(UsageError, match=r"unlike hardware \(engine_version: .* vs 9\.9\.9\)"):
        compare(result.run_dir, other)
    assert main(["compare", str(result.run_dir), str(other)]) == 2
    assert "--allow-mixed-hardware" in capsys.readouterr().err
    cmp = compare(result.run_dir, other, allow_mixed_hardware=True)
    assert any("compared across unlike hardware" in n for n in cmp.notes)
    assert "compared across unlike hardware" in comparison_markdown(cmp)
    assert compare(result.run_dir, copy.copy(result.run_dir)).notes == ()
    no_survivors()

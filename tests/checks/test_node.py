"""Preflight against the node (issue 39 item 4): TP x PP against the GPUs a node, weights + draft against
the memory the engine may use, and a draft path an engine would download from a hub. Each bad config with
its one-line answer; nvidia-smi is a stand-in script on PATH."""

from __future__ import annotations

import itertools
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from specbench.checks.node import weights_bytes
from specbench.checks.preflight import config_problems, host_problems, preflight_warnings
from specbench.config import parse_config
from specbench.server.launch import make_engine, plan_launches

GB = 10 ** 9
IDS = itertools.count()  # a fresh model folder per setup


def model_dir(tmp_path: Path, name: str, total: int | None = None, files: tuple[int, ...] = ()) -> Path:
    """A model folder whose weights are `total` bytes (in a safetensors index) or sparse files of `files` bytes."""
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    if total is not None:
        (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                    "weight_map": {}}))
    for i, size in enumerate(files):
        with open(d / f"model-{i}.safetensors", "wb") as f:
            f.truncate(size)  # sparse: no disk used
    return d


def setup(tmp_path: Path, engine: dict[str, Any], variants: list[dict[str, Any]] | None = None,
          weights: int = 548 * GB) -> tuple[Any, Any, Any]:
    model = model_dir(tmp_path, f"model{next(IDS)}", total=weights)
    cfg = parse_config({
        "model": {"path": str(model)}, "engine": {"version": "0.5.23", **engine},
        "variants": variants or [{"name": "ar", "drafter": "autoregressive", "baseline": True}],
        "sweep": {"output_lens": [16], "concurrency": [1]}})
    eng = make_engine(cfg, str(model), "m")
    return cfg, eng, plan_launches(cfg, eng)


@pytest.fixture
def eight_h100(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in nvidia-smi: 8 GPUs of 81559 MiB, no compute processes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    rows = "\\n".join(f"{i}, NVIDIA H100 80GB HBM3, 81559 MiB, 550.54" for i in range(8))
    smi.write_text(f'#!/bin/sh\ncase "$1" in --query-gpu=*) printf "{rows}\\n";; esac\nexit 0\n')
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_weights_from_the_index_else_the_files(tmp_path: Path) -> None:
    assert weights_bytes(str(model_dir(tmp_path, "a", total=123))) == (123, "model.safetensors.index.json total_size")
    assert weights_bytes(str(model_dir(tmp_path, "b", files=(10, 20)))) == (30, "2 safetensors file(s)")
    assert weights_bytes(str(tmp_path / "none")) is None


def test_tp_beyond_the_stated_gpus_is_refused_offline(tmp_path: Path) -> None:
    cfg, eng, la = setup(tmp_path, {"kind": "sglang", "gpus": 8, "args": ["--tp", "16"]})
    assert config_problems(cfg, eng, la) == [
        "variants[0]: --tp 16 needs 16 GPUs a node (TP x PP x DP over engine.nodes 1) but the node has 8 "
        "(engine.gpus); lower the parallel size or add nodes (engine.nodes)"]
    cfg, eng, la = setup(tmp_path, {"kind": "sglang", "gpus": 8, "nodes": 2, "args": ["--tp", "16"]})
    assert config_problems(cfg, eng, la) == []


def test_tp_beyond_nvidia_smi_is_refused_on_the_host(tmp_path: Path, eight_h100: None) -> None:
    cfg, eng, la = setup(tmp_path, {"kind": "vllm", "version": "0.32.0", "allow_busy_gpu": True,
                                    "args": ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]})
    out = [p for p in host_problems(cfg, eng, la, cfg.engine.port) if p.startswith("variants[0]")]
    assert out == ["variants[0]: --tensor-parallel-size 8, --pipeline-parallel-size 2 needs 16 GPUs a node (TP x PP "
                   "x DP over engine.nodes 1) but the node has 8 (nvidia-smi); lower the parallel size or "
                   "add nodes (engine.nodes)"]


def test_k26_weights_against_the_pinned_memory_fraction(tmp_path: Path, eight_h100: None) -> None:
    """The issue's case: 548 GB over TP8 is 68.5 GB a GPU, against 0.85 x 85.5 GB = 72.7 GB the pinned
    --mem-fraction-static leaves: 4.2 GB for the KV cache of a 32-request batch (under 5% of the GPU)."""
    cfg, eng, la = setup(tmp_path, {"kind": "sglang", "allow_busy_gpu": True, "args": ["--tp", "8"]})
    assert not [p for p in host_problems(cfg, eng, la, cfg.engine.port) if p.startswith("variants[0]")]
    out = preflight_warnings(cfg, eng, la)  # the weights fit: said, not refused
    assert out == ["variants[0]: weights take 68.5 GB a GPU (model.safetensors.index.json total_size, over 8 GPUs) "
                   "of the 0.85 x 85.5 GB = 72.7 GB the engine may use (--mem-fraction-static, GPU memory from "
                   "nvidia-smi), leaving 4.2 GB for the KV cache; set --mem-fraction-static to at least "
                   "0.86 in engine.args, or spread the model over more GPUs"]
    cfg, eng, la = setup(tmp_path, {"kind": "sglang", "allow_busy_gpu": True,
                                           "args": ["--tp", "8", "--mem-fraction-static", "0.92"]})
    assert preflight_warnings(cfg, eng, la) == []


def test_stated_gpu_memory_and_the_draft_count(tmp_path: Path) -> None:
    """engine.gpu_memory_gb stands in for nvidia-smi; the draft's weights count at the target's TP (vLLM's
    default --gpu-memory-utilization 0.9). Weights beyond what the engine may use are refused."""
    draft = model_dir(tmp_path, "draft", total=40 * GB)
    cfg, eng, la = setup(tmp_path, {"kind": "vllm", "version": "0.32.0", "gpus": 2, "gpu_memory_gb": 24,
                                    "allow_busy_gpu": True, "args": ["-tp", "2"]},
                         variants=[{"name": "ar", "drafter": "autoregressive", "baseline": True},
                                   {"name": "e3", "drafter": "eagle3",
                                    "params": {"draft_model_path": str(draft), "steps": 3}}], weights=10 * GB)
    assert config_problems(cfg, eng, la) == [  # validate refuses what run refuses (issue 51 item 2)
                   "variants[1]: weights + draft take 25.0 GB a GPU (model.safetensors.index.json total_size, over 2 "
                   "GPUs) of the 0.9 x 25.8 GB = 23.2 GB the engine may use (--gpu-memory-utilization, GPU memory "
                   "from engine.gpus, engine.gpu_memory_gb), leaving 0.0 GB for the KV cache; set "
                   "--gpu-memory-utilization to at least 0.99 in engine.args, or spread the model over more GPUs"]


def test_a_draft_path_without_a_slash_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    variants = [{"name": "ar", "drafter": "autoregressive", "baseline": True},
                {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": "kimi-eagle3", "steps": 3}}]
    cfg, eng, la = setup(tmp_path, {"kind": "sglang"}, variants=variants)
    assert config_problems(cfg, eng, la) == [
        "variants[1].params.draft_model_path: 'kimi-eagle3' is not a folder here, and the engine would take it for "
        "a hub id and download it; give the draft's absolute path (or set engine.allow_hub_ids: true to download "
        "it)"]
    (tmp_path / "kimi-eagle3").mkdir()  # a folder here: taken as a path
    assert config_problems(cfg, eng, la) == []
    (tmp_path / "kimi-eagle3").rmdir()
    cfg, eng, la = setup(tmp_path, {"kind": "sglang", "allow_hub_ids": True}, variants=variants)
    assert config_problems(cfg, eng, la) == []

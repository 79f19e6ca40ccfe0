"""Issue 51 items 2, 4 and 6: the node model (checks/node.py) on fake model folders (config.json and the
safetensors index only): memory counted once per folder and read by validate as by run, GiB for
engine.gpu_memory_gb, headroom, data parallelism, an unknown GPU count said, relative draft paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specbench.checks.node import variant_fits
from specbench.checks.preflight import config_problems, preflight_warnings
from specbench.config import parse_config
from specbench.server.launch import make_engine, plan_launches

GB = 10 ** 9
K26 = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "vocab_size": 163840,
       "num_nextn_predict_layers": 1, "max_position_embeddings": 262144}


def folder(tmp_path: Path, name: str, total: int, **config: Any) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config or {"architectures": ["LlamaForCausalLM"]}))
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": {}}))
    return d


def setup(tmp_path: Path, engine: dict[str, Any], variants: list[dict[str, Any]],
          model: Path | None = None) -> tuple[Any, Any, Any]:
    model = model or folder(tmp_path, "k26", 548 * GB, **K26)
    cfg = parse_config({"model": {"path": str(model)}, "engine": engine, "variants": variants,
                        "sweep": {"output_lens": [16], "concurrency": [1, 32]}})
    eng = make_engine(cfg, str(model), "m")
    return cfg, eng, plan_launches(cfg, eng)


AR = {"name": "ar", "drafter": "autoregressive", "baseline": True}
VLLM = {"kind": "vllm", "version": "0.32.0", "gpus": 8, "gpu_memory_gb": 80}


def test_an_mtp_draft_that_is_the_target_counts_once(tmp_path: Path) -> None:
    """548 GB over TP8 is 68.5 GB a GPU, not 137 (the target counted twice): it fits 0.9 x 80 GiB."""
    model = folder(tmp_path, "k26", 548 * GB, **K26)
    mtp = {"name": "mtp", "drafter": "mtp", "params": {"draft_model_path": str(model) + "/", "steps": 1}}
    cfg, eng, la = setup(tmp_path, {**VLLM, "args": ["--tensor-parallel-size", "8"]}, [AR, mtp], model)
    assert config_problems(cfg, eng, la) == []
    fit = variant_fits(cfg, la, eng.model_path, here=False)[1]
    assert fit.lines() == [
        "GPUs: 8 (--tensor-parallel-size 8), 8 a node of 8 (engine.gpus)",
        "memory: weights 68.5 GB a GPU (548.0 GB (target), over 8 GPUs) of 0.9 x 85.9 GB = 77.3 GB "
        "(--gpu-memory-utilization, engine.gpu_memory_gb), 8.8 GB left for the KV cache"]


def test_gpu_memory_gb_is_the_spec_sheets_gib(tmp_path: Path) -> None:
    """gpu_memory_gb: 80 is an H100's 80 GiB (85.9 GB): 548 GB over TP8 at SGLang's pinned 0.85 fits with 4.5 GB
    for the KV cache; read as 80 decimal GB it was refused (68.5 GB a GPU > 0.85 x 80 = 68.0 GB)."""
    cfg, eng, la = setup(tmp_path, {"kind": "sglang", "version": "0.5.23", "gpus": 8, "gpu_memory_gb": 80,
                                    "args": ["--tp", "8"]}, [AR])
    assert config_problems(cfg, eng, la) == [] and preflight_warnings(cfg, eng, la) == []
    assert variant_fits(cfg, la, eng.model_path, here=False)[0].lines()[1] == (
        "memory: weights 68.5 GB a GPU (548.0 GB (target), over 8 GPUs) of 0.85 x 85.9 GB = 73.0 GB "
        "(--mem-fraction-static, engine.gpu_memory_gb), 4.5 GB left for the KV cache")


def test_validate_refuses_weights_that_run_refuses(tmp_path: Path) -> None:
    """The config's own figures and a model folder readable here: refused offline, not only on the host."""
    cfg, eng, la = setup(tmp_path, {**VLLM, "gpu_memory_gb": 40, "args": ["-tp", "8"]}, [AR])
    assert config_problems(cfg, eng, la) == [
        "variants[0]: weights take 68.5 GB a GPU (model.safetensors.index.json total_size, over 8 GPUs) of the 0.9 x "
        "42.9 GB = 38.7 GB the engine may use (--gpu-memory-utilization, GPU memory from engine.gpus, "
        "engine.gpu_memory_gb), leaving 0.0 GB for the KV cache; set --gpu-memory-utilization to at least 0.99 in "
        "engine.args, or spread the model over more GPUs"]


def test_a_memory_fraction_without_headroom_is_said(tmp_path: Path) -> None:
    cfg, eng, la = setup(tmp_path, {**VLLM, "args": ["-tp", "8", "--gpu-memory-utilization", "0.98"]}, [AR])
    assert config_problems(cfg, eng, la) == []
    assert preflight_warnings(cfg, eng, la) == [
        "variants[0]: --gpu-memory-utilization 0.98 leaves 2% of each GPU (1.7 GB) outside the engine's pool for the "
        "CUDA context, NCCL buffers and CUDA graphs: an out-of-memory at startup is likely; 0.95 at most leaves room"]


@pytest.mark.parametrize("engine, args, need", [
    ({"kind": "vllm", "version": "0.32.0"}, ["--data-parallel-size", "2", "--tensor-parallel-size", "8"],
     "--tensor-parallel-size 8, --data-parallel-size 2 needs 16"),
    ({"kind": "sglang", "version": "0.5.23"}, ["--tp", "8", "--dp", "2"], "--tp 8, --dp 2 needs 16"),
])
def test_data_parallelism_counts_its_gpus(tmp_path: Path, engine: dict[str, Any], args: list[str],
                                          need: str) -> None:
    cfg, eng, la = setup(tmp_path, {**engine, "gpus": 8, "args": args}, [AR])
    assert config_problems(cfg, eng, la) == [
        f"variants[0]: {need} GPUs a node (TP x PP x DP over engine.nodes 1) but the node has 8 (engine.gpus); "
        "lower the parallel size or add nodes (engine.nodes)"]


def test_sglang_dp_attention_stays_inside_tp(tmp_path: Path) -> None:
    cfg, eng, la = setup(tmp_path, {"kind": "sglang", "version": "0.5.23", "gpus": 8, "gpu_memory_gb": 80,
                                    "args": ["--tp", "8", "--dp", "8", "--enable-dp-attention"]}, [AR])
    assert config_problems(cfg, eng, la) == []
    assert variant_fits(cfg, la, eng.model_path, here=False)[0].lines()[0] == (
        "GPUs: 8 (--tp 8, --dp 8, --enable-dp-attention (DP inside TP)), 8 a node of 8 (engine.gpus)")


def test_an_unknown_gpu_count_is_said_unchecked(tmp_path: Path) -> None:
    cfg, eng, la = setup(tmp_path, {"kind": "vllm", "version": "0.32.0", "args": ["-tp", "8"]}, [AR])
    assert variant_fits(cfg, la, eng.model_path, here=False)[0].lines() == [
        "GPUs: 8 (-tp 8), 8 a node: not checked, the node's GPU count is unknown (set engine.gpus)",
        "memory: weights 68.5 GB a GPU (548.0 GB (target), over 8 GPUs); GPU memory unknown: not checked (set "
        "engine.gpu_memory_gb)"]


def test_a_relative_draft_path_with_a_slash_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    e3 = {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": "models/EAGLE3-LLaMA3.1-8B", "steps": 3}}
    cfg, eng, la = setup(tmp_path, {**VLLM, "args": ["-tp", "8"]}, [AR, e3])
    assert config_problems(cfg, eng, la) == [
        "variants[1].params.draft_model_path: 'models/EAGLE3-LLaMA3.1-8B' is not a folder here, and a relative path "
        "is read from the directory the engine starts in, and an engine takes owner/name for a hub id; give the "
        "draft's absolute path (or set engine.allow_hub_ids: true to download it)"]

"""Preflight: busy GPU (a stand-in nvidia-smi on PATH), taken port, paths, engine install, and the known-bad
SGLang flag combinations, each refused in one line that names the field."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from specbench.checks.preflight import config_problems, preflight
from specbench.config import parse_config
from specbench.server.engines.base import dist_version
from specbench.server.engines.sglang import SGLangEngine
from specbench.server.launch import plan_launches, sweep_facts

REPO = Path(__file__).resolve().parents[2]
FAKE = REPO / "tests" / "standin" / "fake_sglang"


def setup(tmp_path: Path, engine: dict[str, Any] | None = None, variants: list[dict[str, Any]] | None = None,
          arch: str = "LlamaForCausalLM"):
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"architectures": [arch]}))
    (tmp_path / "draft").mkdir(exist_ok=True)
    cfg = parse_config({
        "model": {"path": str(model)},
        "engine": {"kind": "sglang", "version": "0.5.23", "port": _free_port(), **(engine or {})},
        "variants": variants or [
            {"name": "ar", "drafter": "autoregressive", "baseline": True},
            {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": str(tmp_path / "draft"), "steps": 3,
                                                             "topk": 1, "num_draft_tokens": 4}}],
        "sweep": {"output_lens": [16], "concurrency": [1, 4]}})
    eng = SGLangEngine(cfg.engine, sweep_facts(cfg), str(model), str(model))
    return cfg, eng, plan_launches(cfg, eng)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fake_sglang_installed(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"{FAKE}{os.pathsep}{REPO}")
    dist_version.cache_clear()
    yield
    dist_version.cache_clear()


@pytest.fixture
def busy_gpu(tmp_path: Path, monkeypatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '4242, /usr/bin/python3, 55296 MiB'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_busy_gpu_refused_naming_the_pid(tmp_path: Path, busy_gpu, fake_sglang_installed) -> None:
    cfg, eng, la = setup(tmp_path)
    assert preflight(cfg, eng, la, cfg.engine.port) == [
        "GPU busy: PID 4242 (/usr/bin/python3) holds 55296 MiB; stop it or set engine.allow_busy_gpu: true"]


def test_busy_gpu_allowed_when_told(tmp_path: Path, busy_gpu, fake_sglang_installed) -> None:
    cfg, eng, la = setup(tmp_path, {"allow_busy_gpu": True})
    assert preflight(cfg, eng, la, cfg.engine.port) == []


def test_ambiguous_cuda_graph_flag_on_0_5_23_is_one_line(tmp_path: Path) -> None:
    cfg, eng, la = setup(tmp_path, {"args": ["--cuda-graph-max-bs", "32"]})
    assert config_problems(cfg, eng, la) == [
        "engine.args: --cuda-graph-max-bs is rejected as ambiguous by SGLang >= 0.5.21 (engine version 0.5.23): "
        "use --cuda-graph-max-bs-decode"] * 1
    old_cfg, old_eng, old_la = setup(tmp_path, {"version": "0.5.9", "args": ["--cuda-graph-max-bs", "32"]})
    assert config_problems(old_cfg, old_eng, old_la) == []


def test_new_cuda_graph_flag_on_0_5_9(tmp_path: Path) -> None:
    cfg, eng, la = setup(tmp_path, {"version": "0.5.9"}, [
        {"name": "ar", "drafter": "autoregressive", "baseline": True, "args": ["--cuda-graph-max-bs-decode", "8"]}])
    assert config_problems(cfg, eng, la) == [
        "variants[0].args: --cuda-graph-max-bs-decode does not exist before SGLang 0.5.21 (engine version 0.5.9): "
        "use --cuda-graph-max-bs"]


def test_topk_without_steps_refused(tmp_path: Path) -> None:
    cfg, eng, la = setup(tmp_path, variants=[
        {"name": "ar", "drafter": "autoregressive", "baseline": True},
        {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": str(tmp_path / "draft"), "topk": 1}}])
    assert config_problems(cfg, eng, la) == [
        "variants[1].params.steps: required when topk is set (SGLang fails with a bare AssertionError)"]


def test_topk_without_steps_in_raw_args_refused(tmp_path: Path) -> None:
    cfg, eng, la = setup(tmp_path, variants=[
        {"name": "ar", "drafter": "autoregressive", "baseline": True},
        {"name": "raw", "drafter": "standalone", "params": {"draft_model_path": "/d"},
         "args": ["--speculative-eagle-topk", "4"]}])
    assert config_problems(cfg, eng, la) == [
        "variants[1].args: --speculative-eagle-topk without --speculative-num-steps makes SGLang fail with a bare "
        "AssertionError: set steps too"]


def test_auto_fill_architecture_without_draft_path(tmp_path: Path) -> None:
    cfg, eng, la = setup(tmp_path, arch="DeepseekV3ForCausalLM", variants=[
        {"name": "ar", "drafter": "autoregressive", "baseline": True},
        {"name": "nextn", "drafter": "autoregressive", "args": ["--speculative-algorithm", "NEXTN",
                                                                "--speculative-num-steps", "1"]},
        {"name": "mtp", "drafter": "mtp", "params": {"steps": 1}}])
    out = config_problems(cfg, eng, la)
    assert out[0].startswith("variants[1].args: --speculative-algorithm, --speculative-num-steps in variant nextn, "
                             "whose drafter autoregressive decodes without speculation")
    assert out[1].startswith("variants[1]: no --speculative-draft-model-path for DeepseekV3ForCausalLM")
    assert out[2].startswith("variants[2].params.draft_model_path: the target checkpoint has no MTP layers")
    assert len(out) == 3



def test_ddtree_on_a_release_is_refused(tmp_path: Path) -> None:
    vs = [{"name": "ar", "drafter": "autoregressive", "baseline": True},
          {"name": "dd", "drafter": "ddtree", "params": {"draft_model_path": str(tmp_path / "draft")}}]
    cfg, eng, la = setup(tmp_path, variants=vs)
    assert "DDTREE is not in any SGLang release" in config_problems(cfg, eng, la)[0]
    cfg, eng, la = setup(tmp_path, {"version": "0.5.23+ddtree"}, variants=vs)
    assert config_problems(cfg, eng, la) == []


def test_port_taken_names_the_owner(tmp_path: Path, fake_sglang_installed) -> None:
    cfg, eng, la = setup(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", cfg.engine.port))
        s.listen()
        out = preflight(cfg, eng, la, cfg.engine.port)
    assert len(out) == 1 and out[0].startswith(f"engine.port: 127.0.0.1:{cfg.engine.port} is already in use by PID "
                                               f"{os.getpid()}")


def test_paths_and_install(tmp_path: Path) -> None:
    cfg, eng, la = setup(tmp_path, {"python": str(tmp_path / "nope" / "python")}, variants=[
        {"name": "ar", "drafter": "autoregressive", "baseline": True},
        {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": str(tmp_path / "missing"), "steps": 2}}])
    out = preflight(cfg, eng, la, cfg.engine.port)
    assert out == [f"variants[1].params.draft_model_path: the EAGLE-3 draft head folder not found: "
                   f"{tmp_path / 'missing'}",
                   f"engine.python: interpreter not found: {tmp_path / 'nope' / 'python'}"]


def test_version_mismatch(tmp_path: Path, fake_sglang_installed) -> None:
    cfg, eng, la = setup(tmp_path, {"version": "0.5.9"})
    assert preflight(cfg, eng, la, cfg.engine.port) == [
        f"engine.version: the config says 0.5.9 but {eng.python()} has sglang 0.5.23"]

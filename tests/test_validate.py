"""`specbench validate` on the K2.6 config (no GPU, no sglang needed), refusals, and SGLang's own parser
in the SGLang venv that `make test` creates (SPECBENCH_SGLANG_PYTHON; see docs/sglang.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specbench.validate import validate

REPO = Path(__file__).resolve().parents[1]
KIMI = REPO / "configs" / "kimi-k2.6-tp8.yaml"


def run(path: Path, print_commands: bool = True) -> tuple[int, str]:
    lines: list[str] = []
    rc = validate(path, print_commands=print_commands, out=lines.append)
    return rc, "\n".join(lines)


def test_kimi_config_prints_three_fair_variants() -> None:
    rc, text = run(KIMI)
    assert rc == 0, text
    argvs = [line for line in text.splitlines() if line.startswith("  argv: ")]
    assert len(argvs) == 3
    pins = "--max-running-requests 32 --cuda-graph-max-bs-decode 32 --mem-fraction-static 0.85"
    assert pins in argvs[0] and pins in argvs[1]  # the two SGLang variants: identical pins
    assert ("--speculative-algorithm EAGLE3 --speculative-draft-model-path /models/kimi-k2.6-eagle3 "
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4") in argvs[1]
    assert "--tree-budget 64" in argvs[2]
    envs = [line for line in text.splitlines() if line.startswith("  env: ")]
    assert envs and all("NCCL_IB_DISABLE=1 NCCL_P2P_LEVEL=5 NCCL_PROTO=LL NCCL_ALGO=Ring" in e for e in envs)
    assert "## Fairness audit" in text and "SGLang argument parser:" in text


def _kimi_variant(tmp_path: Path, **changes) -> Path:
    data = yaml.safe_load(KIMI.read_text())
    for key, value in changes.items():
        if key == "engine_args":
            data["engine"]["args"] += value
        elif key == "eagle_params":
            data["variants"][1]["params"] = value
    p = tmp_path / "k.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_ambiguous_graph_flag_refused(tmp_path: Path) -> None:
    rc, text = run(_kimi_variant(tmp_path, engine_args=["--cuda-graph-max-bs", "32"]))
    assert rc == 2
    assert ("  - engine.args: --cuda-graph-max-bs is rejected as ambiguous by SGLang >= 0.5.21 (engine version "
            "0.5.23): use --cuda-graph-max-bs-decode") in text


def test_topk_without_steps_refused(tmp_path: Path) -> None:
    rc, text = run(_kimi_variant(tmp_path, eagle_params={"draft_model_path": "/x", "topk": 1}))
    assert rc == 2 and "variants[1].params.steps: required when topk is set" in text


def test_secrets_redacted(tmp_path: Path) -> None:
    data = yaml.safe_load(KIMI.read_text())
    data["engine"]["env"]["HF_TOKEN"] = "hf_secret"
    p = tmp_path / "k.yaml"
    p.write_text(yaml.safe_dump(data))
    rc, text = run(p)
    assert "hf_secret" not in text and "HF_TOKEN=<redacted>" in text


def test_real_sglang_parser(tmp_path: Path, sglang_python: str) -> None:
    """SGLang's own prepare_server_args accepts both SGLang argvs specbench builds for the K2.6 config."""
    py = sglang_python
    data = yaml.safe_load(KIMI.read_text())
    data["engine"]["python"] = py
    p = tmp_path / "k.yaml"
    p.write_text(yaml.safe_dump(data))
    rc, text = run(p)
    assert rc == 0 and "checked with sglang's prepare_server_args: 2 of 2 argv(s) accepted" in text, text
    # preflight's version check compares engine.version with what is installed there
    data["engine"]["args"] += ["--cuda-graph-max-bs", "32"]
    p.write_text(yaml.safe_dump(data))
    rc, text = run(p)
    assert rc == 2 and "ambiguous option: --cuda-graph-max-bs" in text, text

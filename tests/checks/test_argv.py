"""Issue 51 item 5: the final argv (pins, engine.args, the drafter's arguments, the variant's args) checked
for a flag set twice and for a user value that replaces a pin, on both engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specbench.checks.preflight import config_problems
from tests.checks.test_node_model import AR, setup

SGLANG = {"kind": "sglang", "version": "0.5.23", "gpus": 8, "gpu_memory_gb": 80}
VLLM = {"kind": "vllm", "version": "0.32.0", "gpus": 8, "gpu_memory_gb": 80}
HEAD = "/abs/kimi-k2.6-eagle3"  # absolute: not looked for offline


def problems(tmp_path: Path, engine: dict[str, Any], variant: dict[str, Any]) -> list[str]:
    cfg, eng, la = setup(tmp_path, {**engine, "args": [*engine.get("args", []), "--tp-size" if
                                                       engine["kind"] == "sglang" else "-tp", "8"]}, [AR, variant])
    return config_problems(cfg, eng, la)


def test_a_drafter_flag_set_again_in_args_is_refused(tmp_path: Path) -> None:
    e3 = {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": HEAD, "steps": 3, "topk": 1,
                                                         "num_draft_tokens": 4},
          "args": ["--speculative-num-steps", "5"]}
    assert problems(tmp_path, SGLANG, e3) == [
        "variants[1].args: --speculative-num-steps 5 sets again what variants[1].params set "
        "(--speculative-num-steps 3), and the engine takes the last; set it in the variant's params only"]


def test_a_speculative_config_twice_on_vllm_is_refused(tmp_path: Path) -> None:
    e3 = {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": HEAD, "steps": 3},
          "args": ['--speculative-config={"method":"eagle3","num_speculative_tokens":5}']}
    out = problems(tmp_path, VLLM, e3)
    assert len(out) == 1 and out[0].startswith(
        'variants[1].args: --speculative-config {"method":"eagle3","num_speculative_tokens":5} sets again what '
        'variants[1].params set (--speculative-config {'), out


def test_a_pin_replaced_in_one_variant_is_refused(tmp_path: Path) -> None:
    e3 = {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": HEAD, "steps": 3},
          "args": ["--max-num-seqs", "64"]}
    assert problems(tmp_path, VLLM, e3) == [
        "variants[1].args: --max-num-seqs 64 replaces the fairness pin --max-num-seqs 32 for this variant alone; set "
        "it in engine.args to change it for every variant"]


def test_a_concurrency_cap_below_the_sweep_is_refused_on_both_engines(tmp_path: Path) -> None:
    for n, (engine, flag) in enumerate(((SGLANG, "--max-running-requests"), (VLLM, "--max-num-seqs"))):
        (tmp_path / str(n)).mkdir()
        ng = {"name": "ng", "drafter": "ngram"}
        out = problems(tmp_path / str(n), {**engine, "args": [flag, "16"]}, ng)
        assert out == [f"engine.args: {flag} 16 is below the sweep's largest concurrency 32: the engine would queue "
                       "the requests above 16 and that point would measure the queue; raise it to 32, or leave it "
                       "to specbench's pin"], out


def test_one_flag_twice_in_engine_args_is_refused_once(tmp_path: Path) -> None:
    ng = {"name": "ng", "drafter": "ngram"}
    out = problems(tmp_path, {**SGLANG, "args": ["--attention-backend", "triton", "--attention-backend=fa3"]}, ng)
    assert out == ["engine.args: --attention-backend is given twice ('triton', then 'fa3'); the engine takes the "
                   "last: give it once"]

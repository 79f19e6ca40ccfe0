"""Issue 51 item 9: a drafter param under an engine's own name gets the drafter's equivalent, not the nearest
string; a refusal shared by several variants is one line; a drafter's error names the config file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from specbench.checks.preflight import config_problems
from specbench.cli import main
from specbench.shared.errors import ConfigError
from tests.checks.test_node_model import AR, folder, setup

VLLM = {"kind": "vllm", "version": "0.32.0", "gpus": 8, "gpu_memory_gb": 80, "args": ["-tp", "8"]}


def test_an_engines_own_param_name_suggests_the_drafters(tmp_path: Path) -> None:
    e3 = {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": "/abs/head", "num_speculative_tokens": 3}}
    with pytest.raises(ConfigError) as err:
        setup(tmp_path, VLLM, [AR, e3])
    assert str(err.value) == ("variants[1].params.num_speculative_tokens: unknown field `num_speculative_tokens` (the "
                              "engine's name for `steps`: write steps) (drafter eagle3)")


def test_a_refusal_of_every_variant_is_one_line(tmp_path: Path) -> None:
    ng = {"name": "ng", "drafter": "ngram"}
    cfg, eng, la = setup(tmp_path, {**VLLM, "gpu_memory_gb": 40}, [AR, ng])
    out = config_problems(cfg, eng, la)
    assert len(out) == 1 and out[0].startswith("variants[0] (also variants[1]): weights take 68.5 GB a GPU"), out


def test_a_drafters_error_names_the_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = folder(tmp_path, "m", 10 ** 9)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({
        "model": {"path": str(model)}, "engine": {"kind": "vllm", "version": "0.32.0"},
        "variants": [AR, {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": "/abs/h", "k": 3}}],
        "sweep": {"output_lens": [16], "concurrency": [1]}}))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr()
    assert f"error: {path}: variants[1].params.k: unknown field `k`" in err.out + err.err

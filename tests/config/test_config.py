"""Config loading: includes, relative prompt paths, the ready-made configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench.config import load_config
from specbench.shared.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_include_merges_mappings_and_replaces_lists(tmp_path):
    (tmp_path / "base.yaml").write_text(
        "name: base\nmodel: {path: /m}\nvariants: [{name: a, drafter: autoregressive, baseline: true}]\n"
        "sweep: {output_lens: [8, 16], concurrency: [1], repeats: 1, prompts: [{set: seed}]}\n")
    (tmp_path / "child.yaml").write_text("include: base.yaml\nname: child\nsweep: {output_lens: [32], repeats: 3}\n")
    cfg = load_config(tmp_path / "child.yaml")
    assert cfg.name == "child"
    assert cfg.sweep.output_lens == [32] and cfg.sweep.repeats == 3 and cfg.sweep.concurrency == [1]
    assert cfg.model.path == "/m"


def test_include_cycle_is_one_line_error(tmp_path):
    (tmp_path / "a.yaml").write_text("include: b.yaml\n")
    (tmp_path / "b.yaml").write_text("include: a.yaml\n")
    with pytest.raises(ConfigError, match="include cycle"):
        load_config(tmp_path / "a.yaml")


def test_prompt_file_is_relative_to_the_config(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yaml").write_text(
        "model: {path: /m}\nvariants: [{name: a, drafter: autoregressive, baseline: true}]\n"
        "sweep: {output_lens: [8], concurrency: [1], prompts: [{set: file, path: p.jsonl}]}\n")
    cfg = load_config(tmp_path / "sub" / "c.yaml")
    assert cfg.sweep.prompts[0].path == str((tmp_path / "sub" / "p.jsonl").resolve())


@pytest.mark.parametrize("name", ["demo-cpu.yaml", "demo-cpu-full.yaml", "kimi-k2.6-tp8.yaml"])
def test_shipped_configs_load(name):
    cfg = load_config(REPO / "configs" / name)
    assert cfg.baseline.drafter == "autoregressive"


def test_demo_full_extends_the_demo():
    demo, full = load_config(REPO / "configs/demo-cpu.yaml"), load_config(REPO / "configs/demo-cpu-full.yaml")
    assert (full.sweep.launches, full.sweep.repeats) == (3, 1) and full.sweep.prompts[0].categories is None
    assert full.variants[:len(demo.variants)] == demo.variants
    assert set(demo.sweep.output_lens) < set(full.sweep.output_lens)  # the full demo adds a longer output
    assert [v.drafter for v in demo.variants] == ["autoregressive", "eagle3", "ngram"]
    assert [v.drafter for v in full.variants[3:]] == ["draft_model", "dflash", "autoregressive", "ddtree", "ddtree"]
    dd = {v.name: v for v in full.variants}
    assert dd["dflash"].params == {"draft_model_path": "smollm2-dflash", "block_size": 4}
    assert [dd[n].params["tree_budget"] for n in ("ddtree16", "ddtree64")] == [16, 64]
    assert all(dd[n].command for n in ("ddtree_ar", "ddtree16", "ddtree64"))  # the reference DDTree server
    assert full.engine.kind == "vllm" and full.engine.acceptance_metric == "ddtree_verify_steps_total"

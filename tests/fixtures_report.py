"""A synthetic run directory for report and compare tests: no engine, fully deterministic.

Variants: `autoregressive` (baseline), `ngram` (pays at low concurrency on code, loses above 4;
inconclusive on the hostile category), `draft_model` (never pays, like the truncated demo draft model),
and `eagle3` (failed at launch). Hostile text (`<script>`, pipes) sits in a category name, a warning, a
failure reason, a fairness value and the environment, so escaping can be checked.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

EVIL = "<script>alert(1)</script>"
EVIL_CATEGORY = "qa|<b>x</b>"
CATEGORIES = ("code", EVIL_CATEGORY)
OUTPUT_LENS = (64, 256)
CONCURRENCY = (1, 2, 4, 8, 16)
CI = 0.05  # half-width of every synthetic speedup interval


def _speedup(variant: str, category: str, c: int, ngram_scale: float) -> float:
    """The synthetic truth: ngram falls with concurrency, draft_model stays below 1."""
    if variant == "ngram":
        if category == "code":
            return round((1.6 - 0.25 * math.log2(c)) * ngram_scale, 4)  # 1.6 1.35 1.1 0.85 0.6
        return round(1.0 * ngram_scale, 4)  # interval [0.95, 1.05]: includes 1.0
    if variant == "draft_model":
        return round(0.6 - 0.05 * math.log2(c), 4)
    return 1.0


def cell_rows(ngram_scale: float = 1.0) -> list[dict]:
    rows = []
    for variant in ("autoregressive", "ngram", "draft_model"):
        for category in CATEGORIES:
            for out in OUTPUT_LENS:
                for c in CONCURRENCY:
                    base = 20.0 * c ** 0.8
                    s = _speedup(variant, category, c, ngram_scale)
                    drafter = variant != "autoregressive"
                    point = f"{category}|in-|out{out}|c{c}|t0"
                    per_pos = json.dumps([0.7, 0.5, 0.3]) if variant == "ngram" else ""
                    rows.append({
                        "variant": variant, "category": category, "input_len": "", "output_len": out,
                        "concurrency": c, "temperature": 0.0, "point_id": point, "n_requests": 2 * c,
                        "n_errors": 0, "error_rate": 0.0, "valid": True, "repeats": 3, "launches": 3,
                        "interval_unit": "launch", "launch_cv": 0.04, "repeat_cv": 0.01, "request_cv": 0.1,
                        "output_throughput_tok_s": base * s, "output_throughput_ci_low": base * s * 0.97,
                        "output_throughput_ci_high": base * s * 1.03, "per_user_tok_s": base * s / c,
                        "per_user_tok_s_ci_low": base * s / c * 0.97, "per_user_tok_s_ci_high": base * s / c * 1.03,
                        "ttft_p50_s": 0.05 * c, "ttft_p90_s": 0.07 * c, "ttft_p99_s": 0.09 * c,
                        "tpot_p50_s": c / (base * s), "tpot_p50_s_ci_low": math.nan, "tpot_p50_s_ci_high": math.nan,
                        "tpot_p90_s": 1.2 * c / (base * s), "itl_p50_s": c / (base * s),
                        "e2e_p50_s": out * c / (base * s),
                        "acceptance_length": (2.2 if variant == "ngram" else 1.3) if drafter else math.nan,
                        "acceptance_length_ci_low": 2.1 if variant == "ngram" else math.nan,
                        "acceptance_length_ci_high": 2.3 if variant == "ngram" else math.nan,
                        "draft_acceptance_length": 1.2 if drafter else math.nan,
                        "acceptance_rate": 0.4 if drafter else math.nan, "acceptance_per_position": per_pos,
                        "acceptance_source": "vllm /metrics spec_decode" if drafter else "",
                        "speedup": s if drafter else 1.0,
                        "speedup_ci_low": s - CI if drafter else math.nan,
                        "speedup_ci_high": s + CI if drafter else math.nan,
                        "per_user_speedup": s if drafter else 1.0, "per_user_speedup_ci_low": math.nan,
                        "per_user_speedup_ci_high": math.nan, "tpot_speedup": s if drafter else 1.0,
                        "lossless_match_rate": (0.5 if variant == "draft_model" and c == 1 else
                                                0.9 if c >= 8 else 1.0) if drafter else math.nan,
                        "lossless_prefix_mean": 0.95 if drafter else math.nan,
                        "outlier_count": 0, "throughput_cv": 0.02,
                        "warnings": ("slow_first_repeat;" + EVIL) if (variant == "ngram" and c == 16) else "",
                    })
    return rows


def break_even_rows(ngram_scale: float = 1.0) -> list[dict]:
    rows = []
    for out in OUTPUT_LENS:
        rows.append({"variant": "ngram", "category": "code", "input_len": "", "output_len": out, "temperature": 0.0,
                     "break_even_concurrency": 6.5 if ngram_scale == 1.0 else math.nan,
                     "status": "pays_up_to" if ngram_scale == 1.0 else "never_pays",
                     "verdict": "ngram pays below concurrency ~6.5"})
        rows.append({"variant": "ngram", "category": EVIL_CATEGORY, "input_len": "", "output_len": out,
                     "temperature": 0.0, "break_even_concurrency": math.nan, "status": "inconclusive",
                     "verdict": f"intervals include 1.0 {EVIL}"})
        for cat in CATEGORIES:
            rows.append({"variant": "draft_model", "category": cat, "input_len": "", "output_len": out,
                         "temperature": 0.0, "break_even_concurrency": math.nan, "status": "never_pays",
                         "verdict": "draft_model never pays"})
    return rows


def make_run(path: Path, *, ngram_scale: float = 1.0, run_id: str = "r1", with_break_even: bool = True) -> Path:
    """Write a complete synthetic run directory at `path` and return it."""
    path.mkdir(parents=True, exist_ok=True)
    meta = {
        "run_id": run_id, "name": "demo", "created": "2026-05-10T12:00:00+00:00", "baseline": "autoregressive",
        "variants": {
            "autoregressive": {"status": "reused", "drafter": "autoregressive", "fingerprint": "aa",
                               "reused_from": "runs/r0", "wall_s": 300.0, "startup_s": 40.0},
            "ngram": {"status": "done", "drafter": "ngram", "fingerprint": "bb", "wall_s": 320.0, "startup_s": 41.0},
            "draft_model": {"status": "done", "drafter": "draft_model", "fingerprint": "cc", "wall_s": 400.0,
                            "startup_s": 60.0},
            "eagle3": {"status": "failed", "drafter": "eagle3", "reason": f"engine exited: {EVIL}",
                       "wall_s": 12.0, "startup_s": math.nan},
        },
        "warnings": [f"prompt contained {EVIL} | and a pipe"],
    }
    env = {"host": "ci-host", "platform": "Linux", "cpu": f"Test CPU {EVIL}", "gpus": [],
           "python": "3.11.7", "engine": {"kind": "vllm", "version": "0.0.0-test"}, "specbench_version": "0.1.0",
           "drafters": {"ngram": "builtin", "draft_model": "demo-truncated"}}
    fairness = {"pinned": {"--max-num-seqs": 256, "--dtype": "bfloat16"},
                "differences": [{"what": "--seed", "variants": ["ngram", "draft_model"], "values": [EVIL, "0"]}],
                "ok": False}
    (path / "run.json").write_text(json.dumps(meta, indent=2))
    (path / "environment.json").write_text(json.dumps(env, indent=2))
    (path / "fairness.json").write_text(json.dumps(fairness, indent=2))
    (path / "config.yaml").write_text("name: demo\nmodel:\n  demo: smollm2\n")
    pd.DataFrame(cell_rows(ngram_scale)).to_csv(path / "cells.csv", index=False)
    if with_break_even:
        pd.DataFrame(break_even_rows(ngram_scale)).to_csv(path / "break_even.csv", index=False)
    return path

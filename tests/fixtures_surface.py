"""Synthetic inputs of `specbench plan --surface --acceptance`: cells, a surface directory and a head's C=1
run, no engine. Shared by tests/surface/test_table.py and tests/cli/test_design_plan_write.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.config import RunConfig, dump_config


def cells_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """cells.csv rows: the given columns over defaults (one category, greedy, closed loop, valid)."""
    base = dict(category="c", input_len=math.nan, temperature=0.0, rate=math.nan, valid=True,
                acceptance_length_ci_low=math.nan, acceptance_length_ci_high=math.nan)
    return pd.DataFrame([{**base, **r} for r in rows])


def plan_config(heads: tuple[str, ...] = ("ng",), concurrency: tuple[int, ...] = (1, 4, 16)) -> dict[str, Any]:
    """A matrix (as YAML data): baseline `ar` and one ngram head per name, priced by stated estimates."""
    return {"name": "t", "model": {"path": "/m"}, "engine": {"kind": "vllm", "version": "0.32.0"},
            "variants": [{"name": "ar", "drafter": "autoregressive", "baseline": True}]
            + [{"name": h, "drafter": "ngram", "params": {"num_tokens": 3}} for h in heads],
            "sweep": {"prompts": [{"set": "seed", "categories": ["code"]}], "output_lens": [64],
                      "concurrency": list(concurrency)},
            "estimates": {"startup_s": 30, "per_request_tok_s": 30.0}}


def surface_dir(root: Path, speedups: dict[str, dict[int, tuple[float, float]]]) -> Path:
    """root/surface/surface.csv: per head and concurrency the speedup at forced acceptance 1 and 3 (each with
    a +-10% interval); a head's predicted speedup at acceptance 2 is the time model's through the two
    (metrics.forced_surface.fit: 1/S linear in 1/AL)."""
    from specbench.surface.table import SURFACE_COLUMNS

    rows = [dict(variant=v, forced_acceptance=a, concurrency=c, speedup=s, speedup_ci_low=s / 1.1,
                 speedup_ci_high=s * 1.1, measured_acceptance=a, measured_acceptance_low=a,
                 measured_acceptance_high=a, readback="ok", cells=1)
            for v, per_c in speedups.items() for c, (s1, s3) in per_c.items() for a, s in ((1.0, s1), (3.0, s3))]
    out = root / "surface"
    out.mkdir()
    pd.DataFrame(rows, columns=SURFACE_COLUMNS).to_csv(out / "surface.csv", index=False)
    return out


def acceptance_run(root: Path, cfg: RunConfig, heads: tuple[str, ...], acceptance: float = 2.0) -> Path:
    """root/c1: a C=1 run of the heads, each accepting `acceptance` on its one point (1.7x [1.6, 1.8])."""
    run = root / "c1"
    run.mkdir()
    (run / "config.yaml").write_text(dump_config(cfg))
    cells_frame([dict(variant=h, output_len=64, concurrency=1, speedup=1.7, speedup_ci_low=1.6, speedup_ci_high=1.8,
                      acceptance_length=acceptance) for h in heads]).to_csv(run / "cells.csv", index=False)
    return run

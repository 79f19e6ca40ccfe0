"""Decisions on stand-ins whose speed is set, not measured by luck (issue 24's done-when): two identical
servers launched 3 times each say "no practical difference" at every level and never adopt or slower; a
drafter 1.5x as fast says adopt. The runs are real (paced stand-ins, 3 launches per variant, interleaved),
then every request's timing is set to its server's service time (conftest.force_service_times) with a
small known spread between launches, and the analysis is derived again: the decision rules see known
numbers, never the shared machine's stalls (a 2-core box under load moved a launch mean by several %)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from specbench.config import parse_config
from specbench.records.rundir import RunDir
from specbench.runner import RunOptions, finalize, run_matrix
from specbench.shared.schema import WindowRecord
from tests.conftest import force_service_times, set_faults, standin_config

SWEEP = {"concurrency": [1, 2], "output_lens": [24], "launches": 3, "repeats": 1}


def run(tmp_path: Path, model_dir: Path, port: int, variants: list[dict], faults: dict[str, list[str]],
        sweep: dict | None = None) -> Path:
    data = standin_config(model_dir, port, variants=variants, sweep=sweep or SWEEP)
    for v, flags in faults.items():
        set_faults(model_dir.parent, v, flags)
    out = tmp_path / "run"
    result = run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True))
    assert set(result.status.values()) == {"done"}
    return out


LAUNCH_SPREAD = {1: 0.996, 2: 1.0, 3: 1.004}  # launch l runs at this multiple of its set step time


def set_speeds(out: Path, ms_per_step: dict[str, float]) -> None:
    """Each variant's requests take their tokens' share of its set step time, spread by launch (and
    mirrored for the second variant, so the two differ a little in every launch); then derive again."""
    names = sorted(ms_per_step)

    def ms(w: WindowRecord) -> float:
        spread = LAUNCH_SPREAD[w.launch] if w.variant == names[0] else 2 - LAUNCH_SPREAD[w.launch]
        return ms_per_step[w.variant] * spread

    force_service_times(out, ms)
    finalize(RunDir(out))


def verdict_of(run_dir: Path) -> str:
    return (run_dir / "report.md").read_text().split("## Verdict")[1].split("<details>")[0]


def test_aa_says_no_practical_difference_at_every_level(tmp_path, model_dir, port, no_survivors) -> None:
    aa = [{"name": "a1", "drafter": "autoregressive", "baseline": True}, {"name": "a2", "drafter": "autoregressive"}]
    slow = ["--ms-per-token", "10", "--paced"]  # the timings are set afterwards (set_speeds)
    out = run(tmp_path, model_dir, port, aa, {"a1": slow, "a2": slow}, dict(SWEEP, output_lens=[48], waves=2))
    no_survivors()
    set_speeds(out, {"a1": 50.0, "a2": 50.0})
    cells = pd.read_csv(out / "cells.csv")
    a2 = cells[cells["variant"] == "a2"]
    assert len(a2) == 2 and (a2["interval_unit"] == "launch").all()
    assert ((a2["speedup_ci_low"] >= 1 / 1.05) & (a2["speedup_ci_high"] <= 1.05)).all()
    verdict = verdict_of(out)
    assert "| a2 | same | same |" in verdict  # the table: one word per concurrency
    assert "**a2**: no practical difference on code" in verdict
    assert "adopt **" not in verdict and "slower" not in verdict and "baseline wins" not in verdict


def test_a_drafter_one_and_a_half_times_as_fast_says_adopt(tmp_path, model_dir, port, no_survivors) -> None:
    variants = [{"name": "base", "drafter": "autoregressive", "baseline": True},
                {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}]
    # the same 10 ms target step, drafts accepted with p = 0.4 (a real acceptance, so no drafter-inactive
    # gate): about 1.54 tokens per step on 48-token outputs, so about 1.5x; the timings are set afterwards
    fast = ["--ms-per-token", "10", "--paced", "--accept-rate", "0.4"]
    out = run(tmp_path, model_dir, port, variants, {"base": ["--ms-per-token", "10", "--paced"], "ngram": fast},
              dict(SWEEP, output_lens=[48], waves=2))
    no_survivors()
    set_speeds(out, {"base": 30.0, "ngram": 30.0 / 1.5})  # per token: one 30 ms step per 1.5 tokens
    cells = pd.read_csv(out / "cells.csv")
    ng = cells[cells["variant"] == "ngram"]
    assert (ng["speedup"] > 1.35).all() and (ng["speedup_ci_low"] > 1.05).all()
    verdict = verdict_of(out)
    assert "| ngram | adopt | adopt |" in verdict
    assert "adopt **ngram** at every measured concurrency" in verdict

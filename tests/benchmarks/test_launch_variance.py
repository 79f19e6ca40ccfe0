"""benchmarks/launch_variance.py without an engine: the settings become variants of one ordinary run of the
config's baseline, and the CV it prints is the calibration's own estimate."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from benchmarks import launch_variance
from specbench.config import load_config
from specbench.runner import scheduler

DEMO = Path(__file__).resolve().parents[2] / "configs/demo-cpu.yaml"


def test_settings_are_the_baseline_with_their_environment(tmp_path: Path) -> None:
    settings = [launch_variance.parse_setting(s) for s in ("config", "both:VLLM_CPU_NUM_OF_RESERVED_CPU=0,X=1")]
    assert settings[1] == ("both", {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "X": "1"})
    cfg = launch_variance.variance_config(load_config(DEMO), settings, 3, "writing", 64, [8, 4], 2,
                                          tmp_path / "h")
    assert [(v.name, v.drafter, v.baseline) for v in cfg.variants] == [
        ("config", "autoregressive", True), ("both", "autoregressive", False)]
    assert cfg.variants[1].env == {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0", "X": "1"}
    s = cfg.sweep
    assert (s.launches, s.repeats, s.output_lens, s.concurrency, s.until) == (3, 2, [64], [4, 8], "fixed")
    assert [p.categories for p in s.prompts] == [["writing"]]
    assert cfg.verdict.history_dir == str(tmp_path / "h")  # never the machine's history
    # interleaved: every round launches each setting once, the order reversed every other round
    order = [u.variant for u in scheduler.launch_order([v.name for v in cfg.variants], 3)]
    assert order == ["config", "both", "both", "config", "config", "both"]
    with pytest.raises(SystemExit, match="'X' is not KEY=VALUE"):
        launch_variance.parse_setting("bad:X")


def test_the_cv_is_the_calibrations_estimate_with_a_chi_square_interval() -> None:
    cells = pd.DataFrame({"variant": ["a", "a", "b"], "valid": [True, True, True], "launches": [5, 5, 5],
                          "launch_cv": [0.03, 0.04, 0.10], "repeat_cv": [0.01, 0.01, 0.02], "repeats": [10, 10, 10],
                          "output_throughput_tok_s": [100.0, 120.0, 90.0]})
    lines = launch_variance.summary(cells, [], ["a", "b"])
    cv = 100 * math.sqrt((0.03**2 + 0.04**2) / 2)  # the root of the mean launch_cv^2 (variance_history.estimate)
    assert f"110.0 tok/s, between-launch CV {cv:.1f}%" in lines[0] and "(5 launches, 2 cells, 4 df)" in lines[0]
    low, high = launch_variance.cv_interval(0.01, 4)
    assert 0.05 < low < 0.1 < high < 0.3  # chi-square on 4 df: about [0.060, 0.287]
    assert "between-launch CV 10.0%" in lines[1]

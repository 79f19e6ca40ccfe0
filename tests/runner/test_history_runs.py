"""The variance history end to end on stand-ins: a calibration stores the launch and repeat components; a
run with one launch and one repeat per cell then gets speedup intervals from the pooled components, a
verdict that is not indicative only, and says which history and pooled df it used; a second calibration
adds its df. A cell-level known answer: more pooled df with the same variance narrow the interval."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from specbench.config import parse_config
from specbench.decide.decision import Components, Design, Estimate, component_interval
from specbench.runner import RunOptions, run_matrix
from specbench.shared.environment import hardware_fingerprint
from specbench.stores import calibration, variance_history
from tests.conftest import set_faults, set_launch_faults, standin_config

VARIANTS = [{"name": "base", "drafter": "autoregressive", "baseline": True},
            {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}]
SWEEP = {"concurrency": [1, 2], "output_lens": [24]}


def calibrate(tmp_path: Path, model_dir: Path, port: int, name: str) -> None:
    """What `specbench calibrate` does: the baseline alone, 3 launches, then record(). The config measures
    each cell once, as the CPU demo does: the calibration still takes 2 repeats per launch."""
    cfg = calibration.calibration_config(parse_config(standin_config(
        model_dir, port, variants=VARIANTS, sweep=dict(SWEEP, repeats=1))), 3)
    assert (cfg.sweep.launches, cfg.sweep.repeats) == (3, 2)
    # launch speeds set per launch (10, 10.5, 11 ms per token): a real, known launch effect
    set_launch_faults(model_dir.parent, "base", [["--ms-per-token", m, "--paced"] for m in ("10", "10.5", "11")])
    result = run_matrix(cfg, RunOptions(out=tmp_path / name, skip_preflight=True))
    assert set(result.status.values()) == {"done"}
    got = calibration.record(result.run_dir, cfg)
    assert got is not None and got[0].pooled and got[0].repeat_df > 0


def test_one_launch_one_repeat_gets_intervals_from_the_history(tmp_path, model_dir, port, no_survivors) -> None:
    calibrate(tmp_path, model_dir, port, "cal1")
    data = standin_config(model_dir, port, variants=VARIANTS, sweep=dict(SWEEP, launches=1, repeats=1))
    set_launch_faults(model_dir.parent, "base", [["--ms-per-token", "12", "--paced"]])
    set_faults(model_dir.parent, "ngram", ["--ms-per-token", "8", "--paced", "--accept-rate", "0.4"])
    out = tmp_path / "run1"
    assert set(run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True)).status.values()) == {"done"}
    no_survivors()
    cells = pd.read_csv(out / "cells.csv")
    ng = cells[cells["variant"] == "ngram"]
    assert (ng["repeats"] == 1).all() and (ng["interval_unit"] == "history").all()
    assert ng["speedup_ci_low"].notna().all() and (ng["speedup_ci_low"] < ng["speedup"]).all()
    used = json.loads((out / variance_history.FILE).read_text())
    assert used["df"] == 2 and used["entries"] == 1
    report = (out / "report.md").read_text()
    verdict = report.split("## Verdict")[1].split("<details>")[0]
    assert "indicative only" not in verdict
    assert "pooled df 2 over 1 entry" in verdict and "a cell measured once gets its interval" in verdict

    calibrate(tmp_path, model_dir, port, "cal2")  # a second calibration on the same fingerprint
    path = variance_history.store_path(hardware_fingerprint(), variance_history.history_dir())
    pooled = variance_history.pooled(variance_history.load_history(path))
    assert pooled is not None and pooled.df == 4 and pooled.entries == 2


def test_more_pooled_df_narrow_the_interval() -> None:
    """Same variances, df 2 (one calibration of 3 launches) vs df 4 (two): t_2 = 4.30 falls towards 2."""
    one = Design(1, 1)
    w = [math.log(component_interval(1.0, Components(Estimate(0.0025, df), Estimate(0.0004, 3 * df / 2)),
                                     one, one)[1]) for df in (2, 4, 40)]
    assert w[0] > w[1] > w[2]
    assert w[0] / w[1] > 1.3  # mostly t: 4.30 / 2.78 = 1.55 on the launch term

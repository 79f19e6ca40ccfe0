"""The compare gate's error rate and power by seeded simulation through the product's own functions
(benchmarks/compare_gate.py, fewer pairs), and, end to end through the CLI, two one-launch runs that differ
only by a launch effect: never exit 1 (before, any 5% drop of a one-launch cell exited 1)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.compare_gate import CVS, Design, markdown, simulate, summary
from specbench.cli import main
from specbench.config import parse_config
from specbench.runner import RunOptions, run_matrix
from tests.conftest import set_launch_faults, standin_config


def test_identical_runs_rarely_exit_1_and_a_real_regression_is_caught() -> None:
    """Issue 41 through the product's functions: identical runs exit 1 in at most 5% of pairs; a true 10%
    regression exits 1 in at least 80% with the launches plan recommends for the gate; a df-4 history no
    longer lets 1 x 3 runs exit 0 on a 10% regression (before: 87% of pairs at CV 2%), they exit 3."""
    res = simulate(pairs=40, seed=1, cvs=(0.02,), designs=(Design(1, 3), Design(1, 3, history_df=4)))
    assert res.worst <= 0.05  # before: 23% of pairs at CV 2% for 1 x 3
    assert res.planned[0.02] is not None and res.power_all[0.02] >= 0.8
    hist = res.regression[(Design(1, 3, history_df=4), 0.02)]
    assert hist[2] <= 0.05  # exit 0 in at most 5% of pairs: underpowered (exit 3), or caught (exit 1)
    assert res.null[(Design(res.planned[0.02], 3), 0.02)][2] >= 0.5  # at plan's design, A/A mostly says exit 0
    line = summary(res)
    assert line.startswith("compare gate: identical runs exit 1 in at most ") and "goal <= 5%" in line
    assert "| 1 x 3 |" in markdown(res) and len(CVS) == 3


VARIANTS = [{"name": "base", "drafter": "autoregressive", "baseline": True},
            {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}]


def _run(tmp_path: Path, model_dir: Path, port: int, name: str, ngram_ms: str) -> Path:
    """One launch x 3 repeats, paced stand-ins: the n-gram launch's speed set by `ngram_ms` per token."""
    data = standin_config(model_dir, port, variants=VARIANTS,
                          sweep={"concurrency": [1, 2], "output_lens": [16], "repeats": 3, "launches": 1})
    set_launch_faults(model_dir.parent, "base", [["--ms-per-token", "10", "--paced"]])
    set_launch_faults(model_dir.parent, "ngram", [["--ms-per-token", ngram_ms, "--paced"]])
    out = tmp_path / name
    assert set(run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True)).status.values()) == {"done"}
    return out


def test_one_launch_runs_that_differ_by_a_launch_effect_do_not_exit_1(tmp_path, model_dir, port, no_survivors,
                                                                       capsys) -> None:
    a = _run(tmp_path, model_dir, port, "a", "8")
    b = _run(tmp_path, model_dir, port, "b", "12")  # the same drafter, a launch a third slower (seen under load)
    no_survivors()
    assert json.loads((a / "run.json").read_text())["verdict"] == {"min_speedup": 1.05}  # the settings at the start
    capsys.readouterr()
    code = main(["compare", str(a), str(b)])
    out, err = capsys.readouterr()
    assert code == 3, out + err  # dropped, indicative only: not an established regression
    assert "0 regressed**" in out and "Dropped, indicative only" in out
    assert err.startswith("warning: ") and "indicative only" in err
    assert main(["history", str(a), str(b)]) == 3

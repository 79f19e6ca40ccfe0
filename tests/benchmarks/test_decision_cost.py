"""benchmarks/decision_cost.py and benchmarks/interval_coverage.py: their quick runs print their lines, and
what they simulate is specbench's own code (a change to the product changes their figures)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks import decision_cost, interval_coverage
from specbench.config import PromptSource, load_config
from specbench.decide import stats, stopping
from specbench.metrics import speedup
from specbench.pricing import planner
from specbench.report import decisions
from specbench.runner import scheduler
from specbench.stores import history_checks

LAST = (r"decision cost: \d+% of the best fixed design's GPU-hours, \d+% of points decided \(fixed: \d+%\), "
        r"worst boundary error \d+\.\d% \(misspecified history: \d+\.\d%\), coverage \d\.\d{3}")


def test_decision_cost_quick_prints_its_line(capsys) -> None:
    decision_cost.main(["--quick", "--matrices", "1", "--jobs", "1", "--seed", "3"])
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(LAST, out[-1]), out[-1]
    assert any(line.startswith("| matched |") for line in out)
    assert any(line.startswith("| history SD halved |") for line in out)


def test_decision_cost_calls_the_product() -> None:
    """The rule pieces are specbench's objects, not copies."""
    assert decision_cost.next_round is stopping.next_round
    assert decision_cost.always_valid is stopping.always_valid
    assert decision_cost.speedup_ci is speedup.speedup_ci
    assert decision_cost.point_outcomes is decisions.point_outcomes
    assert decision_cost.launch_order is scheduler.launch_order
    assert decision_cost.history_checks is history_checks


def _one_matrix(truth: str = "profile") -> decision_cost.Cell:
    mx = decision_cost.Matrix.of(load_config(decision_cost.CONFIG))
    opts = argparse.Namespace(matrices=1, history_entries=2, max_launches=6)
    return decision_cost.simulate(mx, decision_cost.CONDITIONS[0], truth, opts, seed=11)


def test_decision_cost_follows_the_products_sequential_rule(monkeypatch) -> None:
    """With the product's undecided_points saying nothing is left, the simulated run stops after its first
    2 launches: the benchmark's sequential arm is the product's rule."""
    assert _one_matrix().rounds[0] > decision_cost.SEQ_START
    monkeypatch.setattr(stopping, "undecided_points", lambda *a, **k: {})
    assert _one_matrix().rounds == [decision_cost.SEQ_START]


def test_decision_cost_reads_the_products_history_check(monkeypatch) -> None:
    """The simulated runs take their history through the product's history_checks.check_run, whose
    inconsistency test it calls: a refusal raised there reaches the benchmark. (Comparing outcome counts with
    and without the history was the check before; at exact small-df intervals a matrix's counts can be the
    same both ways, so the call itself is what is checked.)"""

    class Refused(Exception):
        pass

    def refuse(*a: object, **k: object) -> str:
        raise Refused

    monkeypatch.setattr(history_checks, "inconsistency", refuse)
    with pytest.raises(Refused):
        _one_matrix()


def test_interval_coverage_quick_prints_its_gated_rows(capsys) -> None:
    interval_coverage.main(["--quick", "--trials", "30"])
    out = capsys.readouterr().out
    for unit in ("`launch+history`", "`history`", "`repeat+calibration`", "(n = 2)"):
        assert unit in out
    # issue 41: the exact interval at each history df, and the launches measured (not configured)
    for design in ("history df 2 (1 calibration)", "history df 4", "history df 10", "history df 30",
                   "variant 1 of 2 launches x 3 repeats (its second failed)"):
        assert design in out, design
    assert re.search(r"\| 0\.\d{3} \(0\.\d{3}\) \| >= 0\.93 \| (pass|FAIL) \|", out)
    assert re.search(r"interval coverage: \d+ of \d+ gated rows pass", out.strip().splitlines()[-1])


def test_interval_coverage_rows_use_the_products_interval(monkeypatch) -> None:
    """The launch+history rows go through stats.pooled_ratio_ci (via speedup.speedup_ci): an interval that
    covers everything makes them cover every time."""
    row = next(r for r in interval_coverage.GATED if r.interval == "launch+history")
    calls = []

    def everything(*a: object, **k: object) -> stats.TInterval:
        calls.append(1)
        return stats.TInterval(1e-9, 1e9, 1.0)

    monkeypatch.setattr(stats, "pooled_ratio_ci", everything)
    rng = np.random.default_rng(0)
    lows = [row.trial(rng)[0].low for _ in range(5)]
    assert calls and lows.count(pytest.approx(1e-9)) == len(calls)  # (a history the checks refuse: Welch)


def test_a_window_is_priced_at_its_real_request_count(tmp_path: Path) -> None:
    """10 prompts of one category at C=1: a window sends the whole set (one pass, plan.windows.category_passes),
    so the benchmark and the plan price 10 requests a window, not waves x C = 1."""
    f = tmp_path / "ten.jsonl"
    f.write_text("".join(json.dumps({"category": "chat", "prompt": f"question {i}"}) + "\n" for i in range(10)))
    cfg = load_config(decision_cost.CONFIG)
    sweep = cfg.sweep.model_copy(update={"prompts": [PromptSource(set="file", path=str(f))], "concurrency": [1],
                                         "output_lens": [64], "input_lens": None, "temperatures": [0.0], "waves": 1})
    cfg = cfg.model_copy(update={"sweep": sweep})
    one = planner.point_seconds(cfg, None, 64, 1, 1)
    assert one is not None and one > 0
    mx = decision_cost.Matrix.of(cfg)
    assert len(mx.seconds) == 1 and list(mx.seconds.values())[0] == pytest.approx(10 * one)
    assert planner.make_plan(cfg, None).measuring_s == pytest.approx(10 * one)

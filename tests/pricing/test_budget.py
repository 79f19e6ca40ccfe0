"""`specbench plan CONFIG --budget H`: the design that decides the most claims within a budget."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specbench.cli import main
from specbench.config import load_config
from specbench.pricing.budget import BudgetPlan, plan_budget
from specbench.pricing.budget_write import design_config
from specbench.pricing.planner import category_prompts, make_plan
from specbench.stores.calibration import probe_config

K26 = Path(__file__).resolve().parents[2] / "configs" / "kimi-k2.6-tp8.yaml"


def _plan(budget: float, **kw: object) -> BudgetPlan:
    got = plan_budget(load_config(K26), None, budget, **kw)  # type: ignore[arg-type]
    assert isinstance(got, BudgetPlan)
    return got


def test_k26_within_48_gpu_hours_decides_every_claim() -> None:
    p = _plan(48)
    best = p.best
    assert best is not None and best.gpu_hours <= 48
    # the shipped config as it stands: 1 launch x 3 repeats, indicative only, 288.5 GPU-hours
    assert (make_plan(load_config(K26), None).total_s or 0) / 3600 * 8 > 250
    d = best.design
    assert d.launches == 1 and d.calibration >= 3 and d.subset is not None  # calibrated, slow levels subsetted
    assert best.decided == best.claims == 7  # eagle3 x 6 levels and ddtree at C=1
    assert list(d.output_lens) == [256, 1024, 2048] and list(d.concurrency) == [1, 2, 4, 8, 16, 32]
    for lv in best.levels:
        assert lv.subset == (lv.concurrency <= d.subset.up_to)
        assert 1.05 < lv.adopt_from < 1.29 and lv.slower_below < 1  # C=1's public 1.29x is adoptable
    assert p.next_hour is not None and p.next_hour.gpu_hours <= 49


def test_more_budget_never_decides_less_and_the_target_counts() -> None:
    small, big = _plan(40), _plan(80)
    assert small.best is not None and big.best is not None
    assert max(lv.adopt_from for lv in big.best.levels) <= max(lv.adopt_from for lv in small.best.levels)
    strict = _plan(48, target=1.1)
    assert strict.best is not None and strict.best.decided < strict.best.claims  # nothing adopts from 1.1x here


def test_may_drop_is_only_what_the_user_allows() -> None:
    kept = _plan(30)
    dropped = _plan(30, may_drop=["lengths"])
    assert dropped.best is not None
    if kept.best is not None:
        assert list(kept.best.design.output_lens) == [256, 1024, 2048]
    assert set(dropped.best.design.concurrency) == {1, 2, 4, 8, 16, 32}  # levels were not allowed
    assert isinstance(plan_budget(load_config(K26), None, 48, may_drop=["prompts"]), str)


def test_the_calibration_is_priced_as_calibrate_probe_runs_it_on_the_written_design() -> None:
    cfg, best = load_config(K26), _plan(48).best
    assert best is not None and best.design.calibration >= 3
    probe = probe_config(design_config(cfg, best), best.design.calibration)
    # one point: the baseline, the first category, the shortest length, the highest level (it sizes the batch)
    assert [v.name for v in probe.variants] == ["autoregressive"] and probe.sweep.concurrency == [32]
    assert probe.sweep.output_lens == [256] and probe.sweep.repeats == 2 and len(category_prompts(probe)) == 1
    assert math.isclose(best.calibration_s, make_plan(probe, None).total_s or 0, rel_tol=1e-9)
    assert best.calibration_s < best.design.calibration * 700  # 600-s startups and two windows of seconds


def test_cli_prints_levels_in_words_and_writes_a_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "k26-budget.yaml"
    assert main(["plan", str(K26), "--budget", "48", "--write", str(out)]) == 0
    text = capsys.readouterr().out
    assert "plan --budget 48 GPU-hours: kimi-k2.6-tp8:" in text
    assert "C=1 (on the subset): adopts a drafter from " in text and "calls it slower below" in text
    assert "the next GPU-hour (49 GPU-hours)" in text and "assumed, not measured" in text
    # one launch x 1 repeat: what its report will state as untested, said before the levels
    untested = ("  untested by this design, stated in its report as a condition of the error rate: the run's "
                "launches, the drafters' too, vary as the baseline's in the variance history (untested: one launch "
                "a variant, one window a cell)")
    assert untested in text and text.index(untested) < text.index("  in words, per level")
    written = load_config(out)
    best = _plan(48).best
    assert best is not None
    assert written.sweep.subset == best.design.subset and written.sweep.launches == 1
    assert f"  first:  specbench calibrate {out} --probe --launches {best.design.calibration}" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k26-budget.yaml"]  # the probe is OUT's own
    again = plan_budget(written, None, 48)  # the written design prices as the search priced it
    assert isinstance(again, BudgetPlan) and again.best is not None
    assert math.isclose(again.best.gpu_hours, best.gpu_hours, rel_tol=1e-9)


def test_a_design_with_launches_tests_what_one_launch_cannot() -> None:
    from dataclasses import replace

    from specbench.report.budget_text import untested_words

    best = _plan(48).best
    assert best is not None
    assert untested_words(replace(best.design, launches=2)) is None
    said = untested_words(replace(best.design, repeats=2))
    assert said is not None and "one launch a variant" in said and "one window a cell" not in said

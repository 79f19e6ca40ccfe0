"""`specbench plan`: works on every shipped config, agrees with docs/cluster.md on the K2.6 matrix, and
uses the hardware's pooled history before the config's stated estimates."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specbench.cli import main
from specbench.config import load_config
from specbench.decide.planner import make_plan, render
from specbench.decide.variance_history import Calibration, model_key

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))
K26 = next(p for p in CONFIGS if p.name == "kimi-k2.6-tp8.yaml")


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_plan_works_on_every_shipped_config(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"plan: {load_config(path).name}: ") and "total: " in out


def test_k26_plan_agrees_with_docs_cluster_md() -> None:
    p = make_plan(load_config(K26), None)
    assert p.points == 90  # 5 categories x 3 lengths x 6 levels
    # docs/cluster.md: measuring 124,740-128,700 s, one variant about 34.8-35.9 h, 104-108 h one after another
    assert p.measuring_s is not None and 124_740 <= 3 * p.measuring_s <= 128_700
    assert p.variant_s is not None and 34.8 <= p.variant_s / 3600 <= 35.9
    assert 104 <= 3 * p.variant_s / 3600 <= 108
    text = render(p)
    assert "35.50 h" in text and "indicative only" in text  # one launch and no history


def test_plan_prefers_the_history_and_prices_the_optimum() -> None:
    cfg = load_config(K26)
    hist = Calibration(rel_var=0.02 ** 2, df=8, launches=9, cells=90, hardware={}, engine="", model=model_key(cfg),
                       created="",
                       source_run="r", repeat_rel_var=0.01 ** 2, repeat_df=40, history="h.json", startup_s=700.0,
                       rates={"1": 25.0, "32": 25.0})
    p = make_plan(cfg, hist)
    assert p.startup.value == 700 and p.startup.source.startswith("measured")
    assert p.half_width is not None and not p.indicative  # one launch, but the history supplies the components
    assert p.optimal is not None and p.optimal.half_width <= math.log(1.05) / 2
    # a launch costs 700 s against ~42,000 s a repeat, repeats vary less: one repeat per launch is cheapest
    assert p.optimal.design.repeats == 1
    assert "cost-optimal to resolve min_speedup 1.05" in render(p)


def test_a_history_of_another_model_does_not_price_this_one() -> None:
    """The history is per hardware of the machine running `plan`: a CPU demo's calibration there must not
    price the K2.6 matrix (its startup and speeds are SmolLM2's); the config's estimates do."""
    cfg = load_config(K26)
    cpu = Calibration(rel_var=0.07 ** 2, df=2, launches=3, cells=12, hardware={}, engine="vllm 0.32.0",
                      model="demo:smollm2", created="", source_run="r", repeat_rel_var=0.06 ** 2, repeat_df=6,
                      history="h.json", startup_s=35.0, rates={"1": 57.0, "16": 25.0})
    p = make_plan(cfg, cpu)
    assert p.startup.source == "config estimates.startup_s" and p.startup.value != 35.0
    assert p.rate_source == "config estimates.per_request_tok_s"
    assert p.variant_s is not None and 34.8 <= p.variant_s / 3600 <= 35.9  # docs/cluster.md, as without a history
    assert p.components_source.startswith("config estimates.launch_cv")  # the config states its own


def test_plan_of_a_sequential_config(tmp_path: Path) -> None:
    path = tmp_path / "seq.yaml"
    path.write_text(f"include: {K26}\nsweep: {{launches: 2, repeats: 1, until: decided, max_launches: 8}}\n")
    text = render(make_plan(load_config(path), None))
    assert "sequential (until: decided): 2 launches of every variant first" in text
    assert "at most 8 launches" in text and "2.5% / 7 per side" in text


def test_plan_of_a_sequential_config_recommends_the_fixed_design(tmp_path: Path) -> None:
    """benchmarks/decision_cost.py: sequential measurement decides fewer points than the cost-optimal fixed
    design, so plan recommends the fixed one."""
    path = tmp_path / "seq.yaml"
    path.write_text(f"include: {K26}\nsweep: {{launches: 2, repeats: 1, until: decided, max_launches: 8}}\n"
                    "estimates: {launch_cv: 0.02, repeat_cv: 0.01}\n")
    p = make_plan(load_config(path), None)
    assert p.optimal is not None
    assert (f"recommended: this fixed design (sweep.launches: {p.optimal.design.launches}, repeats: "
            f"{p.optimal.design.repeats}, until: fixed) rather than until: decided") in render(p)


def test_plan_of_an_open_loop(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text(f"include: {CONFIGS[0].parent / 'demo-cpu-slo.yaml'}\n"
                    "estimates: {startup_s: 30, per_request_tok_s: 32}\n")
    p = make_plan(load_config(path), None)
    # 4 rates x 1 output length; each: (5 warmup + 40) requests / rate, plus one 64-token request to drain
    assert p.points == 4 and p.measuring_s == pytest.approx(sum(45 / r + 2 for r in (1, 2.5, 5, 8)))

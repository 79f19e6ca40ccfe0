"""`specbench plan`: works on every shipped config, agrees with docs/cluster.md on the K2.6 matrix, and
uses the hardware's pooled history before the config's stated estimates."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specbench.cli import main
from specbench.config import load_config
from specbench.pricing.planner import make_plan
from specbench.report.plan_text import render
from specbench.stores.variance_history import Calibration, model_key

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
K26 = next(p for p in CONFIGS if p.name == "kimi-k2.6-tp8.yaml")


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_plan_works_on_every_shipped_config(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"plan: {load_config(path).name}: ") and "total: " in out


def test_k26_plan_agrees_with_docs_cluster_md() -> None:
    p = make_plan(load_config(K26), None)
    assert p.points == 36  # 2 categories x 3 lengths x 6 levels
    # docs/cluster.md: measuring 51,456-53,090 s, one variant about 14.5-14.9 h, 43.6-44.7 h one after another
    assert p.measuring_s is not None and 51_456 <= 3 * p.measuring_s <= 53_090
    assert p.variant_s is not None and 14.5 <= p.variant_s / 3600 <= 14.9
    assert 43.5 <= 3 * p.variant_s / 3600 <= 44.7
    text = render(p)
    assert "14.53 h" in text and "indicative only" in text  # one launch and no history


def test_k26_plan_speaks_gpu_hours_and_speedups_in_words() -> None:
    """Issue 39 item 6: the batch-1 DDTree server is priced at C=1 only, node-hours come with GPU-hours
    (x 8 for --tp 8), and what a design can decide is said in speedups."""
    text = render(make_plan(load_config(K26), None))
    assert "  ddtree: 6.99 h (6 points: max_concurrency 1, the points above it are not measured)" in text
    assert "36.1 node-hours, 288.5 GPU-hours (8 GPUs a node: engine.gpus)" in text
    assert ("in words: with 2 launches x 3 repeats, nothing below 1.21x can be adopted (the interval's low end "
            "must clear min_speedup 1.05), and nothing above 0.87x can be called slower (sweep.launches: 2)") in text
    assert "282.4 node-hours, 2259.5 GPU-hours (8 GPUs a node: engine.gpus)" in text
    assert "in words: with 19 launches x 1 repeat, nothing below 1.08x can be adopted" in text


def test_decidable_matches_classify() -> None:
    """The two thresholds are where decision.classify's outcomes change for an interval estimate x exp(+-h)."""
    from specbench.decide.decision import Outcome, classify
    from specbench.pricing.planner import decidable

    h, m = 0.2208, 1.05
    adopt, slower = decidable(h, m)
    assert round(math.exp(h), 2) == 1.25 and round(adopt, 3) == round(1.05 * math.exp(h), 3)
    for est, want in ((adopt * 1.001, Outcome.ADOPT), (adopt * 0.999, Outcome.UNDECIDED),
                      (slower * 0.999, Outcome.SLOWER), (slower * 1.001, Outcome.UNDECIDED)):
        assert classify(est * math.exp(-h), est * math.exp(h), m) == want


def test_gpus_a_node(tmp_path: Path) -> None:
    """engine.gpus when stated, else TP x PP over engine.nodes; unknown for an external endpoint."""
    from specbench.config import parse_config
    from specbench.pricing.planner import gpus_per_node

    def cfg(engine: dict) -> object:
        return parse_config({"model": {"path": "/m"}, "engine": engine,
                             "variants": [{"name": "ar", "drafter": "autoregressive", "baseline": True}],
                             "sweep": {"output_lens": [16], "concurrency": [1]}})

    assert gpus_per_node(cfg({"kind": "vllm", "args": ["-tp", "4", "--pipeline-parallel-size=2"]})).value == 8
    assert gpus_per_node(cfg({"kind": "sglang", "args": ["--tp-size", "16"], "nodes": 2})).value == 8
    assert gpus_per_node(cfg({"kind": "sglang", "gpus": 8})).source == "engine.gpus"
    ext = gpus_per_node(cfg({"kind": "external", "url": "http://h:1"}))
    assert ext.value is None and "engine.gpus" in ext.source


def test_readme_example_plans_to_numbers(tmp_path: Path) -> None:
    """README's example config prices every line (issue 39: it said "unknown" everywhere)."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", readme, re.S)
    assert block is not None
    path = tmp_path / "example.yaml"
    path.write_text(block.group(1))
    text = render(make_plan(load_config(path), None))
    assert "unknown" not in text, text
    assert "GPU-hours (8 GPUs a node: --tp 8)" in text


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


def test_plan_prints_the_launches_that_power_the_compare_gate() -> None:
    """Issue 41: `specbench compare` says "no regression" only with 80% power against a 9.75% drop in every
    cell; plan prints the launches per variant that give it (change.gate_launches), or that none do."""
    from specbench.decide.change import detectable_drop, gate_launches, required_drop
    from specbench.decide.decision import Components, Design, Estimate, log_ratio_variance

    comps = Components(Estimate(0.02 ** 2, math.inf), Estimate(0.01 ** 2, math.inf))
    n = gate_launches(comps, 3, 0.05, 30)
    assert n is not None
    d = Design(n, 3)  # at the true se the gate is powered, with room for the estimate's spread (90% margin)
    se = math.sqrt(2 * log_ratio_variance(comps, d, d))
    assert detectable_drop(se, 4 * (n - 1), 0.05, 0.05 / 30) < required_drop(0.05)
    assert gate_launches(Components(Estimate(0.05 ** 2, math.inf), Estimate(0.01 ** 2, math.inf)), 3, 0.05, 30) is None
    cfg = load_config(K26)
    hist = Calibration(rel_var=0.02 ** 2, df=8, launches=9, cells=90, hardware={}, engine="", model=model_key(cfg),
                       created="", source_run="r", repeat_rel_var=0.01 ** 2, repeat_df=40, history="h.json",
                       startup_s=700.0, rates={"1": 25.0, "32": 25.0})
    p = make_plan(cfg, hist)
    cells = p.points * (len(p.variants) - 1)
    assert p.compare_launches == gate_launches(p.components, p.design.repeats, 0.05, cells)  # type: ignore[arg-type]
    assert f"compare gate (threshold 5%): {p.compare_launches} launches x" in render(p)
    assert f"80% power against a 9.75% drop in each of {cells} cells" in render(p)


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
    assert p.variant_s is not None and 14.5 <= p.variant_s / 3600 <= 14.9  # docs/cluster.md, as without a history
    assert p.components_source.startswith("config estimates.launch_cv")  # the config states its own


def test_plan_of_a_sequential_config(tmp_path: Path) -> None:
    path = tmp_path / "seq.yaml"
    path.write_text(f"include: {K26}\nsweep: {{launches: 2, repeats: 1, until: decided, max_launches: 8}}\n")
    text = render(make_plan(load_config(path), None))
    assert "sequential (until: decided): 2 launches of every variant first" in text
    assert "at most 8 launches" in text and "2.5% / 7 per side" in text


def test_plan_recommends_the_design_whose_error_rates_hold_under_a_misspecified_history(tmp_path: Path) -> None:
    """Issue 41: benchmarks/decision_cost.py finds the sequential rule's boundary errors at 1.3% with the
    history's SDs halved, the fixed design's at 10.9%: plan recommends until: decided, and says why."""
    path = tmp_path / "seq.yaml"
    path.write_text(f"include: {K26}\nsweep: {{launches: 2, repeats: 1, until: decided, max_launches: 8}}\n"
                    "estimates: {launch_cv: 0.02, repeat_cv: 0.01}\n")
    p = make_plan(load_config(path), None)
    assert p.optimal is not None
    text = render(p)
    assert "recommended: keep until: decided rather than a fixed design: its stated error rates hold" in text
    assert "recommended: this fixed design" not in text
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(f"include: {K26}\nestimates: {{launch_cv: 0.02, repeat_cv: 0.01}}\n")
    text = render(make_plan(load_config(fixed), None))
    assert ("recommended: until: decided (sweep.launches: 2, repeats: 1, max_launches: 10) rather than a fixed "
            "design: its stated error rates hold when the variance history is misspecified") in text
    assert len([ln for ln in text.splitlines() if "recommended:" in ln]) == 1


def test_plan_of_an_open_loop(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text(f"include: {CONFIGS[0].parent / 'demo-cpu-slo.yaml'}\n"
                    "estimates: {startup_s: 30, per_request_tok_s: 32}\n")
    p = make_plan(load_config(path), None)
    # 4 rates x 1 output length; each: (5 warmup + 40) requests / rate, plus one 64-token request to drain
    assert p.points == 4 and p.measuring_s == pytest.approx(sum(45 / r + 2 for r in (1, 2.5, 5, 8)))


def test_a_variant_on_two_nodes_costs_both() -> None:
    """Issue 51 item 8: TP16 over engine.nodes 2 holds 16 GPUs: twice the node- and GPU-hours of one node."""
    text = render(make_plan(load_config(K26.with_name("kimi-k2.6-tp16-2nodes.yaml")), None))
    assert ("43.59 h one after another on one set of 2 nodes; 14.53 h side by side (--scheduler slurm, 6 nodes); "
            "87.2 node-hours, 697.5 GPU-hours (16 GPUs: 8 a node x 2 nodes: engine.gpus)") in text

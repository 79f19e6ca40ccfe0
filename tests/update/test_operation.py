"""update.operation: one launch of the baseline and the head at RUN's highest level on RUN's prompts, and its
cost against the full matrix (RUN's design for the two)."""

from __future__ import annotations

from specbench.config import load_config
from specbench.update.operation import (
    acceptance_level,
    cost,
    derived_config,
    full_config,
    measured_share,
    rest_config,
)
from tests.fixtures_update import RUN, update_config


def test_the_derived_run_is_one_launch_at_the_highest_level_on_runs_prompts(tmp_path):
    cfg, run_cfg = load_config(update_config(tmp_path)), load_config(RUN / "config.yaml")
    d = derived_config(cfg, run_cfg, "eagle3")
    assert [v.name for v in d.variants] == ["autoregressive", "eagle3"]
    assert d.variant("eagle3").params["draft_model_path"].endswith("smollm2-eagle3-small")
    assert (d.sweep.concurrency, d.sweep.launches, d.sweep.repeats) == ([16], 1, 1)
    assert d.sweep.prompts == run_cfg.sweep.prompts and d.sweep.output_lens == run_cfg.sweep.output_lens
    assert acceptance_level(cfg.model_copy(update={"variants": [
        v if v.baseline else v.model_copy(update={"max_concurrency": 4}) for v in cfg.variants]}),
        "eagle3", run_cfg) == 4


def test_the_update_costs_a_fraction_of_the_full_matrix(tmp_path):
    cfg, run_cfg = load_config(update_config(tmp_path)), load_config(RUN / "config.yaml")
    full = full_config(cfg, run_cfg, "eagle3")
    assert (full.sweep.concurrency, full.sweep.launches) == ([1, 4, 16], 3)
    c = cost(derived_config(cfg, run_cfg, "eagle3"), full, None)
    assert (c.launches, c.full_launches) == (2, 6)
    # priced from the demo's estimates: 2 startups and one window at C=16 against 6 startups and every level
    assert c.share is not None and c.share < 0.20
    rest = cost(rest_config(cfg, run_cfg, "eagle3", [1]), full, None)
    assert rest.share is not None and c.share < rest.share < 1


def test_the_measured_share_is_the_wall_time_of_the_two_launches_over_runs():
    new = {"variants": {"autoregressive": {"wall_s": 60.0}, "eagle3": {"wall_s": 90.0}}}
    old = {"variants": {"autoregressive": {"wall_s": 500.0}, "eagle3": {"wall_s": 1000.0}}}
    assert measured_share(new, old, ("autoregressive", "eagle3"), ("autoregressive", "eagle3")) == 0.1
    assert measured_share({}, old, ("autoregressive", "eagle3"), ("autoregressive", "eagle3")) is None

"""update.match: the variant of RUN a new head replaces, or a one-line refusal."""

from __future__ import annotations

import pytest

from specbench.config import load_config
from specbench.shared.errors import UsageError
from specbench.update.match import match_variant
from tests.fixtures_update import RUN, update_config


def _run_cfg():
    return load_config(RUN / "config.yaml")


def test_a_new_head_of_the_same_configuration_replaces_the_variant_of_its_name(tmp_path):
    cfg = load_config(update_config(tmp_path, draft_model_path="/heads/new-eagle3"))
    # both heads of RUN share the configuration (steps 3); the one of the same name is taken
    assert match_variant(cfg, "eagle3", _run_cfg()) == "eagle3"


def test_another_drafter_configuration_is_refused_in_one_line(tmp_path):
    cfg = load_config(update_config(tmp_path, steps=5))
    with pytest.raises(UsageError) as err:
        match_variant(cfg, "eagle3", _run_cfg())
    assert "no variant of prediction-heads-cpu has eagle3's drafter configuration" in str(err.value)
    assert "\n" not in str(err.value)


def _with_weights(cfg, path):
    return cfg.model_copy(update={"variants": [v if v.baseline else v.model_copy(update={"params": {
        **v.params, "draft_model_path": path}}) for v in cfg.variants]})


def test_a_head_run_measured_already_is_not_an_update(tmp_path):
    run_cfg = _run_cfg()
    cfg = _with_weights(load_config(update_config(tmp_path)), run_cfg.variant("eagle3").params["draft_model_path"])
    # RUN's eagle3 has these very weights: the variant replaced is the other head of the configuration
    assert match_variant(cfg, "eagle3", run_cfg) == "eagle3_small"
    only = run_cfg.model_copy(update={"variants": [v for v in run_cfg.variants if v.name != "eagle3_small"]})
    with pytest.raises(UsageError, match="eagle3's head is the one eagle3 of prediction-heads-cpu measured"):
        match_variant(cfg, "eagle3", only)


def test_the_baseline_and_unknown_names_are_refused(tmp_path):
    cfg = load_config(update_config(tmp_path))
    with pytest.raises(UsageError, match="is CONFIG's baseline"):
        match_variant(cfg, "autoregressive", _run_cfg())
    with pytest.raises(UsageError, match="CONFIG has no variant 'nope'"):
        match_variant(cfg, "nope", _run_cfg())

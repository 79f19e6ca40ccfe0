"""`specbench calibrate CONFIG --probe`: the baseline alone at one point of the sweep (first category and output
length, largest concurrency, 2 repeats) over many launches, stored as a probe entry of the config's own setup,
with its check against the full sweep and what it buys a one-launch run printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specbench.cli import main
from specbench.config import parse_config
from specbench.server.launch import sweep_facts
from specbench.shared.errors import UsageError
from specbench.stores import calibration, variance_history
from tests.conftest import set_launch_faults, standin_config

VARIANTS = [{"name": "base", "drafter": "autoregressive", "baseline": True},
            {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}]


def test_the_probe_keeps_one_point_and_the_full_runs_launch(tmp_path: Path) -> None:
    cfg = parse_config(standin_config(
        tmp_path / "model", 8000, variants=VARIANTS,
        sweep={"prompts": [{"set": "seed", "per_category": 2}], "output_lens": [8, 16], "concurrency": [1, 4, 2],
               "temperatures": [0.0, 0.7], "repeats": 1}))
    probe = calibration.probe_config(cfg)
    s = probe.sweep
    assert [v.name for v in probe.variants] == ["base"] and probe.name.endswith("-calibration")
    assert (s.launches, s.repeats, s.concurrency, s.output_lens, s.temperatures) == (11, 2, [4], [8], [0.0])
    assert s.prompts[0].categories is not None and len(s.prompts[0].categories) == 1
    assert sweep_facts(probe) == sweep_facts(cfg)  # the engine is launched as the full run launches it
    assert calibration.probe_config(cfg, 4).sweep.launches == 4
    with pytest.raises(UsageError, match="at least 2"):
        calibration.probe_config(cfg, 1)


def test_calibrate_probe_stores_a_probe_entry_and_says_what_it_bought(tmp_path, model_dir, port, no_survivors,
                                                                        capsys, _own_variance_history) -> None:
    data = standin_config(model_dir, port, variants=VARIANTS, name="probed",
                          sweep={"concurrency": [1, 2], "output_lens": [8, 12], "repeats": 1})
    config = tmp_path / "probed.yaml"
    config.write_text(yaml.safe_dump(data))
    # launch speeds set per launch (10, 11, 12 ms per token): a real, known launch effect
    set_launch_faults(model_dir.parent, "base", [["--ms-per-token", m, "--paced"] for m in ("10", "11", "12")])
    assert main(["calibrate", str(config), "--probe", "--launches", "3", "--out", str(tmp_path / "probe")]) == 0
    no_survivors()
    out = capsys.readouterr().out
    cells = (tmp_path / "probe" / "cells.csv").read_text().splitlines()
    assert len(cells) == 2  # header and the one probed cell
    [entry] = json.loads(next(Path(_own_variance_history).glob("*.json")).read_text())["entries"]
    assert entry["kind"] == "probe" and entry["cells"] == 1 and entry["df"] == 2 and entry["pooled"]
    assert entry["rel_var"] > 0 and entry["repeat_df"] > 0 and list(entry["rates"]) == ["2"]
    assert "(3 launches at one point (probe), 1 cells, 2 df)" in out
    assert "not checked against a full sweep" in out
    assert "bought: a one-launch run of probed (1 repeat a cell) can now adopt from " in out
    assert "before this entry: decide nothing" in out
    pooled = variance_history.pooled(variance_history.load_history(next(Path(_own_variance_history).glob("*.json"))))
    assert pooled is not None and pooled.df == 2

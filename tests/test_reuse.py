"""--reuse: an unchanged variant's measurements are taken from the earlier run; a changed one is measured.

Runs the stand-in server (engine kind command) so it is fast and deterministic.
"""

from __future__ import annotations

import copy
import json

from conftest import standin_config
from specbench.cli import main
from specbench.config import parse_config
from specbench.rundir import load_run
from specbench.runner import RunOptions, run_matrix


def test_reuse_measures_only_the_changed_variant(tmp_path, model_dir, port, no_survivors):
    data = standin_config(model_dir, port)
    first = run_matrix(parse_config(data), RunOptions(out=tmp_path / "a", skip_preflight=True))
    assert first.status == {"base": "done", "ngram": "done"}

    changed = copy.deepcopy(data)
    changed["variants"][1]["params"]["num_tokens"] = 5  # the drafter "updated"
    second = run_matrix(parse_config(changed),
                        RunOptions(out=tmp_path / "b", reuse=tmp_path / "a", skip_preflight=True))
    assert second.status == {"base": "reused", "ngram": "done"}

    a, b = load_run(tmp_path / "a"), load_run(tmp_path / "b")
    assert b.meta["variants"]["base"]["reused_from"] == str(tmp_path / "a")
    # the baseline's records are the very same measurements, not new ones
    base_a = a.requests[(a.requests.variant == "base") & ~a.requests.warmup]
    base_b = b.requests[b.requests.variant == "base"]
    assert sorted(base_a.t_send) == sorted(base_b.t_send)
    assert (base_b.run_id == a.meta["run_id"]).all()
    # the new ngram was measured in run b, and the cells have the same shape as a complete run
    assert (b.requests[b.requests.variant == "ngram"].run_id == b.meta["run_id"]).all()
    assert b.cells.shape == a.cells.shape and b.cells["valid"].all()
    assert "reused" in (tmp_path / "b" / "report.md").read_text()
    no_survivors()


def test_nothing_reused_when_the_sweep_changes(tmp_path, model_dir, port, no_survivors):
    data = standin_config(model_dir, port)
    run_matrix(parse_config(data), RunOptions(out=tmp_path / "a", skip_preflight=True))
    changed = copy.deepcopy(data)
    changed["sweep"]["output_lens"] = [9]
    second = run_matrix(parse_config(changed),
                        RunOptions(out=tmp_path / "b", reuse=tmp_path / "a", skip_preflight=True))
    assert second.status == {"base": "done", "ngram": "done"}
    no_survivors()


def test_compare_cli_gates_on_regression(tmp_path, model_dir, port, capsys, no_survivors):
    slow = ["--ms-per-token", "10"]  # windows of a few ms vary by tens of percent: intervals too wide to gate on
    data = standin_config(model_dir, port, faults={"base": slow, "ngram": slow}, sweep={"repeats": 3})
    run_matrix(parse_config(data), RunOptions(out=tmp_path / "a", skip_preflight=True))
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "a")]) == 0
    assert "regressed" in capsys.readouterr().out.lower()
    # make the drafter clearly worse: rewrite its cells' speedup and re-render nothing else
    import pandas as pd

    b = tmp_path / "b"
    b.mkdir()
    for f in ("run.json", "config.yaml", "environment.json"):
        (b / f).write_text((tmp_path / "a" / f).read_text())
    cells = pd.read_csv(tmp_path / "a" / "cells.csv")
    worse = cells.variant == "ngram"
    for col in ("speedup", "speedup_ci_low", "speedup_ci_high"):
        cells.loc[worse, col] = cells.loc[worse, col] * 0.5
    cells.to_csv(b / "cells.csv", index=False)
    assert main(["compare", str(tmp_path / "a"), str(b)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error:") and "ngram" in err and json.dumps("x")
    no_survivors()


def test_a_draft_folder_updated_in_place_is_measured_again(tmp_path, model_dir, port, no_survivors):
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text('{"num_hidden_layers": 2}')
    (draft / "model.safetensors").write_bytes(b"v1")
    data = standin_config(model_dir, port, variants=[
        {"name": "base", "drafter": "autoregressive", "baseline": True},
        {"name": "draft", "drafter": "draft_model", "params": {"model": str(draft), "num_tokens": 2}}])
    run_matrix(parse_config(data), RunOptions(out=tmp_path / "a", skip_preflight=True))
    (draft / "model.safetensors").write_bytes(b"v2, retrained")  # same path, new weights
    second = run_matrix(parse_config(data), RunOptions(out=tmp_path / "b", reuse=tmp_path / "a",
                                                       skip_preflight=True))
    assert second.status == {"base": "reused", "draft": "done"}
    no_survivors()

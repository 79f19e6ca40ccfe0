"""--reuse: an unchanged variant's measurements are taken from the earlier run; a changed one is measured.

Runs the stand-in server (engine kind command) so it is fast and deterministic.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from specbench.cli import main
from specbench.config import parse_config
from specbench.records.loaded_run import load_run
from specbench.runner import RunOptions, run_matrix
from tests.conftest import make_model_dir, set_faults, standin_config


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


def test_a_reused_baseline_enters_the_variance_history_once(tmp_path, model_dir, port, no_survivors):
    """Run b reuses run a's baseline: its launches are run a's, so the history keeps one entry of them (it
    used to get a second, identical entry from run b, and pooled their df twice)."""
    from specbench.shared.environment import hardware_fingerprint
    from specbench.stores import variance_history

    data = standin_config(model_dir, port, sweep={"launches": 2, "repeats": 2, "concurrency": [1]})
    run_matrix(parse_config(data), RunOptions(out=tmp_path / "a", skip_preflight=True))
    path = variance_history.store_path(hardware_fingerprint(), variance_history.history_dir())
    first = variance_history.load_history(path)
    assert len(first) == 1

    changed = copy.deepcopy(data)
    changed["variants"][1]["params"]["num_tokens"] = 5
    second = run_matrix(parse_config(changed),
                        RunOptions(out=tmp_path / "b", reuse=tmp_path / "a", skip_preflight=True))
    assert second.status == {"base": "reused", "ngram": "done"}
    entries = variance_history.load_history(path)
    assert len(entries) == 1 and entries[0].source_run == str(tmp_path / "a")
    assert entries[0].df == first[0].df
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
    import pandas as pd

    data = standin_config(model_dir, port, sweep={"repeats": 3})
    run_matrix(parse_config(data), RunOptions(out=tmp_path / "a", skip_preflight=True))
    # The stand-in's ngram does not speculate, so its measured speedup is noise around 1.0: pin run A's
    # drafter cells to a known speedup and interval, as measured over 3 launches (launch variance in the
    # interval: a change can be established), and make run B's clearly worse (half of each).
    cells = pd.read_csv(tmp_path / "a" / "cells.csv")
    drafter = cells.variant == "ngram"
    cells.loc[drafter, ["speedup", "speedup_ci_low", "speedup_ci_high", "speedup_ci_df", "launches"]] = \
        [1.5, 1.47, 1.53, 4.0, 3]  # narrow enough for 80% power against a 9.75% drop (exit 0 needs it)
    cells.loc[drafter, "interval_unit"] = "launch"
    cells.to_csv(tmp_path / "a" / "cells.csv", index=False)
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "**0 regressed**, 0 dropped (indicative only), 0 improved" in out
    assert "No regression: no drop established beyond 5%, and every compared cell had 80% power" in out

    b = tmp_path / "b"
    b.mkdir()
    for f in ("run.json", "config.yaml", "environment.json"):
        (b / f).write_text((tmp_path / "a" / f).read_text())
    for col in ("speedup", "speedup_ci_low", "speedup_ci_high"):
        cells.loc[drafter, col] = cells.loc[drafter, col] * 0.5
    cells.to_csv(b / "cells.csv", index=False)
    assert main(["compare", str(tmp_path / "a"), str(b)]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("error:") and "ngram" in captured.err
    assert f"**{int(drafter.sum())} regressed**" in captured.out  # every halved cell, and no baseline cell
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


# -- what the fingerprint covers --------------------------------------------------------------------------
def fingerprints(data: dict[str, Any]) -> dict[str, str]:
    """The fingerprints the runner stores for each variant of this config (public building blocks only)."""
    from specbench.plan.prompts import load_prompts
    from specbench.plan.windows import build_sweep
    from specbench.runner.reuse import variant_fingerprints
    from specbench.server.launch import make_engine, plan_launches

    cfg = parse_config(data)
    engine = make_engine(cfg, cfg.model.path, cfg.model.served_name or cfg.model.path)
    launches = plan_launches(cfg, engine)
    sweep = build_sweep(cfg.sweep, load_prompts(cfg.sweep.prompts), None)
    return variant_fingerprints(cfg.sweep, engine, launches, sweep)


def _weights(model: Path) -> None:
    (model / "model.safetensors").write_bytes(b"v2: retrained, same size!")


@pytest.mark.parametrize("change, scope", [
    ("target weights", "all"), ("target config", "all"), ("engine version", "all"), ("engine args", "all"),
    ("engine env", "all"), ("variant env", "ngram"), ("drafter param", "ngram"), ("hardware", "all"),
])
def test_fingerprint_changes_with_what_determines_the_measurement(change, scope, tmp_path, monkeypatch):
    from specbench.shared import environment

    model = make_model_dir(tmp_path / "model")
    (model / "model.safetensors").write_bytes(b"v1: the original weights")
    data = standin_config(model, 18000, engine={"version": "1.0"})
    before = fingerprints(data)
    assert before == fingerprints(copy.deepcopy(data))  # deterministic: nothing changed, same fingerprint
    changed = copy.deepcopy(data)
    if change == "target weights":
        import os
        import time

        st = (model / "model.safetensors").stat()
        _weights(model)
        os.utime(model / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        time.sleep(0)  # mtime set explicitly: no dependence on the clock's resolution
    elif change == "target config":
        make_model_dir(model, context=4096)
    elif change == "engine version":
        changed["engine"]["version"] = "1.1"
    elif change == "engine args":
        changed["engine"]["args"] = ["--enforce-eager"]
    elif change == "engine env":
        changed["engine"]["env"]["OMP_NUM_THREADS"] = "2"
    elif change == "variant env":
        changed["variants"][1]["env"] = {"OMP_NUM_THREADS": "2"}
    elif change == "drafter param":
        changed["variants"][1]["params"]["num_tokens"] = 5
    elif change == "hardware":
        real = environment.hardware_fingerprint()
        monkeypatch.setattr(environment, "hardware_fingerprint", lambda: {**real, "gpus": ["NVIDIA H200"]})
    after = fingerprints(changed)
    differ = {v for v in before if before[v] != after[v]}
    assert differ == ({"base", "ngram"} if scope == "all" else {scope}), change


def test_a_variant_that_failed_in_the_source_run_is_measured_not_reused(tmp_path, model_dir, port, no_survivors):
    data = standin_config(model_dir, port, faults={"ngram": ["--exit-during-startup", "1"]})
    first = run_matrix(parse_config(data), RunOptions(out=tmp_path / "a", skip_preflight=True))
    assert first.status == {"base": "done", "ngram": "failed"}
    set_faults(model_dir.parent, "ngram", None)  # healed; its fingerprint is unchanged (same config)
    second = run_matrix(parse_config(data), RunOptions(out=tmp_path / "b", reuse=tmp_path / "a",
                                                       skip_preflight=True))
    assert second.status == {"base": "reused", "ngram": "done"}
    b = load_run(tmp_path / "b")
    ngram = b.requests[b.requests.variant == "ngram"]
    assert len(ngram) > 0 and (ngram.run_id == b.meta["run_id"]).all()  # measured in run b
    no_survivors()


def test_resume_with_a_changed_config_is_refused(tmp_path, model_dir, port, capsys, no_survivors):
    from tests.conftest import write_config

    data = standin_config(model_dir, port, sweep={"concurrency": [1]})
    run_matrix(parse_config(data), RunOptions(out=tmp_path / "a", skip_preflight=True))
    before = (tmp_path / "a" / "requests.jsonl").read_text()
    changed = copy.deepcopy(data)
    changed["sweep"]["output_lens"] = [9]
    cfg = write_config(tmp_path / "changed.yaml", changed)
    code = main(["run", str(cfg), "--resume", str(tmp_path / "a"), "--skip-preflight"])
    err = capsys.readouterr().err
    assert code == 2 and "--resume" in err and "config differs" in err
    assert (tmp_path / "a" / "requests.jsonl").read_text() == before  # nothing measured, nothing rewritten
    no_survivors()

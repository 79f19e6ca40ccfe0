"""update.baseline: the update's run takes RUN's baseline windows when RUN launched the same baseline here, so
the update launches the new head alone; otherwise it says why and launches the baseline too. On the stand-in
(engine kind command), fast and deterministic."""

from __future__ import annotations

import copy

import pandas as pd

from specbench.config import parse_config
from specbench.records.loaded_run import load_run
from specbench.runner import RunOptions, run_matrix
from specbench.runner.reuse import Borrow
from specbench.update.baseline import borrowed_baseline
from specbench.update.operation import cost, derived_config, full_config
from tests.conftest import standin_config


def test_the_update_launches_the_head_alone_on_runs_baseline_windows(tmp_path, model_dir, port, no_survivors):
    data = standin_config(model_dir, port, sweep={"concurrency": [1, 2], "launches": 2})
    run_cfg = parse_config(data)
    run_matrix(run_cfg, RunOptions(out=tmp_path / "run", skip_preflight=True))
    new = copy.deepcopy(data)
    new["variants"][1]["params"]["num_tokens"] = 5  # the new head (same configuration but for it)
    derived = derived_config(parse_config(new), run_cfg, "ngram")
    borrow = borrowed_baseline(tmp_path / "run", run_cfg, derived)
    assert borrow == Borrow(tmp_path / "run", "base")

    result = run_matrix(derived, RunOptions(out=tmp_path / "update", borrow=borrow, skip_preflight=True))
    no_survivors()
    assert result.status == {"base": "reused", "ngram": "done"}
    run, upd = load_run(tmp_path / "run"), load_run(tmp_path / "update")
    assert upd.meta["variants"]["base"]["reused_from"] == str(tmp_path / "run")
    # the baseline's records are RUN's own at the update's level, launch 1, repeat 1: nothing else, nothing new
    base = upd.requests[upd.requests.variant == "base"]
    assert set(base.window_id) == {w for w in run.requests.window_id if w.startswith("base|") and "|c2|" in w
                                   and w.endswith("|r1")}
    assert (base.run_id == run.meta["run_id"]).all()
    assert (upd.requests[upd.requests.variant == "ngram"].run_id == upd.meta["run_id"]).all()
    cells = pd.read_csv(tmp_path / "update" / "cells.csv")
    head = cells[cells["variant"] == "ngram"]
    assert list(head["concurrency"]) == [2] and head["speedup"].notna().all()
    # priced as one launch: the head's
    c = cost(derived, full_config(parse_config(new), run_cfg, "ngram"), None, borrowed=True)
    assert c.launches == 1 and c.full_launches == 4


def test_a_baseline_launched_otherwise_is_launched_again_and_says_why(tmp_path, model_dir, port, no_survivors):
    data = standin_config(model_dir, port, sweep={"concurrency": [1, 2]})
    run_cfg = parse_config(data)
    run_matrix(run_cfg, RunOptions(out=tmp_path / "run", skip_preflight=True))
    no_survivors()
    new = copy.deepcopy(data)
    new["engine"]["env"]["STANDIN_NOTE"] = "another environment"
    why = borrowed_baseline(tmp_path / "run", run_cfg, derived_config(parse_config(new), run_cfg, "ngram"))
    assert isinstance(why, str) and "launched its baseline base otherwise" in why
    renamed = copy.deepcopy(data)
    renamed["variants"][0]["name"] = "plain"
    why = borrowed_baseline(tmp_path / "run", run_cfg, derived_config(parse_config(renamed), run_cfg, "ngram"))
    assert why == "RUN's baseline is 'base', the update's 'plain'"


def test_a_run_on_other_hardware_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """RUN's step cost holds on RUN's hardware: a RUN whose baseline node differs from this machine (here its
    CPU extensions, and the dtype `--dtype auto-cpu` chose there) is refused before anything is launched."""
    import json
    import shutil

    from specbench.cli import main
    from specbench.shared import cpu_dtype, environment
    from tests.fixtures_update import RUN, update_config

    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    here = environment.node_fingerprint("0.32.0")
    other = {**here, "cpu_isa": ["avx2", "avx512_bf16", "avx512f"] if here["cpu_isa"] == ["avx2"] else ["avx2"]}
    env = {"nodes": {"n1": other}, "variant_nodes": {"autoregressive": ["n1"], "eagle3": ["n1"]},
           "cpu_dtype": {"dtype": "bfloat16", "reason": "native BF16"}}
    (run / "environment.json").write_text(json.dumps(env))
    from specbench.update.baseline import other_hardware
    from specbench.update.words import read_config

    monkeypatch.setattr(cpu_dtype, "cpu_dtype", lambda flags=None: cpu_dtype.CpuDtype("float32", "no BF16"))
    got = other_hardware(run, read_config(run))
    assert got is not None and got.startswith("cpu_isa: ") and got.endswith("cpu dtype: float32 vs bfloat16")
    env["nodes"]["n1"] = here
    env["cpu_dtype"]["dtype"] = "float32"
    (run / "environment.json").write_text(json.dumps(env))
    assert other_hardware(run, read_config(run)) is None
    env["nodes"]["n1"] = other
    (run / "environment.json").write_text(json.dumps(env))
    code = main(["update", str(update_config(tmp_path)), "--from", str(run), "--variant", "eagle3", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: update: {run} was measured on other hardware than this machine (cpu_isa: ")

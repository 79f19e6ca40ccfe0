"""Tokens past EOS (issue 41, item 4): the model folder's EOS ids, the share of a cell's output tokens after
the first EOS (`past_eos_share`, empty when unknown, never 0), its warning above 10%, and
`sweep.stop_at_eos` (no ignore_eos sent, requests end where the model ends, losslessness on the shorter
output of a pair). End to end through the stand-in in vLLM's format, which puts an EOS id at its own stop
position and generates past it when ignore_eos is sent."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.metrics.eos import past_eos_share, request_past_eos
from specbench.metrics.lossless import compare_outputs
from specbench.metrics.requests import MeasuredRequest
from specbench.metrics.warnings import CellSummary, WarningCode, cell_warnings
from specbench.plan.eos_ids import eos_token_ids
from specbench.plan.specs import RequestSpec
from specbench.records.rundir import RunDir
from specbench.runner import RunOptions, finalize, run_matrix
from specbench.server.engines.base import Engine
from tests.conftest import make_model_dir
from tests.runner.test_known_answers import FAKE_VLLM, engine_env

EOS = 7


def _write(folder: Path, name: str, obj: Any) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(obj))


def test_eos_ids_are_the_union_of_the_model_folder_files(tmp_path: Path) -> None:
    m = tmp_path / "m"
    _write(m, "config.json", {"eos_token_id": 2})
    _write(m, "generation_config.json", {"eos_token_id": [2, 128009]})
    _write(m, "tokenizer_config.json", {"eos_token": {"content": "<|im_end|>"},
                                        "added_tokens_decoder": {"5": {"content": "<|im_end|>"},
                                                                 "6": {"content": "<x>"}}})
    assert eos_token_ids(m) == [2, 5, 128009]
    n = tmp_path / "n"
    _write(n, "config.json", {"max_position_embeddings": 2048})
    assert eos_token_ids(n) is None  # names none: unknown, not "no EOS"
    assert eos_token_ids(tmp_path / "absent") is None
    assert eos_token_ids("served-model-name") is None  # an external endpoint's name


def test_tokens_after_the_first_eos_per_request() -> None:
    assert request_past_eos([1, 2, EOS, 3, EOS, 4], [EOS]) == (3.0, 6.0)  # the first EOS counts, not itself
    assert request_past_eos([1, 2, 3], [EOS]) == (0.0, 3.0)
    assert request_past_eos([1, 2, 3, EOS], [9, EOS]) == (0.0, 4.0)
    assert all(math.isnan(x) for x in request_past_eos(None, [EOS]))  # no ids recorded
    assert all(math.isnan(x) for x in request_past_eos([1, EOS, 2], []))  # no EOS id known


def _req(ids: list[int] | None, ok: bool = True) -> MeasuredRequest:
    return MeasuredRequest(window_id="w", launch=1, repeat=1, index=0, prompt_id="p", ok=ok, n_out=4.0,
                           e2e=1.0, ttft=0.1, t_send=0.0, chunk_offsets=(), chunk_tokens=(),
                           token_ids=None if ids is None else np.asarray(ids), text=None, spec=None)


def test_the_cell_share_is_pooled_over_tokens_and_empty_when_unknown() -> None:
    reqs = [_req([EOS, 1, 1, 1]), _req([1, 1, 1, 1, 1, 1]), _req(None)]
    assert past_eos_share(reqs, [EOS]) == pytest.approx(3 / 10)  # pooled: (3 + 0) / (4 + 6)
    assert math.isnan(past_eos_share(reqs, []))
    assert math.isnan(past_eos_share([_req(None)], [EOS]))
    assert past_eos_share([_req([1, 2])], [EOS]) == 0.0  # known and none: a real 0


CALM: dict[str, Any] = dict(
    is_baseline=False, valid=True, repeats=3, window_throughputs=[100.0, 100.0, 100.0], n_requests=30,
    n_errors=0, outlier_count=0, throughput_cv=0.03, acceptance_length=2.0, acceptance_source="counters",
    lossless_match_rate=1.0, concurrency=1, has_baseline=True,
)


@pytest.mark.parametrize("share, fires", [(0.10, False), (0.1001, True), (math.nan, False), (0.53, True)])
def test_the_past_eos_warning_fires_above_ten_percent(share: float, fires: bool) -> None:
    ws = cell_warnings(CellSummary(**CALM, past_eos_share=share))
    assert [w.code for w in ws] == ([WarningCode.PAST_EOS] if fires else [])
    if fires:
        assert "stop_at_eos" in ws[0].message and f"{100 * share:.0f}%" in ws[0].detail


def test_losslessness_on_the_shorter_output() -> None:
    assert compare_outputs([1, 2, 3], None, [1, 2, 3, 4, 5], None) == (False, 3 / 5)
    assert compare_outputs([1, 2, 3], None, [1, 2, 3, 4, 5], None, shorter=True) == (True, 1.0)
    assert compare_outputs([1, 9, 3], None, [1, 2, 3, 4], None, shorter=True) == (False, 1 / 3)
    assert compare_outputs(None, "abc", None, "abcdef", shorter=True) == (True, 1.0)
    assert compare_outputs(None, "abx", None, "abcdef", shorter=True) == (False, 2 / 3)


def _body(ignore_eos: bool) -> dict[str, Any]:
    spec = RequestSpec(messages=[{"role": "user", "content": "x"}], prompt_text="x", max_tokens=8,
                       temperature=0.0, seed=0, ignore_eos=ignore_eos)
    return Engine.request_body(SimpleNamespace(served_name="m"), spec)  # type: ignore[arg-type]


def test_stop_at_eos_sends_no_ignore_eos() -> None:
    assert _body(True)["ignore_eos"] is True
    assert "ignore_eos" not in _body(False)
    cfg = parse_config({"model": {"path": "/m"},
                        "variants": [{"name": "b", "drafter": "autoregressive", "baseline": True}],
                        "sweep": {"output_lens": [8], "concurrency": [1], "stop_at_eos": True}})
    from specbench.plan.prompts import Prompt
    from specbench.plan.windows import build_sweep, window_requests
    sweep = build_sweep(cfg.sweep, [Prompt(id="a", category="c", text="t")])
    assert all(not p.spec.ignore_eos for p in window_requests(cfg.sweep, sweep, sweep.points[0], "b", 1))


def _config(tmp_path: Path, port: int, name: str, **sweep: Any) -> dict[str, Any]:
    model = make_model_dir(tmp_path / "model")
    _write(model, "generation_config.json", {"eos_token_id": [EOS]})
    env = {**engine_env(tmp_path, FAKE_VLLM), "STANDIN_MS_PER_TOKEN": "0.2", "STANDIN_ARGS": f"--eos-id {EOS}"}
    return {"name": name, "model": {"path": str(model), "served_name": "standin"},
            "engine": {"kind": "vllm", "python": sys.executable, "version": "0.32.0", "port": port,
                       "startup_timeout_s": 30, "stop_timeout_s": 3, "env": env},
            "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                         {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}],
            "sweep": {"prompts": [{"set": "seed", "categories": ["code"], "per_category": 2}],
                      "output_lens": [240], "concurrency": [1, 2], "repeats": 1, "warmup_requests": 0,
                      "request_timeout_s": 20, **sweep},
            "output_dir": str(tmp_path / "runs")}


def _run(tmp_path: Path, data: dict[str, Any], out: str) -> Path:
    run = tmp_path / out
    result = run_matrix(parse_config(data), RunOptions(out=run, skip_preflight=True))
    assert set(result.status.values()) == {"done"}, result.status
    return run


def _records(run: Path) -> pd.DataFrame:
    return pd.DataFrame([json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()])


def test_a_run_measures_the_share_past_eos_and_stop_at_eos_ends_there(tmp_path: Path, port: int,
                                                                       no_survivors) -> None:
    """The stand-in stops at 32-231 tokens: with ignore_eos (240 tokens a request) every request goes on
    past its EOS; cells.csv's share is the records' own, pooled, and warned about. With stop_at_eos every
    output ends at its EOS: share 0, no warning, throughput from the tokens generated, lossless."""
    run = _run(tmp_path, _config(tmp_path, port, "eos"), "run")
    assert json.loads((run / "model.json").read_text()) == {"eos_token_ids": [EOS]}
    recs = _records(run)
    assert (recs["output_tokens"] == 240).all()
    cells = pd.read_csv(run / "cells.csv")
    for _, cell in cells.iterrows():  # ground truth from the token ids the stand-in streamed
        mine = recs[recs["cell_id"] == f"{cell.variant}|{cell.point_id}"]
        past = [len(ids) - ids.index(EOS) - 1 for ids in mine["token_ids"]]
        assert cell.past_eos_share == pytest.approx(sum(past) / (240 * len(mine)))
        assert cell.past_eos_share > 0.10 and "past_eos" in cell.warnings
    # a run whose EOS ids are unknown (an older run: no model.json): the column is empty, never 0
    (run / "model.json").unlink()
    finalize(RunDir(run))
    again = pd.read_csv(run / "cells.csv")
    assert again["past_eos_share"].isna().all() and not again["warnings"].fillna("").str.contains("past_eos").any()

    stop = _run(tmp_path, _config(tmp_path, port, "eos-stop", stop_at_eos=True), "stop")
    recs = _records(stop)
    assert recs["error"].isna().all()
    assert (recs["output_tokens"] < 240).all()  # ended where the model ended
    assert all(ids[-1] == EOS and ids.count(EOS) == 1 for ids in recs["token_ids"])
    cells = pd.read_csv(stop / "cells.csv")
    assert (cells["past_eos_share"] == 0.0).all()
    assert not cells["warnings"].fillna("").str.contains("past_eos").any()
    assert (cells.loc[cells.variant == "ngram", "lossless_match_rate"] == 1.0).all()
    tokens = recs.groupby("cell_id")["output_tokens"].sum()
    assert tokens.min() < 240 * 2  # throughput counts what was generated (checked against the span below)
    for _, cell in cells.iterrows():
        mine = recs[recs["cell_id"] == f"{cell.variant}|{cell.point_id}"]
        finish = mine["t_send"] + mine["e2e_s"]
        start, end = finish.min(), mine["t_send"].max()
        if cell.concurrency == 1 or not end > start:  # measured whole: first send to last finish
            expected = mine["output_tokens"].sum() / (finish.max() - mine["t_send"].min())
        else:  # over the measured interval [first completion, last send]: the tokens that arrived inside it
            arrived = sum(k for t0, offs, ks in zip(mine["t_send"], mine["chunk_offsets_s"], mine["chunk_tokens"])
                          for o, k in zip(offs, ks) if start < t0 + o <= end)
            expected = arrived / (end - start)
        assert cell.output_throughput_tok_s == pytest.approx(expected)
    no_survivors()

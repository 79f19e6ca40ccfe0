"""Figures the server claims are checked, and its bytes are data (issue 23, items 5 and 6).

Each fault is injected into the drafter variant's stand-in only: its requests must be errors with their
reason, its cells invalid (no throughput, no speedup), and the verdict must not speak from them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.records.rundir import RunDir
from specbench.report.derived import load_report_data
from specbench.report.verdict import drafter_verdict
from specbench.runner import RunOptions, run_matrix
from tests.conftest import make_model_dir, needs_standin, standin_config

pytestmark = needs_standin

TRUST_FAULTS = [
    ("usage-twice", ["--usage-factor", "2"],
     "token count mismatch: the final usage claims 16 completion tokens, 8 were streamed"),
    ("empty", ["--empty"], "empty completion (0 tokens)"),
    ("overlong", ["--overlong", "3"], "output length 24 tokens, 8 requested (ignore_eos is sent)"),
]


def _run(tmp_path: Path, port: int, flags: list[str]) -> Path:
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port, faults={"ngram": flags}, sweep={"concurrency": [1]})
    out = tmp_path / "run"
    res = run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True))
    assert res.status == {"base": "done", "ngram": "done"}
    return out


@pytest.mark.parametrize("fault,flags,expected", TRUST_FAULTS, ids=[f[0] for f in TRUST_FAULTS])
def test_claims_the_stream_does_not_back_are_request_errors(fault, flags, expected, tmp_path, port, no_survivors):
    out = _run(tmp_path, port, flags)
    recs = RunDir(out).request_records()
    base = [r for r in recs if r.variant == "base"]
    bad = [r for r in recs if r.variant == "ngram"]
    assert base and all(r.ok for r in base)
    assert bad and all(r.error == expected for r in bad), {r.error for r in bad}
    cells = pd.read_csv(out / "cells.csv")
    ng = cells[cells["variant"] == "ngram"]
    assert not ng["valid"].any() and ng["speedup"].isna().all() and ng["output_throughput_tok_s"].isna().all()
    text = "".join(str(x) for x in drafter_verdict(load_report_data(out), "ngram")[0])
    assert "no valid measurements" in text and "faster" not in text, text
    no_survivors()


def test_lone_surrogate_in_a_chunk_keeps_every_record(tmp_path, port, no_survivors):
    """A chunk whose text decodes to a lone UTF-16 surrogate: the run completes, every record is written
    and read back, the surrogate stored as the escape text `\\ud83d`."""
    out = _run(tmp_path, port, ["--lone-surrogate"])
    lines = (out / "requests.jsonl").read_text(encoding="utf-8").splitlines()
    recs = RunDir(out).request_records()
    assert len(lines) == len(recs) == 4 and {r.variant for r in recs} == {"base", "ngram"}  # 2 prompts each
    bad = [r for r in recs if r.variant == "ngram"]
    assert all(r.ok and r.text is not None and "\\ud83d" in r.text for r in bad)
    base = {r.index: r.text for r in recs if r.variant == "base"}
    assert all(r.text.replace("\\ud83d", "") == base[r.index] for r in bad)  # nothing else changed
    assert json.loads((out / "run.json").read_text())["variants"]["ngram"]["status"] == "done"
    no_survivors()

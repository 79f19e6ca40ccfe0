"""Why requests failed, said where the user looks (issue 30 item 12): before, the console and the report
said only "invalid_cell in 2 cell(s) ... (4 of 4 requests failed)"; the reason was in requests.jsonl alone."""

from __future__ import annotations

import io

import pandas as pd
from rich.console import Console

from specbench.config import parse_config
from specbench.report.audits import failure_lines
from specbench.report.terminal import print_summary
from specbench.runner import RunOptions, run_matrix
from tests.conftest import standin_config


def test_the_most_frequent_reasons_per_variant_with_counts() -> None:
    errors = pd.DataFrame([{"variant": "ngram", "reason": "a", "requests": 1},
                           {"variant": "ngram", "reason": "b", "requests": 5},
                           {"variant": "ngram", "reason": "c", "requests": 2},
                           {"variant": "ngram", "reason": "d", "requests": 1},
                           {"variant": "eagle", "reason": "e", "requests": 3}])
    assert failure_lines(errors) == ["eagle: 3 request(s) failed: 3 x e",
                                     "ngram: 9 request(s) failed: 5 x b; 2 x c; 1 x a; 1 other reason(s) (errors.csv)"]
    assert failure_lines(pd.DataFrame()) == []


def test_a_run_whose_drafter_overruns_says_why_in_the_console_and_the_report(tmp_path, model_dir, port,
                                                                            no_survivors) -> None:
    data = standin_config(model_dir, port, faults={"ngram": ["--overlong", "3"]},
                          sweep={"concurrency": [1], "output_lens": [8]})
    out = tmp_path / "r"
    run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True))
    no_survivors()
    errors = pd.read_csv(out / "errors.csv")
    assert list(errors["variant"]) == ["ngram"] and "8 requested" in errors["reason"][0]
    buf = io.StringIO()
    print_summary(out, Console(file=buf, width=200))
    console = buf.getvalue()
    assert "failed requests: ngram:" in console and "8 requested" in console
    report = (out / "report.md").read_text()
    assert "Why requests failed" in report and "8 requested" in report.split("## Warnings")[1]

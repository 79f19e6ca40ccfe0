"""One geometric-mean speedup (metrics.common.geometric_mean), used by the end-of-run table and by tune's
scores: the finite positive speedups averaged on the log scale, the rest left out and counted."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest
from rich.console import Console

from specbench.metrics.common import geometric_mean
from specbench.records.rundir import RunDir
from specbench.report.terminal import headline, print_summary
from specbench.tune.result import score


def test_the_rule() -> None:
    assert geometric_mean([1.0, 4.0]) == (pytest.approx(2.0), 2, 0)
    got = geometric_mean([2.0, 0.0, -1.0, math.nan, None, math.inf, "x"])
    assert (got.value, got.used, got.left_out) == (pytest.approx(2.0), 1, 6)
    assert math.isnan(geometric_mean([]).value) and math.isnan(geometric_mean([0.0, -2.0]).value)


def _cells() -> pd.DataFrame:
    # one variant at C=4: two speedups, a cell whose variant produced nothing (speedup 0), an invalid cell
    return pd.DataFrame({"variant": ["d"] * 4, "concurrency": [4] * 4, "speedup": [1.0, 4.0, 0.0, math.nan],
                         "valid": [True, True, True, False], "acceptance_length": [2.0] * 4,
                         "output_throughput_tok_s": [10.0] * 4})


def test_the_end_of_run_table_and_tune_agree() -> None:
    """They disagreed: the table gave NaN for a group with a non-positive speedup, tune dropped it."""
    row = headline(_cells()).iloc[0]
    assert row.speedup_gmean == pytest.approx(2.0) == score(_cells(), "d", 4)
    assert row.speedup_left_out == 1  # the zero; the invalid cell's empty speedup is no value at all


def test_the_table_says_how_many_were_left_out(tmp_path) -> None:
    rd = RunDir(tmp_path)
    rd.save_meta({"variants": {"d": {"status": "done"}}})
    rd.cells.write_text(_cells().to_csv(index=False))
    out = io.StringIO()
    print_summary(tmp_path, Console(file=out, width=200))
    assert "2.00 (1 left out)" in out.getvalue()

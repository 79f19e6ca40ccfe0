"""Cell warnings are carried whole ({code, detail}) from cells.csv to the terminal and the report, and both
print the remedy; cells.csv files of older runs (codes joined by ';') still read."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from specbench.metrics.warnings import REMEDY, CellWarning, WarningCode, decode_warnings, encode_warnings, warning_rows
from specbench.report import Document
from specbench.report.audits import warnings_section
from specbench.report.markdown import render
from specbench.report.terminal import warning_lines

WS = [CellWarning(WarningCode.FEW_REPEATS, "2 repeats"), CellWarning(WarningCode.HIGH_VARIANCE, "CV 14%")]


def test_encode_decode_keeps_code_and_detail():
    value = encode_warnings(WS)
    assert decode_warnings(value) == [{"code": "few_repeats", "detail": "2 repeats"},
                                      {"code": "high_variance", "detail": "CV 14%"}]
    assert encode_warnings([]) == "" and decode_warnings("") == [] and decode_warnings(float("nan")) == []
    assert decode_warnings("few_repeats;outliers") == [{"code": "few_repeats", "detail": ""},
                                                       {"code": "outliers", "detail": ""}]  # an older run


def test_terminal_and_report_print_the_same_rows_with_remedy():
    cells = pd.DataFrame([{"variant": "ngram", "point_id": "p1", "warnings": encode_warnings(WS)},
                          {"variant": "ngram", "point_id": "p2", "warnings": encode_warnings(WS[:1])}])
    rows = warning_rows(cells.to_dict("records"))
    assert [(w.code, len(w.cells), w.detail) for w in rows] == [("few_repeats", 2, "2 repeats"),
                                                                ("high_variance", 1, "CV 14%")]
    lines = warning_lines(cells)
    assert lines[0] == (f"warning: few_repeats in 2 cell(s), e.g. ngram p1 (2 repeats): "
                        f"{REMEDY[WarningCode.FEW_REPEATS]}")
    data = SimpleNamespace(meta={}, cells=cells, errors=pd.DataFrame())  # the fields warnings_section reads
    md = render(Document(title="t", blocks=warnings_section(data)))  # type: ignore[arg-type]
    assert "CV 14%" in md and REMEDY[WarningCode.HIGH_VARIANCE].split(":")[0] in md

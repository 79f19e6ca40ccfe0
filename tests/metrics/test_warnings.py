"""Cell warnings and sanity gates as a user reads them: each threshold at its boundary (just below, at, just
above), the exact detail of every warning, their fixed order, the stored format (and older or odd values
of it), and the variant-wide gates' rules."""

from __future__ import annotations

import math
import warnings
from typing import Any

import pandas as pd
import pytest

from specbench.metrics import gates
from specbench.metrics.warnings import (
    REMEDY,
    CellSummary,
    CellWarning,
    WarningCode,
    cell_warnings,
    decode_warnings,
    encode_warnings,
    remedy,
    warning_rows,
)

W = WarningCode
NAN = math.nan

# A healthy drafter cell: three steady repeats, no errors, a working drafter, lossless at C=1.
CALM: dict[str, Any] = dict(
    is_baseline=False, valid=True, repeats=3, window_throughputs=[100.0, 100.0, 100.0], n_requests=30,
    n_errors=0, outlier_count=0, throughput_cv=0.03, acceptance_length=2.0, acceptance_source="counters",
    lossless_match_rate=1.0, concurrency=1, has_baseline=True,
)


def warn(**over: Any) -> list[CellWarning]:
    return cell_warnings(CellSummary(**{**CALM, **over}))


def test_a_healthy_cell_has_no_warning() -> None:
    assert warn() == []


@pytest.mark.parametrize("over, codes", [
    # slow first repeat: (mean of the others - first) / mean of the others > 10%
    ({"window_throughputs": [90.0, 100.0, 100.0]}, []),  # exactly 10% below: 10 / 100 = 0.10, not above
    ({"window_throughputs": [89.0, 100.0, 100.0]}, [W.SLOW_FIRST_REPEAT]),  # 11%
    ({"window_throughputs": [80.0, 100.0], "repeats": 2}, [W.FEW_REPEATS, W.SLOW_FIRST_REPEAT]),  # two suffice
    ({"window_throughputs": [0.08, 0.1, 0.1]}, [W.SLOW_FIRST_REPEAT]),  # relative: slow CPU models too
    ({"window_throughputs": [5.0, 0.0, 0.0]}, []),  # the others measured nothing: no ratio, no crash
    ({"window_throughputs": [None, NAN, 80.0, 100.0, 100.0]}, [W.SLOW_FIRST_REPEAT]),  # unmeasured skipped
    # high variance: cv > 10%
    ({"throughput_cv": 0.10}, []),
    ({"throughput_cv": 0.1001}, [W.HIGH_VARIANCE]),
    ({"throughput_cv": NAN}, []),
    # low acceptance: < 1.2 tokens per target step, for a drafter whose acceptance was measured
    ({"acceptance_length": 1.2}, []),
    ({"acceptance_length": 1.19}, [W.LOW_ACCEPTANCE]),
    ({"acceptance_length": 1.0, "acceptance_source": "none"}, []),
    ({"acceptance_length": 1.0, "is_baseline": True}, []),  # the baseline drafts nothing
    # degenerate workload: >= 95% of verify steps accepted every draft
    ({"full_accept_fraction": 0.95}, [W.DEGENERATE_WORKLOAD]),
    ({"full_accept_fraction": 0.9499}, []),
    ({"full_accept_fraction": 1.0, "is_baseline": True}, []),
    ({"unknown_acceptance_windows": 1}, [W.ACCEPTANCE_UNKNOWN]),
    ({"unknown_acceptance_windows": 1, "is_baseline": True}, []),
    # repeats: 1 -> no interval, 2 -> a very wide one, 3 -> fine
    ({"repeats": 1, "window_throughputs": [100.0]}, [W.SINGLE_REPEAT]),
    ({"repeats": 2, "window_throughputs": [100.0, 100.0]}, [W.FEW_REPEATS]),
    # errors and the baseline
    ({"n_errors": 1}, [W.REQUEST_ERRORS]),
    ({"n_errors": 30, "valid": False, "has_baseline": False}, [W.INVALID_CELL]),  # invalid: nothing to compare
    ({"has_baseline": False}, [W.NO_BASELINE]),
    ({"has_baseline": False, "is_baseline": True}, []),
    ({"outlier_count": 1}, [W.OUTLIERS]),
    # losslessness: divergence nothing explains at C=1 is the red flag; at C>1 only the part explained by
    # the baseline's own batch-shape numerics is reported
    ({"lossless_match_rate": 0.9}, [W.DIVERGENCE_AT_C1]),
    ({"lossless_match_rate": 0.9, "lossless_any_match_rate": 1.0}, [W.BATCH_NUMERICS]),
    ({"lossless_match_rate": 0.8, "concurrency": 2}, []),
    ({"lossless_match_rate": 0.8, "lossless_any_match_rate": 0.8, "concurrency": 2}, []),
    ({"lossless_match_rate": 0.8, "lossless_any_match_rate": 0.9, "concurrency": 2}, [W.BATCH_NUMERICS]),
    ({"lossless_match_rate": NAN}, []),
])
def test_thresholds_at_their_boundaries(over: dict[str, Any], codes: list[WarningCode]) -> None:
    assert [w.code for w in warn(**over)] == codes


@pytest.mark.parametrize("over, code, detail", [
    ({"valid": False, "n_errors": 7}, W.INVALID_CELL, "7 of 30 requests failed"),
    ({"n_errors": 1}, W.REQUEST_ERRORS, "1 of 30 requests failed"),
    ({"has_baseline": False}, W.NO_BASELINE, "no baseline cell at this sweep point"),
    ({"repeats": 1, "window_throughputs": [100.0]}, W.SINGLE_REPEAT, "1 repeat"),
    ({"repeats": 2, "window_throughputs": [100.0, 100.0]}, W.FEW_REPEATS, "2 repeats"),
    # (100 - 40) / 100 = 60%
    ({"window_throughputs": [40.0, 100.0, 100.0]}, W.SLOW_FIRST_REPEAT, "first repeat 60% below the others"),
    ({"throughput_cv": 0.6}, W.HIGH_VARIANCE, "throughput cv 60% across repeats"),
    ({"outlier_count": 3}, W.OUTLIERS, "3 outlier request(s)"),
    ({"acceptance_length": 1.1}, W.LOW_ACCEPTANCE, "acceptance length 1.10 tokens/step"),
    ({"full_accept_fraction": 0.95}, W.DEGENERATE_WORKLOAD, "95% of verify steps accepted every draft"),
    ({"unknown_acceptance_windows": 2}, W.ACCEPTANCE_UNKNOWN, "2 window(s) with missing or reset counters"),
    # 40% matched the same-cell baseline, no other baseline output known: 60% unexplained
    ({"lossless_match_rate": 0.4}, W.DIVERGENCE_AT_C1,
     "60% of outputs at C=1 match no baseline output for the same prompt"),
    # 20% match the same cell's baseline (80% differ), 40% some baseline output (60% match none)
    ({"lossless_match_rate": 0.2, "lossless_any_match_rate": 0.4, "concurrency": 2}, W.BATCH_NUMERICS,
     "80% differ from the same-cell baseline output, 60% match no baseline output"),
])
def test_each_warning_states_what_was_measured(over: dict[str, Any], code: WarningCode, detail: str) -> None:
    ws = warn(**over)
    assert ws == [CellWarning(code, detail)]
    assert ws[0].message == f"{detail}: {REMEDY[code]}"


def test_warnings_come_in_a_fixed_order() -> None:
    ws = warn(n_errors=2, has_baseline=False, repeats=2, window_throughputs=[50.0, 100.0], throughput_cv=0.4,
              outlier_count=1, acceptance_length=1.1, full_accept_fraction=0.99, unknown_acceptance_windows=1,
              lossless_match_rate=0.5)
    assert [w.code for w in ws] == [W.REQUEST_ERRORS, W.NO_BASELINE, W.FEW_REPEATS, W.SLOW_FIRST_REPEAT,
                                    W.HIGH_VARIANCE, W.OUTLIERS, W.LOW_ACCEPTANCE, W.DEGENERATE_WORKLOAD,
                                    W.ACCEPTANCE_UNKNOWN, W.DIVERGENCE_AT_C1]


# --- the stored form -------------------------------------------------------------------------------


def test_encoded_warnings_are_compact_json() -> None:
    # one cells.csv field: no spaces after separators
    assert encode_warnings([CellWarning(W.OUTLIERS, "2 outlier request(s)")]) == \
        '[{"code":"outliers","detail":"2 outlier request(s)"}]'


@pytest.mark.parametrize("value, decoded", [
    (None, []), (3.5, []), ("   ", []), ("[]", []),
    ('  [{"code":"outliers","detail":"2 outlier request(s)"}]',  # leading blanks (a hand-edited CSV)
     [{"code": "outliers", "detail": "2 outlier request(s)"}]),
    # items without code or detail read as "", items that are not objects are skipped
    ('[{"detail":"x"},{"code":"outliers"},3,"few_repeats"]',
     [{"code": "", "detail": "x"}, {"code": "outliers", "detail": ""}]),
    ("[1, 2]", []),  # a JSON list of no warning
    ("few_repeats; outliers ;", [{"code": "few_repeats", "detail": ""}, {"code": "outliers", "detail": ""}]),
    ("[not json;outliers", [{"code": "[not json", "detail": ""}, {"code": "outliers", "detail": ""}]),
])
def test_decode_reads_odd_and_older_values(value: Any, decoded: list[dict[str, str]]) -> None:
    assert decode_warnings(value) == decoded


def test_remedy_of_an_unknown_code_is_empty() -> None:
    assert remedy("outliers") == REMEDY[W.OUTLIERS]
    assert remedy("renamed_long_ago") == ""


def test_warning_rows_group_by_code_in_order_of_first_appearance() -> None:
    cells = [
        {"variant": "a", "point_id": "p1",
         "warnings": encode_warnings([CellWarning(W.OUTLIERS, "1 outlier request(s)")])},
        {"variant": "b", "point_id": "p1", "warnings": "few_repeats;renamed_long_ago"},  # an older run
        {"variant": "b", "point_id": "p2", "warnings": encode_warnings([CellWarning(W.OUTLIERS, "4 outlier request(s)"),
                                                                        CellWarning(W.FEW_REPEATS, "2 repeats")])},
        {"variant": "c", "point_id": "p1", "warnings": ""},
    ]
    rows = [(r.code, r.cells, r.detail, r.remedy) for r in warning_rows(cells)]
    assert rows == [
        ("outliers", ["a p1", "b p2"], "1 outlier request(s)", REMEDY[W.OUTLIERS]),  # the first cell's detail
        ("few_repeats", ["b p1", "b p2"], "", REMEDY[W.FEW_REPEATS]),
        ("renamed_long_ago", ["b p1"], "", ""),
    ]


# --- variant-wide gates ----------------------------------------------------------------------------


@pytest.mark.parametrize("pairs, detail", [
    # pooled: (1000 + 10) tokens / (1000/1.0 + 10/2.0) steps = 1010 / 1005 = 1.005 (a per-cell mean is 1.5)
    ([(1000.0, 1.0), (10.0, 2.0)], "acceptance length 1.005 tokens/step over all 2 cells of the variant"),
    # cells without acceptance data (no tokens, tau unknown or 0) are left out of the pool and the count
    ([(100.0, 1.0), (1.0, 1.0), (0.0, 1.0), (50.0, NAN), (20.0, 0.0)],
     "acceptance length 1.000 tokens/step over all 2 cells of the variant"),
])
def test_drafter_inactive_pools_tokens_over_steps(pairs: list[tuple[float, float]], detail: str) -> None:
    assert gates.drafter_inactive(pairs) == CellWarning(W.DRAFTER_INACTIVE, detail)


@pytest.mark.parametrize("tau, fires", [(1.0099, True), (1.0101, False), (0.9901, True), (0.9899, False)])
def test_drafter_inactive_within_tolerance_of_one(tau: float, fires: bool) -> None:
    assert (gates.drafter_inactive([(100.0, tau)]) is not None) == fires


def test_eager_engine_names_the_flags() -> None:
    argv = {"a": ["--enforce-eager", "--port", "1", "--disable-cuda-graph=true"], "b": ["--port=8000"],
            "c": ["--enforce-eagerness"]}
    assert gates.eager_engine(argv, has_gpu=True) == {
        "a": CellWarning(W.EAGER_ENGINE, "launched with --enforce-eager --disable-cuda-graph=true")}


def gpu(clock: float | None = None, temp: float | None = None) -> dict[str, Any]:
    sample = {"sm_clock_mhz": clock, "temperature_c": temp}
    return {"gpu": [{k: v for k, v in sample.items() if v is not None}]}


def test_gpu_drift_means_over_windows_and_boundaries() -> None:
    windows = pd.DataFrame([
        {"variant": "base", "extra": gpu(1990, 58)}, {"variant": "base", "extra": gpu(2010, 62)},  # 2000 MHz, 60 C
        {"variant": "at_limits", "extra": gpu(1900, 70)},  # 100 / 2000 = 5% and 10 C: not more than the limits
        {"variant": "hot", "extra": gpu(1800, 75)}, {"variant": "hot"},  # a window without telemetry (NaN)
        {"variant": "no_temp", "extra": gpu(clock=2000)}, {"variant": "no_clock", "extra": gpu(temp=60)},
        {"variant": "none", "extra": None},
    ])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "mean of empty slice" noise for a variant without one reading
        out = gates.gpu_drift(windows, "base")
    assert out == {"hot": CellWarning(W.GPU_DRIFT,
                                      "SM clock 1800 MHz vs the baseline's 2000 MHz; temperature 75 C vs 60 C")}


def test_gpu_drift_without_a_baseline_clock_compares_temperature_only() -> None:
    windows = pd.DataFrame([{"variant": "base", "extra": gpu(0, 60)}, {"variant": "hot", "extra": gpu(1800, 75)}])
    assert gates.gpu_drift(windows, "base") == {"hot": CellWarning(W.GPU_DRIFT, "temperature 75 C vs 60 C")}

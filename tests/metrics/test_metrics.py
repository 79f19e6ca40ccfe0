"""specbench.metrics: hand-computed cells built from real RequestRecord / WindowRecord rows."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from specbench import metrics
from specbench.decide import stats
from specbench.metrics.warnings import CellSummary, WarningCode, cell_warnings, decode_warnings
from specbench.shared.schema import CellKey, RequestRecord, SpecDetails, WindowRecord


def req(
    variant: str,
    *,
    c: int = 1,
    repeat: int = 1,
    index: int = 0,
    t_send: float = 0.0,
    e2e: float = 1.0,
    ttft: float = 0.1,
    n_out: int = 10,
    temperature: float = 0.0,
    output_len: int = 10,
    category: str = "code",
    prompt_id: str | None = None,
    error: str | None = None,
    warmup: bool = False,
    **kw: Any,
) -> dict[str, Any]:
    key = CellKey(variant=variant, category=category, output_len=output_len, concurrency=c, temperature=temperature)
    return RequestRecord(
        variant=variant,
        cell_id=key.cell_id,
        point_id=key.point_id,
        window_id=f"{key.cell_id}|r{repeat}",
        category=category,
        prompt_id=prompt_id if prompt_id is not None else f"p{index}",
        output_len=output_len,
        concurrency=c,
        temperature=temperature,
        repeat=repeat,
        index=index,
        warmup=warmup,
        t_send=t_send,
        ttft_s=None if error else ttft,
        e2e_s=None if error else e2e,
        output_tokens=None if error else n_out,
        error=error,
        **kw,
    ).model_dump()


def codes(row: Any) -> list[str]:
    return [w["code"] for w in decode_warnings(row["warnings"])]


def windows_for(requests: list[dict[str, Any]], **extra: Any) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in requests:
        if r["window_id"] not in out:
            out[r["window_id"]] = WindowRecord(
                window_id=r["window_id"],
                variant=r["variant"],
                cell_id=r["cell_id"],
                point_id=r["point_id"],
                repeat=r["repeat"],
                t_start=0.0,
                t_end=1.0,
                n_requests=1,
                **extra,
            ).model_dump()
    return list(out.values())


def cells_of(requests: list[dict[str, Any]], windows: list[dict[str, Any]] | None = None, **kw: Any) -> pd.DataFrame:
    w = windows if windows is not None else windows_for(requests)
    return metrics.compute_cells(pd.DataFrame(requests), pd.DataFrame(w), metrics.CellOptions("base", **kw))


def one(cells: pd.DataFrame, variant: str, **where: Any) -> pd.Series:
    sel = cells["variant"] == variant
    for k, v in where.items():
        sel &= cells[k] == v
    rows = cells[sel]
    assert len(rows) == 1, rows
    return rows.iloc[0]


# --- per-request and per-window formulas -------------------------------------------------------


def test_window_throughput_counts_successful_tokens_over_send_to_finish() -> None:
    # sends at 100, 100, 101; finishes 102, 103, 103.5; the third failed (its tokens do not count)
    tp = metrics.window_throughput_arrays(
        np.array([100.0, 100.0, 101.0]),
        np.array([2.0, 3.0, 2.5]),
        np.array([10.0, 20.0, 30.0]),
        np.array([True, True, False]),
    )
    assert tp == pytest.approx(30 / 3.5)


def test_window_throughput_from_records_and_undefined() -> None:
    recs = [
        RequestRecord.model_validate(req("v", index=0, t_send=10.0, e2e=2.0, n_out=8)),
        RequestRecord.model_validate(req("v", index=1, t_send=11.0, e2e=3.0, n_out=12)),
        RequestRecord.model_validate(req("v", index=2, t_send=0.0, e2e=1.0, n_out=99, warmup=True)),
    ]
    assert metrics.window_throughput(recs) == pytest.approx(20 / 4.0)  # warmup ignored
    failed = [RequestRecord.model_validate(req("v", error="timeout"))]
    assert metrics.window_throughput(failed) is None
    assert metrics.window_throughput([]) is None


def test_tpot() -> None:
    assert metrics.request_tpot(2.0, 0.5, 16) == pytest.approx(1.5 / 15)
    assert math.isnan(metrics.request_tpot(2.0, 0.5, 1))


def test_itl_per_token_with_multi_token_chunks() -> None:
    # chunks at 0.5 (2 tokens), 0.9 (4 tokens), 1.2 (1 token)
    itl = metrics.request_itls([0.5, 0.9, 1.2], [2, 4, 1])
    assert itl == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.3])
    assert sum(itl) == pytest.approx(1.2 - 0.5)  # ITLs add up to last chunk - TTFT
    # through a cell: p50 per token is 0.1 (per chunk it would be 0.35)
    r = req("base", ttft=0.5, e2e=1.2, n_out=7, chunk_offsets_s=[0.5, 0.9, 1.2], chunk_tokens=[2, 4, 1])
    cell = one(cells_of([r]), "base")
    assert cell["itl_p50_s"] == pytest.approx(0.1)
    assert cell["tpot_p50_s"] == pytest.approx(0.7 / 6)


def test_tau_from_counters_reference_example() -> None:
    # docs/metrics.md "Why two acceptance lengths": a 128-token poem moved vLLM's counters by drafts=28, accepted=73
    assert metrics.tau_from_counters(128, 73) == pytest.approx(128 / 55)  # 2.33 tokens per target step
    assert metrics.draft_acceptance_length(73, 28) == pytest.approx(1 + 73 / 28)  # vLLM's 3.6
    assert math.isnan(metrics.tau_from_counters(10, 10))

    r = req("ngram", n_out=128, output_len=128, e2e=4.0)
    counters = {"num_drafts": 28.0, "num_draft_tokens": 112.0, "num_accepted_tokens": 73.0, "generation_tokens": 128.0}
    w = windows_for([r], counters=counters, per_position_accepted=[25.0, 20.0, 16.0, 12.0])
    cell = one(cells_of([r], w), "ngram")
    assert cell["acceptance_source"] == "counters"
    assert cell["acceptance_length"] == pytest.approx(2.327, abs=1e-3)
    assert cell["draft_acceptance_length"] == pytest.approx(3.607, abs=1e-3)
    assert cell["acceptance_rate"] == pytest.approx(73 / 112)
    assert cell["acceptance_per_position"] == pytest.approx([25 / 28, 20 / 28, 16 / 28, 12 / 28])


def test_tau_from_counters_falls_back_to_usage_tokens() -> None:
    r = req("ngram", n_out=100, output_len=100)
    w = windows_for([r], counters={"num_drafts": 20.0, "num_draft_tokens": 80.0, "num_accepted_tokens": 50.0})
    assert one(cells_of([r], w), "ngram")["acceptance_length"] == pytest.approx(100 / 50)


def test_tau_from_request_spec_details_is_pooled() -> None:
    rs = [
        req("eagle", index=0, n_out=100, spec=SpecDetails(verify_steps=40, accepted_drafts=60, proposed_drafts=120,
                                                           accept_histogram=[10, 10, 20])),
        req("eagle", index=1, n_out=50, spec=SpecDetails(verify_steps=30, accepted_drafts=20, proposed_drafts=90,
                                                         accept_histogram=[20, 5, 5])),
    ]
    cell = one(cells_of(rs), "eagle")
    assert cell["acceptance_source"] == "request"
    assert cell["acceptance_length"] == pytest.approx(150 / 70)  # not the mean of 2.5 and 1.67
    assert cell["acceptance_rate"] == pytest.approx(80 / 210)
    # histogram total [30, 15, 25] over 70 steps: position 0 accepted in 40 steps, position 1 in 25
    assert cell["acceptance_per_position"] == pytest.approx([40 / 70, 25 / 70])
    assert math.isnan(cell["draft_acceptance_length"])  # vLLM's figure needs counters


def test_baseline_without_acceptance_data_is_one_and_variant_is_nan() -> None:
    cells = cells_of([req("base"), req("ngram")])
    assert one(cells, "base")["acceptance_length"] == 1.0
    assert math.isnan(one(cells, "ngram")["acceptance_length"])
    assert one(cells, "ngram")["acceptance_source"] == "none"


# --- filtering and validity -------------------------------------------------------------------


def test_warmup_and_unfinished_windows_are_excluded() -> None:
    counted = req("base", index=0, t_send=0.0, e2e=1.0, n_out=10)
    warm = req("base", index=1, t_send=0.0, e2e=5.0, n_out=999, warmup=True)
    unfinished = req("base", repeat=2, index=0, t_send=50.0, e2e=1.0, n_out=999)
    cell = one(cells_of([counted, warm, unfinished], windows_for([counted])), "base")
    assert cell["n_requests"] == 1 and cell["repeats"] == 1
    assert cell["output_throughput_tok_s"] == pytest.approx(10.0)


def test_invalid_cell_on_error_rate() -> None:
    rs = [req("base", index=i, t_send=0.0, e2e=1.0) for i in range(3)] + [req("base", index=3, error="timeout")]
    strict = one(cells_of(rs), "base")
    assert strict["n_errors"] == 1 and strict["error_rate"] == pytest.approx(0.25)
    assert not strict["valid"]
    assert math.isnan(strict["output_throughput_tok_s"]) and math.isnan(strict["speedup"])
    assert "invalid_cell" in [w["code"] for w in decode_warnings(strict["warnings"])]

    lenient = one(cells_of(rs, max_error_rate=0.3), "base")
    assert lenient["valid"]
    assert lenient["output_throughput_tok_s"] == pytest.approx(30.0)
    assert "request_errors" in [w["code"] for w in decode_warnings(lenient["warnings"])]


def test_all_failed_is_invalid_even_when_errors_allowed() -> None:
    cell = one(cells_of([req("base", error="boom")], max_error_rate=1.0), "base")
    assert not cell["valid"] and math.isnan(cell["output_throughput_tok_s"])


# --- speedup and pairing -------------------------------------------------------------------------


def _two_variant_run(base_tp: list[float], var_tp: list[float], c: int = 1) -> list[dict[str, Any]]:
    """One request per window with n_out=100 sent at t=0: window throughput = 100 / e2e."""
    rs = []
    for rep, (b, v) in enumerate(zip(base_tp, var_tp), start=1):
        rs.append(req("base", c=c, repeat=rep, n_out=100, output_len=100, e2e=100 / b))
        rs.append(req("ngram", c=c, repeat=rep, n_out=100, output_len=100, e2e=100 / v))
    return rs


def test_speedup_is_ratio_of_mean_window_throughputs() -> None:
    cells = cells_of(_two_variant_run([10, 20, 30], [15, 30, 60]))
    v = one(cells, "ngram")
    assert v["output_throughput_tok_s"] == pytest.approx(35.0)
    assert v["speedup"] == pytest.approx(35.0 / 20.0)
    assert v["per_user_speedup"] == pytest.approx(35.0 / 20.0)
    assert v["tpot_speedup"] == pytest.approx((100 / 20 - 0.1) / (100 / 30 - 0.1))  # baseline / variant p50
    assert v["speedup_ci_low"] <= v["speedup"] <= v["speedup_ci_high"]
    assert one(cells, "base")["speedup"] == 1.0


def test_speedup_interval_is_welch_on_the_log_ratio_unpaired() -> None:
    # Variant and baseline ran in separate launches: repeat r of one shares nothing with repeat r of the
    # other, so a ratio that is 1.5 "in every repeat" must not give a zero-width interval.
    cells = cells_of(_two_variant_run([10, 20, 40, 30], [15, 30, 60, 45]))
    v = one(cells, "ngram")
    assert v["speedup"] == pytest.approx(1.5)
    # var(log R) = s_x^2/(n xbar^2) + s_y^2/(n ybar^2) = 375/(4*37.5^2) + 166.67/(4*25^2) = 0.1333; Welch df = 6
    half = 2.446912 * math.sqrt(0.4 / 3)
    assert v["speedup_ci_df"] == pytest.approx(6.0)
    assert v["speedup_ci_low"] == pytest.approx(1.5 * math.exp(-half), rel=1e-5)
    assert v["speedup_ci_high"] == pytest.approx(1.5 * math.exp(half), rel=1e-5)
    # throughput: Student t on the log scale over the 4 windows, mean 37.5, s = sqrt(375), t_3 = 3.182446
    h = 3.182446 * math.sqrt(375 / 4) / 37.5
    assert v["output_throughput_ci_low"] == pytest.approx(37.5 * math.exp(-h), rel=1e-5)
    assert v["interval_unit"] == "repeat" and v["launches"] == 1


def test_speedup_interval_needs_two_repeats_per_side() -> None:
    v = one(cells_of(_two_variant_run([10], [15])), "ngram")
    assert v["speedup"] == pytest.approx(1.5)
    assert math.isnan(v["speedup_ci_low"]) and math.isnan(v["speedup_ci_high"])
    assert "single_repeat" in codes(v)
    two = one(cells_of(_two_variant_run([10, 20], [15, 30])), "ngram")
    assert two["speedup_ci_low"] < 1.5 < two["speedup_ci_high"]  # 1-2 df: honest, and very wide
    assert two["speedup_ci_high"] / two["speedup_ci_low"] > 10
    assert "few_repeats" in codes(two)


def test_per_user_intervals_use_window_means_as_units() -> None:
    rs = []
    for rep, scale in enumerate([1.0, 1.1, 0.9], start=1):
        for i, e2e in enumerate([1.0, 2.0, 4.0, 8.0]):
            rs.append(req("base", repeat=rep, index=i, e2e=e2e * scale, n_out=10))
            rs.append(req("ngram", repeat=rep, index=i, e2e=e2e * scale / 2, n_out=10))
    v = one(cells_of(rs), "ngram")
    units_v = [np.mean([10 / (e * s / 2) for e in (1, 2, 4, 8)]) for s in (1.0, 1.1, 0.9)]
    units_b = [u / 2 for u in units_v]
    expect = stats.ratio_ci(units_v, units_b)
    assert (v["per_user_speedup_ci_low"], v["per_user_speedup_ci_high"]) == pytest.approx(expect.bounds)
    pu = stats.positive_mean_ci(units_v, point=v["per_user_tok_s"])
    assert (v["per_user_tok_s_ci_low"], v["per_user_tok_s_ci_high"]) == pytest.approx(pu.bounds)
    # one window: requests of one launch are not independent replicates, so no interval
    single = one(cells_of([r for r in rs if r["repeat"] == 1]), "ngram")
    assert math.isnan(single["per_user_tok_s_ci_low"]) and math.isnan(single["tpot_p50_s_ci_low"])


def test_no_baseline_cell_gives_nan_speedup_and_warning() -> None:
    v = one(cells_of([req("ngram", c=4)]), "ngram")
    assert math.isnan(v["speedup"])
    assert "no_baseline" in [w["code"] for w in decode_warnings(v["warnings"])]


# --- losslessness ---------------------------------------------------------------------------------


def test_lossless_match_and_prefix() -> None:
    rs = [
        req("base", index=0, token_ids=[1, 2, 3, 4]),
        req("base", index=1, token_ids=[5, 6, 7, 8]),
        req("ngram", index=0, token_ids=[1, 2, 3, 4]),  # identical
        req("ngram", index=1, token_ids=[5, 6, 9, 8]),  # diverges at token 2: prefix 2/4
    ]
    cells = cells_of(rs)
    v = one(cells, "ngram")
    assert v["lossless_match_rate"] == pytest.approx(0.5)
    assert v["lossless_prefix_mean"] == pytest.approx((1.0 + 0.5) / 2)
    assert math.isnan(one(cells, "base")["lossless_match_rate"])
    assert "divergence_at_c1" in [w["code"] for w in decode_warnings(v["warnings"])]


def test_lossless_text_fallback_and_prompt_pairing() -> None:
    assert metrics.compare_outputs(None, "abcd", None, "abxd") == (False, 0.5)
    assert metrics.compare_outputs([1, 2], "x", [1, 2], "y") == (True, 1.0)  # ids win over text
    assert metrics.compare_outputs([1], None, None, "a") is None
    # a shorter output that is a prefix of the baseline's is not lossless: 3 common of 5
    assert metrics.compare_outputs([1, 2, 3], None, [1, 2, 3, 4, 5], None) == (False, 0.6)
    # the baseline only ran at C=1; a C=4 variant request pairs by prompt_id and output_len
    rs = [req("base", c=1, index=0, prompt_id="poem", text="hello world")]
    rs += [req("ngram", c=4, index=i, prompt_id="poem", text="hello world" if i else "hello there") for i in range(2)]
    v = one(cells_of(rs), "ngram")
    assert v["lossless_match_rate"] == pytest.approx(0.5)
    assert v["lossless_prefix_mean"] == pytest.approx((6 / 11 + 1.0) / 2)
    assert "divergence_at_c1" not in v["warnings"]  # divergence at C=4 may be batched numerics


def test_divergence_explained_by_the_baselines_own_batch_numerics() -> None:
    # the baseline's output for the poem differs between C=1 and C=4 (batch-shape numerics); the
    # drafter at C=1 reproduces the baseline's C=4 output: a mismatch, but explained
    rs = [req("base", c=1, prompt_id="poem", token_ids=[1, 2, 3]),
          req("base", c=4, prompt_id="poem", token_ids=[1, 2, 4]),
          req("ngram", c=1, prompt_id="poem", token_ids=[1, 2, 4]),
          req("ngram", c=4, prompt_id="poem", token_ids=[1, 9, 9])]  # matches nothing
    cells = cells_of(rs)
    c1 = cells[(cells.variant == "ngram") & (cells.concurrency == 1)].iloc[0]
    c4 = cells[(cells.variant == "ngram") & (cells.concurrency == 4)].iloc[0]
    assert c1["lossless_match_rate"] == 0.0 and c1["lossless_any_match_rate"] == 1.0
    assert "batch_numerics" in c1["warnings"] and "divergence_at_c1" not in c1["warnings"]
    assert c4["lossless_any_match_rate"] == 0.0 and "batch_numerics" not in c4["warnings"]


def test_lossless_is_nan_above_temperature_zero() -> None:
    rs = [req("base", temperature=0.7, token_ids=[1]), req("ngram", temperature=0.7, token_ids=[2])]
    assert math.isnan(one(cells_of(rs), "ngram")["lossless_match_rate"])


# --- outliers, variance, warnings ---------------------------------------------------------------


def test_outlier_count_and_cv() -> None:
    rs = [req("base", index=i, e2e=e, n_out=10) for i, e in enumerate([1.0, 1.02, 0.98, 1.01, 0.99, 5.0])]
    cell = one(cells_of(rs), "base")
    assert cell["outlier_count"] == 1
    assert "outliers" in [w["code"] for w in decode_warnings(cell["warnings"])]
    assert math.isnan(cell["throughput_cv"])  # one repeat: no run-to-run variation
    assert "single_repeat" in [w["code"] for w in decode_warnings(cell["warnings"])]


def test_cell_warnings_slow_first_repeat_variance_low_acceptance() -> None:
    ws = cell_warnings(CellSummary(
        is_baseline=False,
        valid=True,
        repeats=3,
        window_throughputs=[70.0, 100.0, 100.0],
        n_requests=30,
        n_errors=0,
        outlier_count=0,
        throughput_cv=0.17,
        acceptance_length=1.1,
        acceptance_source="counters",
        lossless_match_rate=1.0,
        concurrency=1,
        has_baseline=True,
    ))
    codes = [w.code for w in ws]
    assert codes == [WarningCode.SLOW_FIRST_REPEAT, WarningCode.HIGH_VARIANCE, WarningCode.LOW_ACCEPTANCE]
    assert "30% below" in ws[0].message and "warmup_requests" in ws[0].message
    calm = cell_warnings(CellSummary(
        is_baseline=True, valid=True, repeats=3, window_throughputs=[95.0, 100.0, 100.0], n_requests=30,
        n_errors=0, outlier_count=0, throughput_cv=0.03, acceptance_length=1.0, acceptance_source="none",
        lossless_match_rate=math.nan, concurrency=1, has_baseline=True,
    ))
    assert calm == []


def test_adaptive_done() -> None:
    assert not metrics.adaptive_done([100.0, 101.0, 99.0, 100.5], 0.03)  # too few windows (7 needed)
    assert metrics.adaptive_done([100.0, 101.0, 99.0, 100.5, 100.0, 99.5, 100.5], 0.03)
    assert not metrics.adaptive_done([60.0, 140.0, 100.0, 80.0, 120.0, 90.0, 110.0], 0.03)


# --- break-even table ----------------------------------------------------------------------------


def test_break_even_table_from_cells() -> None:
    rs = []
    for c, s in [(1, 1.8), (4, 1.3), (16, 0.8)]:
        for rep in (1, 2, 3):
            jitter = 1 + 0.01 * rep
            rs.append(req("base", c=c, repeat=rep, n_out=100, output_len=100, e2e=10 * jitter))
            rs.append(req("ngram", c=c, repeat=rep, n_out=100, output_len=100, e2e=10 * jitter / s))
    cells = cells_of(rs)
    table = metrics.break_even_table(cells)
    assert list(table["variant"]) == ["ngram"]
    row = table.iloc[0]
    assert row["status"] == "pays_up_to"
    assert row["break_even_concurrency"] == pytest.approx(2**3.2, rel=1e-6)
    assert row["verdict"].startswith("pays up to C≈9.2")
    assert set(table.columns) == set(metrics.BREAK_EVEN_COLUMNS)


def test_columns_are_stable_and_empty_input() -> None:
    cells = cells_of([req("base")])
    assert list(cells.columns) == metrics.CELL_COLUMNS
    empty = metrics.compute_cells(pd.DataFrame(), pd.DataFrame(), metrics.CellOptions("base"))
    assert list(empty.columns) == metrics.CELL_COLUMNS and empty.empty


def test_calibration_adds_launch_variance_to_single_launch_intervals() -> None:
    from specbench.decide.intervals import LaunchVariance

    rs = _two_variant_run([100, 101, 99], [120, 121, 119])
    plain = one(cells_of(rs), "ngram")
    cal = LaunchVariance(rel_var=0.01, df=2.0, source="test")
    wide = one(cells_of(rs, calibration=cal), "ngram")
    assert plain["interval_unit"] == "repeat" and wide["interval_unit"] == "repeat+calibration"
    assert plain["speedup_ci_low"] > 1.15  # repeats inside one launch agree to 1%
    # var(log R) = 2 x 0.0001 / 3 (repeats, tiny) + 2 x 0.01 (one launch each): df close to the calibration's 2
    assert 1.9 < wide["speedup_ci_df"] < 2.1 and wide["speedup_ci_low"] < 1.0 < wide["speedup_ci_high"]
    assert wide["launch_cv"] == pytest.approx(0.1)
    # measured launches need no calibration: it is not applied
    rs2 = [dict(r, launch=2 if r["repeat"] == 3 else 1) for r in rs]
    assert one(cells_of(rs2, calibration=cal), "ngram")["interval_unit"] == "launch"


def test_missing_or_reset_counters_leave_acceptance_unknown_except_for_plain_decoding() -> None:
    rs = [req("base", n_out=100, output_len=100), req("ngram", n_out=100, output_len=100),
          req("a2", n_out=100, output_len=100)]
    only_gen = {"generation_tokens": 100.0}  # vLLM without a speculative config: no spec_decode counters
    cells = cells_of(rs, windows_for(rs, counters=only_gen), plain=frozenset({"a2"}))
    ngram, a2 = one(cells, "ngram"), one(cells, "a2")
    assert math.isnan(ngram["acceptance_length"]) and "acceptance_unknown" in codes(ngram)
    assert a2["acceptance_length"] == 1.0 and "acceptance_unknown" not in codes(a2)  # A/A: not a drafter
    # a reset inside the window: the engine counted fewer tokens than the responses carried
    reset = {"generation_tokens": 40.0, "num_accepted_tokens": 20.0, "num_drafts": 10.0, "num_draft_tokens": 30.0}
    cells = cells_of(rs[:2], windows_for(rs[:2], counters=reset))
    assert math.isnan(one(cells, "ngram")["acceptance_length"])
    assert one(cells, "ngram")["acceptance_unknown_windows"] == 1

"""The cells table (specbench/metrics/cells.py) column by column, with answers worked out by hand from the
definitions in docs/metrics.md: latency percentiles, per-user speed and their intervals, launches and
calibration, speedups, warnings and gates attached to cells, losslessness pairing, and the shared helpers
of specbench/metrics/common.py."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from specbench import metrics
from specbench.decide import stats
from specbench.decide.intervals import LaunchVariance
from specbench.metrics.common import as_list, interval_or_nan, key_nan, opt_list, safe_ratio
from specbench.metrics.lossless import cell_lossless, compare_outputs
from specbench.metrics.requests import to_measured_requests
from specbench.metrics.warnings import CellWarning, WarningCode, decode_warnings
from specbench.plan.windows import window_id
from specbench.shared.schema import CellKey, SpecDetails
from tests.metrics.test_metrics import codes, one, req, windows_for

CAL = LaunchVariance(rel_var=0.01, df=2.0, source="test")  # a launch-to-launch cv of 10%


def rec(variant: str, *, launch: int = 1, input_len: int | None = None, **kw: Any) -> dict[str, Any]:
    """A request record as test_metrics.req builds it, in a given launch and at a given input length
    (ids as the planner writes them)."""
    r = req(variant, **kw)
    if input_len is not None:
        key = CellKey(variant=variant, category=r["category"], input_len=input_len, output_len=r["output_len"],
                      concurrency=r["concurrency"], temperature=r["temperature"])
        r.update(cell_id=key.cell_id, point_id=key.point_id, input_len=input_len)
    r.update(launch=launch, window_id=window_id(r["cell_id"], r["repeat"], launch))
    return r


def wins(requests: list[dict[str, Any]], **extra: Any) -> list[dict[str, Any]]:
    """One completed window per window id, carrying its launch."""
    launch = {r["window_id"]: r["launch"] for r in requests}
    return [dict(w, launch=launch[w["window_id"]]) for w in windows_for(requests, **extra)]


def cells(requests: list[dict[str, Any]], windows: list[dict[str, Any]] | None = None, **kw: Any) -> pd.DataFrame:
    w = windows if windows is not None else wins(requests)
    return metrics.compute_cells(pd.DataFrame(requests), pd.DataFrame(w), metrics.CellOptions("base", **kw))


def messages(row: Any, code: str) -> list[str]:
    return [w["detail"] for w in decode_warnings(row["warnings"]) if w["code"] == code]


# --- latency percentiles -------------------------------------------------------------------------


def test_latency_percentiles_known_answers() -> None:
    # five requests, one window; numpy's linear interpolation: p_q at position q/100 * (n - 1) of the sorted values
    ttft = [0.1, 0.2, 0.3, 0.4, 0.5]
    e2e = [1.1, 1.2, 1.4, 1.8, 2.6]
    rs = [req("base", index=i, ttft=t, e2e=e, n_out=11) for i, (t, e) in enumerate(zip(ttft, e2e))]
    # request 0 streams 7 tokens at TTFT, then one token per chunk: ITLs 0.1, 0.2, 0.3, 0.4
    rs[0].update(chunk_offsets_s=[0.1, 0.2, 0.4, 0.7, 1.1], chunk_tokens=[7, 1, 1, 1, 1])
    c = one(cells(rs), "base")
    assert c["ttft_p50_s"] == pytest.approx(0.3)  # position 2
    assert c["ttft_p90_s"] == pytest.approx(0.46)  # position 3.6: 0.4 + 0.6 x 0.1
    assert c["ttft_p99_s"] == pytest.approx(0.496)  # position 3.96
    # TPOT = (e2e - ttft) / (n_out - 1): 0.10, 0.10, 0.11, 0.14, 0.21
    assert c["tpot_p50_s"] == pytest.approx(0.11)
    assert c["tpot_p90_s"] == pytest.approx(0.14 + 0.6 * 0.07)
    assert c["e2e_p50_s"] == pytest.approx(1.4)
    assert c["itl_p50_s"] == pytest.approx(0.25)  # median of 0.1, 0.2, 0.3, 0.4
    assert c["n_requests"] == 5 and c["n_errors"] == 0 and c["error_rate"] == 0.0 and c["valid"]


# --- per-user speed, TPOT and throughput intervals over repeats ----------------------------------

# n_out = 11, ttft = 0.1 -> per-user speed 11 / e2e, TPOT (e2e - 0.1) / 10; all sent at t = 0
E2E_BY_REPEAT = {1: [1.1, 2.1], 2: [1.1, 1.1, 2.2], 3: [1.1, 1.6]}


def _three_repeats(variant: str = "base", scale: float = 1.0) -> list[dict[str, Any]]:
    return [req(variant, repeat=rep, index=i, e2e=e * scale, n_out=11)
            for rep, es in E2E_BY_REPEAT.items() for i, e in enumerate(es)]


def test_window_throughput_cv_and_request_cv() -> None:
    c = one(cells(_three_repeats()), "base")
    wt = [22 / 2.1, 33 / 2.2, 22 / 1.6]  # window tokens over its last finish
    assert c["output_throughput_tok_s"] == pytest.approx(np.mean(wt))
    assert c["throughput_cv"] == pytest.approx(np.std(wt, ddof=1) / np.mean(wt))
    assert "high_variance" in codes(c)  # cv 0.18 > 0.10
    # request_cv: pooled within-window variance of the per-user speed (df-weighted) over its overall mean
    groups = [[11 / e for e in es] for es in E2E_BY_REPEAT.values()]
    pooled = sum(np.var(g, ddof=1) * (len(g) - 1) for g in groups) / sum(len(g) - 1 for g in groups)
    assert c["request_cv"] == pytest.approx(math.sqrt(pooled) / np.mean([x for g in groups for x in g]))
    assert c["repeat_cv"] == pytest.approx(c["throughput_cv"])  # one launch: windows are the repeats
    assert math.isnan(c["launch_cv"])


@pytest.mark.parametrize("calibration", [None, CAL])
def test_single_launch_intervals_centre_on_the_pooled_figure(calibration: LaunchVariance | None) -> None:
    c = one(cells(_three_repeats(), calibration=calibration), "base")
    # per-user speed: mean over all 7 requests, but the units are the 3 window means
    per_req = {rep: [11 / e for e in es] for rep, es in E2E_BY_REPEAT.items()}
    pu = np.mean([x for xs in per_req.values() for x in xs])
    assert c["per_user_tok_s"] == pytest.approx(pu)
    # TPOT p50 over all requests (0.1, 0.2, 0.1, 0.1, 0.21, 0.1, 0.15) is 0.1; the units are the windows'
    # medians 0.15, 0.10, 0.125
    assert c["tpot_p50_s"] == pytest.approx(0.1)
    tp = np.mean([22 / 2.1, 33 / 2.2, 22 / 1.6])

    def expect(units: list[float], m: float) -> tuple[float, float]:
        # Student t on the log scale: var(log m) = s^2 / (n m^2), plus the calibration's rel_var of one launch
        # (Satterthwaite df), bounds m exp(+-t sqrt(var))
        comps = [(float(np.var(units, ddof=1)) / (len(units) * m * m), len(units) - 1.0)]
        if calibration is not None:
            comps.append((calibration.rel_var, calibration.df))
        var = sum(v for v, _ in comps)
        df = var * var / sum(v * v / d for v, d in comps)
        half = scipy.stats.t.ppf(0.975, df) * math.sqrt(var)
        return m * math.exp(-half), m * math.exp(half)

    pairs = [
        ("output_throughput", [22 / 2.1, 33 / 2.2, 22 / 1.6], tp),
        ("per_user_tok_s", [float(np.mean(xs)) for xs in per_req.values()], pu),
        ("tpot_p50_s", [0.15, 0.1, 0.125], 0.1),
    ]
    for name, units, m in pairs:
        assert (c[f"{name}_ci_low"], c[f"{name}_ci_high"]) == pytest.approx(expect(units, m), rel=1e-9), name
    assert c["interval_unit"] == ("repeat" if calibration is None else "repeat+calibration")
    assert c["launch_cv"] == pytest.approx(0.1) if calibration else math.isnan(c["launch_cv"])


def _two_launches(variant: str = "base", tps: tuple[float, ...] = (10, 20, 40)) -> list[dict[str, Any]]:
    """Launch 1: repeats 1 and 2; launch 2: repeat 1; one request of 10 tokens per window sent at 0."""
    where = [(1, 1), (1, 2), (2, 1)]
    return [rec(variant, launch=la, repeat=rep, n_out=10, e2e=10 / tp) for (la, rep), tp in zip(where, tps)]


@pytest.mark.parametrize("calibration", [None, CAL])
def test_two_launches_are_the_units_and_need_no_calibration(calibration: LaunchVariance | None) -> None:
    c = one(cells(_two_launches(), calibration=calibration), "base")
    assert (c["launches"], c["repeats"], c["interval_unit"]) == (2, 3, "launch")
    # cell throughput = mean over the 3 windows = 70/3; the units are the launch means 15 and 40
    assert c["output_throughput_tok_s"] == pytest.approx(70 / 3)
    assert c["per_user_tok_s"] == pytest.approx(70 / 3)  # one request per window: the same figures
    # Student t with 1 df on the log scale around the pooled 70/3: sd(15, 40) / sqrt(2) = 12.5, so
    # log-half-width t_{0.975,1} x 12.5 / (70/3) = 12.7062 x 0.5357; the calibration is not applied
    # (launches were measured). On the natural scale, 70/3 - 12.7062 x 12.5 would be -135 tok/s.
    half = 12.706205 * 12.5 / (70 / 3)
    for name in ("output_throughput", "per_user_tok_s"):
        assert c[f"{name}_ci_low"] == pytest.approx(70 / 3 * math.exp(-half), rel=1e-6), name
        assert c[f"{name}_ci_high"] == pytest.approx(70 / 3 * math.exp(half), rel=1e-6), name
        assert c[f"{name}_ci_low"] > 0, name
    # launch_cv measured (Kalibera & Jones): S1^2 = var(15, 40) = 312.5, S2^2 = var(10, 20) = 50, n2 = 1.5
    assert c["launch_cv"] == pytest.approx(math.sqrt(312.5 - 50 / 1.5) / (70 / 3))
    # two launches are two independent units: too few for a trustworthy interval, whatever the windows
    assert messages(c, "few_repeats") == ["2 repeats"]


# --- speedups --------------------------------------------------------------------------------------


def test_baseline_speedups_are_one() -> None:
    b = one(cells(_three_repeats() + _three_repeats("ngram", 0.5)), "base")
    assert (b["speedup"], b["per_user_speedup"], b["tpot_speedup"]) == (1.0, 1.0, 1.0)


def test_speedup_intervals_with_calibration_count_both_single_launches() -> None:
    rs = _three_repeats() + _three_repeats("ngram", 0.8)
    v = one(cells(rs, calibration=CAL), "ngram")
    assert v["speedup"] == pytest.approx(1.25) and v["per_user_speedup"] == pytest.approx(1.25)
    # both sides ran one launch each: the log ratio gains 2 x rel_var (one launch effect per side)
    extra = [(2 * CAL.rel_var, CAL.df)]
    b_tp = [22 / 2.1, 33 / 2.2, 22 / 1.6]
    sp = stats.ratio_ci([x / 0.8 for x in b_tp], b_tp, extra_log=extra)
    assert (v["speedup_ci_low"], v["speedup_ci_high"]) == pytest.approx(sp.bounds, rel=1e-9)
    assert v["speedup_ci_df"] == pytest.approx(sp.df)
    b_pu = [float(np.mean([11 / e for e in es])) for es in E2E_BY_REPEAT.values()]
    pu = stats.ratio_ci([x / 0.8 for x in b_pu], b_pu, extra_log=extra)
    assert (v["per_user_speedup_ci_low"], v["per_user_speedup_ci_high"]) == pytest.approx(pu.bounds, rel=1e-9)


def test_speedup_interval_calibration_applies_when_either_side_ran_one_launch() -> None:
    base_one = _three_repeats()
    base_two = _two_launches(tps=(10, 12, 11))
    var_two = _two_launches("ngram", tps=(20, 24, 22))
    var_units, two_units = [22.0, 22.0], [11.0, 11.0]  # launch means
    b_tp = [22 / 2.1, 33 / 2.2, 22 / 1.6]
    # variant measured over 2 launches, baseline in one: the baseline's launch effect still counts
    v = one(cells(base_one + var_two, calibration=CAL), "ngram")
    expect = stats.ratio_ci(var_units, b_tp, extra_log=[(2 * CAL.rel_var, CAL.df)])
    assert (v["speedup_ci_low"], v["speedup_ci_high"]) == pytest.approx(expect.bounds, rel=1e-9)
    # both measured over 2 launches: the calibration is not used at all
    both = one(cells(base_two + var_two, calibration=CAL), "ngram")
    plain = one(cells(base_two + var_two), "ngram")
    assert both["speedup"] == pytest.approx(2.0)
    assert (both["speedup_ci_low"], both["speedup_ci_high"]) == pytest.approx(
        (plain["speedup_ci_low"], plain["speedup_ci_high"]), rel=1e-12)
    assert both["speedup_ci_low"] == pytest.approx(stats.ratio_ci(var_units, two_units).low)


# --- validity and warnings ---------------------------------------------------------------------------


@pytest.mark.parametrize("max_error_rate, valid", [(0.24, False), (0.25, True), (0.26, True)])
def test_validity_at_the_error_rate_threshold(max_error_rate: float, valid: bool) -> None:
    rs = [req("base", index=i) for i in range(3)] + [req("base", index=3, error="timeout")]
    c = one(cells(rs, max_error_rate=max_error_rate), "base")
    assert c["error_rate"] == 0.25 and c["valid"] == valid  # 1 of 4 failed
    assert math.isnan(c["output_throughput_tok_s"]) != valid
    assert messages(c, "request_errors" if valid else "invalid_cell") == ["1 of 4 requests failed"]


def test_slow_first_repeat_looks_at_the_first_launch_only() -> None:
    def run(first: list[float], second: list[float], first_repeats: tuple[int, ...] = (1, 2, 3)) -> list[str]:
        rs = [rec("base", launch=1, repeat=rep, n_out=100, e2e=100 / tp) for rep, tp in zip(first_repeats, first)]
        rs += [rec("base", launch=2, repeat=rep, n_out=100, e2e=100 / tp) for rep, tp in zip((1, 2, 3), second)]
        return codes(one(cells(rs), "base"))

    # launch 1 warms up slowly (70 vs 100); launch 2 as well: the first launch's windows show it
    assert "slow_first_repeat" in run([70, 100, 100], [70, 100, 100])
    # a slow start in the second launch only is not a warmup of the first: no warning
    assert "slow_first_repeat" not in run([100, 100, 100], [70, 100, 100])
    # launch 1's first window never completed: its windows are repeats 2 and 3, still launch 1's
    assert "slow_first_repeat" not in run([100, 100], [70, 100, 100], first_repeats=(2, 3))


def _counters(gen: float, accepted: float, drafts: float) -> dict[str, float]:
    return {"generation_tokens": gen, "num_accepted_tokens": accepted, "num_drafts": drafts,
            "num_draft_tokens": 3 * drafts}


def test_acceptance_warnings_on_variant_cells_only() -> None:
    rs = [req(v, n_out=110, output_len=110) for v in ("base", "ngram", "a2")]
    w = wins(rs, counters=_counters(110.0, 10.0, 20.0))  # tau = 110 / (110 - 10) = 1.1
    t = cells(rs, w, plain=frozenset({"a2"}))
    ngram = one(t, "ngram")
    assert ngram["acceptance_length"] == pytest.approx(1.1)
    assert messages(ngram, "low_acceptance") == ["acceptance length 1.10 tokens/step"]
    assert "no_baseline" not in codes(ngram)
    # the baseline decodes plainly (its counters say 1.1 here): no drafter to judge
    assert not {"low_acceptance", "drafter_inactive", "acceptance_unknown"} & set(codes(one(t, "base")))
    # counters without spec_decode figures: unknown for a drafter, but the baseline never drafts
    w = wins(rs, counters={"generation_tokens": 110.0})
    t = cells(rs, w, plain=frozenset({"a2"}))
    assert "acceptance_unknown" in codes(one(t, "ngram"))
    assert "acceptance_unknown" not in codes(one(t, "base"))
    # an engine that reads no counters at all: nothing unknown to warn about
    t = cells(rs)
    assert one(t, "ngram")["acceptance_source"] == "none"
    assert "acceptance_unknown" not in codes(one(t, "ngram"))
    # an A/A plain variant: acceptance 1.0 by definition, which is not a low acceptance
    t = cells(rs, plain=frozenset({"a2"}))
    assert one(t, "a2")["acceptance_length"] == 1.0 and "low_acceptance" not in codes(one(t, "a2"))
    # a forced acceptance (specbench surface) sets the level: a forced AL 1.1 is the point measured, no warning
    w = wins(rs, counters=_counters(110.0, 10.0, 20.0))
    assert "low_acceptance" not in codes(one(cells(rs, w, forced=frozenset({"ngram"})), "ngram"))


def test_degenerate_workload_from_request_histograms() -> None:
    # every one of 20 verify steps accepted all 3 drafts: 4 tokens per step
    spec = SpecDetails(verify_steps=20, accepted_drafts=60, proposed_drafts=60, accept_histogram=[0, 0, 0, 20])
    rs = [req("base", n_out=80, output_len=80), req("ngram", n_out=80, output_len=80, spec=spec)]
    v = one(cells(rs), "ngram")
    assert v["full_accept_fraction"] == 1.0
    assert "degenerate_workload" in codes(v)


# --- gates over a whole variant ----------------------------------------------------------------------


def test_drafter_inactive_gate_on_the_drafter_only() -> None:
    rs = [req(v, c=c, n_out=100, output_len=100) for v in ("base", "ngram") for c in (1, 4)]
    w = wins(rs, counters=_counters(100.0, 0.0, 20.0))  # tau 1.0: nothing accepted, baseline counts alike
    t = cells(rs, w)
    for c in (1, 4):
        assert "drafter_inactive" in codes(one(t, "ngram", concurrency=c))
        assert "drafter_inactive" not in codes(one(t, "base", concurrency=c))


def test_drafter_inactive_weighs_cells_by_successful_tokens() -> None:
    # C=1 accepts nothing (tau 1.0), C=4 tau 1.03: pooled over 100 + 100 tokens 200 / (100 + 100/1.03) = 1.0148,
    # outside the 1% tolerance. A failed C=1 request streamed 300 tokens before it broke: they do not count.
    rs = [req("ngram", c=1, n_out=100, output_len=100),
          req("ngram", c=1, index=1, output_len=100, error="reset", chunk_tokens=[300]),
          req("ngram", c=4, n_out=103, output_len=100)]
    w = [dict(x, counters=_counters(100.0, 0.0, 20.0) if "|c1|" in x["window_id"] else _counters(103.0, 3.0, 20.0))
         for x in wins(rs)]
    t = cells(rs, w, max_error_rate=1.0)
    assert one(t, "ngram", concurrency=4)["acceptance_length"] == pytest.approx(1.03)
    assert "drafter_inactive" not in codes(one(t, "ngram", concurrency=1))


def test_gpu_drift_and_run_gates_attach_to_every_cell_of_the_variant() -> None:
    rs = [req(v, c=c) for v in ("base", "ngram", "other") for c in (1, 4)]
    clock = {"base": 1800, "ngram": 1500, "other": 1800}
    w = [dict(x, extra={"gpu": [{"sm_clock_mhz": clock[x["variant"]], "temperature_c": 60}]}) for x in wins(rs)]
    eager = CellWarning(WarningCode.EAGER_ENGINE, "launched with --enforce-eager")
    t = cells(rs, w, run_gates={"other": [eager]})
    for c in (1, 4):
        assert messages(one(t, "ngram", concurrency=c), "gpu_drift") == [
            "SM clock 1500 MHz vs the baseline's 1800 MHz"]
        assert messages(one(t, "other", concurrency=c), "eager_engine") == ["launched with --enforce-eager"]
        assert not {"gpu_drift", "eager_engine"} & set(codes(one(t, "base", concurrency=c)))
        assert "gpu_drift" not in codes(one(t, "other", concurrency=c))


# --- losslessness ---------------------------------------------------------------------------------------


def test_lossless_pairs_the_same_repeat_and_index_first() -> None:
    # the baseline's own output for p0 changed between repeats (nondeterminism); the variant reproduces
    # each repeat's output: both pair with their own repeat, so the match rate is 1.0
    rs = [req("base", repeat=1, prompt_id="p0", token_ids=[1, 2, 3]),
          req("base", repeat=2, prompt_id="p0", token_ids=[1, 2, 4]),
          req("ngram", repeat=1, prompt_id="p0", token_ids=[1, 2, 3]),
          req("ngram", repeat=2, prompt_id="p0", token_ids=[1, 2, 4])]
    v = one(cells(rs), "ngram")
    assert (v["lossless_match_rate"], v["lossless_any_match_rate"], v["lossless_prefix_mean"]) == (1.0, 1.0, 1.0)


def test_lossless_pairs_by_prompt_at_the_same_input_length() -> None:
    # the baseline ran only at C=1: the C=4 request pairs with it by prompt, input and output length
    rs = [rec("base", input_len=128, prompt_id="poem", token_ids=[1, 2, 3, 4]),
          rec("base", input_len=512, prompt_id="poem", token_ids=[9, 9, 9, 9]),
          rec("ngram", c=4, input_len=128, prompt_id="poem", token_ids=[1, 2, 3, 5])]
    v = one(cells(rs), "ngram")
    assert v["lossless_match_rate"] == 0.0 and v["lossless_prefix_mean"] == pytest.approx(0.75)


def test_lossless_skips_requests_it_cannot_compare() -> None:
    base = [req("base", index=i, token_ids=[1, 2, 3]) for i in range(4)]
    rs = base + [
        req("ngram", index=0, error="timeout"),  # failed
        req("ngram", index=1, prompt_id="unseen", token_ids=[1, 2, 3]),  # no baseline output for its prompt
        req("ngram", index=2),  # neither ids nor text
        req("ngram", index=3, token_ids=[1, 2, 0]),  # compared: prefix 2 of 3
    ]
    v = one(cells(rs, max_error_rate=0.5), "ngram")
    assert v["lossless_match_rate"] == 0.0 and v["lossless_prefix_mean"] == pytest.approx(2 / 3)


def test_lossless_any_match_compares_text_when_there_are_no_ids() -> None:
    rs = [req("base", c=1, prompt_id="poem", text="abc"), req("base", c=4, prompt_id="poem", text="abd"),
          req("ngram", c=1, prompt_id="poem", text="abd")]
    v = one(cells(rs), "ngram")
    assert v["lossless_match_rate"] == 0.0 and v["lossless_any_match_rate"] == 1.0
    assert "batch_numerics" in codes(v)


def test_cell_lossless_without_other_baseline_outputs() -> None:
    mine = to_measured_requests(pd.DataFrame([req("ngram", token_ids=[1, 2])]))
    base = to_measured_requests(pd.DataFrame([req("base", token_ids=[1, 3])]))
    assert cell_lossless(mine, (None, 10), base, {}) == (0.0, 0.0, 0.5)
    assert all(math.isnan(x) for x in cell_lossless(mine, (None, 10), None, {}))


@pytest.mark.parametrize("a, b, expect", [
    ([], [], (True, 1.0)),  # two empty outputs agree entirely
    ([1], [2], (False, 0.0)),  # one token, different
    ([1], [1], (True, 1.0)),
    ([1, 2], [1], (False, 0.5)),
])
def test_compare_outputs_prefix_fraction(a: list[int], b: list[int], expect: tuple[bool, float]) -> None:
    assert compare_outputs(a, None, b, None) == expect


# --- shared helpers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("num, den", [(1.0, 0.0), (1.0, -2.0), (1.0, math.inf), (math.inf, 2.0), (math.nan, 2.0)])
def test_safe_ratio_is_nan_without_a_positive_finite_denominator(num: float, den: float) -> None:
    assert math.isnan(safe_ratio(num, den))


def test_safe_ratio_and_missing_values() -> None:
    assert safe_ratio(3.0, 2.0) == 1.5
    assert as_list(None) == [] and as_list(math.nan) == [] and as_list((1, 2)) == [1, 2]
    assert opt_list(None) is None and opt_list(math.nan) is None and opt_list((1,)) == [1]
    assert key_nan(None) is None and key_nan(math.nan) is None and key_nan(128) == 128
    lo, hi = interval_or_nan((None, None))
    assert math.isnan(lo) and math.isnan(hi)
    assert interval_or_nan((1.0, 2.0)) == (1.0, 2.0)


def test_rows_go_by_variant_then_sweep_position() -> None:
    # input lengths in numeric order (as cell ids they would sort "in512" before "in64")
    rs = [rec(v, c=c, input_len=n) for v in ("ngram", "base") for n in (512, 64) for c in (4, 1)]
    t = cells(rs)
    assert list(zip(t["variant"], t["input_len"], t["concurrency"])) == [
        ("base", 64, 1), ("base", 64, 4), ("base", 512, 1), ("base", 512, 4),
        ("ngram", 64, 1), ("ngram", 64, 4), ("ngram", 512, 1), ("ngram", 512, 4)]

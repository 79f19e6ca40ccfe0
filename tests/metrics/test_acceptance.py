"""specbench.metrics.acceptance on small hand-built inputs: every expected number is worked out by hand from
docs/metrics.md ("Acceptance"): tau from per-request figures and from window counter deltas (vLLM's
accepted-token counter, a command engine's verify-step counter), the acceptance-length interval over
windows and launches, vLLM's draft acceptance length, the acceptance rate, per-position acceptance, the
full-accept fraction, and missing or reset counters (unknown, never 1.0)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest
import scipy.stats

from specbench.metrics import REQUEST_ACCEPTANCE_COLUMNS, request_acceptance_table
from specbench.metrics.acceptance import cell_acceptance
from specbench.metrics.requests import MeasuredRequest

NAN = math.nan


def wid(launch: int, repeat: int) -> str:
    """A window's id as plan.window_id writes it (one cell)."""
    return f"c|r{repeat}" if launch == 1 else f"c|l{launch}r{repeat}"


def mreq(n_out: float, spec: dict[str, Any] | None = None, *, launch: int = 1, repeat: int = 1,
         ok: bool = True) -> MeasuredRequest:
    return MeasuredRequest(window_id=wid(launch, repeat), launch=launch, repeat=repeat, index=0, prompt_id="p", ok=ok,
                           n_out=n_out, e2e=1.0, ttft=0.1, t_send=0.0, chunk_offsets=[], chunk_tokens=[],
                           token_ids=None, text=None, spec=spec)


def spec(verify_steps: Any, **kw: Any) -> dict[str, Any]:
    return {"verify_steps": verify_steps, **kw}


def wins(*rows: dict[str, Any]) -> pd.DataFrame:
    """Window rows: `repeat` (default 1), `counters` (None: the engine reads no counters), optional `launch`
    and `per_position_accepted`; `window_id` from launch and repeat."""
    return pd.DataFrame([{"window_id": wid(r.get("launch", 1), r.get("repeat", 1)), "repeat": 1, **r} for r in rows])


def vllm(gen: float | None, accepted: float, drafts: float = NAN, draft_tokens: float = NAN) -> dict[str, Any]:
    """vLLM's spec-decode counter deltas of one window."""
    return {"generation_tokens": gen, "num_accepted_tokens": accepted, "num_drafts": drafts,
            "num_draft_tokens": draft_tokens}


def acceptance(reqs: list[MeasuredRequest], windows: pd.DataFrame | None = None, *, is_plain: bool = False,
               n_launches: int = 1) -> dict[str, Any]:
    return cell_acceptance(reqs, wins({"counters": None}) if windows is None else windows, is_plain, n_launches)


def ratio_ci(tokens: list[float], steps: list[float]) -> tuple[float, float]:
    """docs/metrics.md "Intervals": R = sum T / sum S, var = sum (T_i - R S_i)^2 / ((n-1) n mean(S)^2),
    t with n-1 df on the log scale (var(log R) = var / R^2), written out independently of specbench.decide.stats."""
    n = len(tokens)
    r = sum(tokens) / sum(steps)
    var = sum((t - r * s) ** 2 for t, s in zip(tokens, steps)) / ((n - 1) * n * (sum(steps) / n) ** 2)
    half = scipy.stats.t.ppf(0.975, n - 1) * math.sqrt(var) / r
    return r * math.exp(-half), r * math.exp(half)


def same(a: Any, b: Any) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b


# --- no data ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("is_plain, length", [(False, NAN), (True, 1.0)])
def test_no_data_gives_every_figure_empty(is_plain: bool, length: float) -> None:
    # a failed request, a request without spec details and a window without counters: nothing to read
    out = acceptance([mreq(NAN, ok=False), mreq(10.0)], is_plain=is_plain)
    expected = {
        "acceptance_length": length, "acceptance_length_ci_low": NAN, "acceptance_length_ci_high": NAN,
        "draft_acceptance_length": NAN, "acceptance_rate": NAN, "acceptance_per_position": None,
        "acceptance_source": "none", "full_accept_fraction": NAN, "acceptance_unknown_windows": 0,
        "acceptance_length_request_mean": NAN, "acceptance_length_request_p10": NAN,
        "acceptance_length_request_p90": NAN,
    }
    assert out.keys() == expected.keys()
    assert all(same(out[k], v) for k, v in expected.items()), out


# --- source 1: per-request figures ------------------------------------------------------------------------


def test_request_source_pools_tokens_over_steps_and_skips_requests_without_steps() -> None:
    reqs = [
        mreq(40.0, spec(20, accepted_drafts=20, proposed_drafts=60, drafted_steps=20)),
        mreq(1.0, spec(1, accepted_drafts=0, proposed_drafts=3, drafted_steps=1)),  # one step, one token
        mreq(30.0, spec(0, accepted_drafts=5, proposed_drafts=9)),  # no verify step counted: left out
        mreq(50.0, spec(None, accepted_drafts=5, proposed_drafts=9)),  # no verify_steps at all: left out
        mreq(99.0, spec(33, accepted_drafts=66, proposed_drafts=99), ok=False),  # failed: left out
        mreq(NAN, spec(10, accepted_drafts=0, proposed_drafts=30)),  # no token count: left out
    ]
    out = acceptance(reqs)
    assert out["acceptance_source"] == "request"
    assert out["acceptance_length"] == pytest.approx(41 / 21)  # (40 + 1) tokens / (20 + 1) steps
    assert out["acceptance_rate"] == pytest.approx(20 / 63)  # (20 + 0) accepted / (60 + 3) proposed
    assert out["draft_acceptance_length"] == pytest.approx(1 + 20 / 21)  # 1 + (20 + 0) / (20 + 1)
    assert out["acceptance_length_request_mean"] == pytest.approx((2.0 + 1.0) / 2)  # 40/20 and 1/1


def test_acceptance_rate_only_from_requests_that_report_both_figures() -> None:
    reqs = [
        mreq(30.0, spec(10, accepted_drafts=20, proposed_drafts=40)),
        mreq(30.0, spec(10, accepted_drafts=None, proposed_drafts=40)),  # no accepted count
        mreq(30.0, spec(10, accepted_drafts=20, proposed_drafts=None)),  # no proposed count
    ]
    assert acceptance(reqs)["acceptance_rate"] == pytest.approx(20 / 40)


def test_request_percentiles_weigh_every_request_the_same() -> None:
    # taus 1, 2, ..., 11 (n_out = 10 i over 10 steps): numpy's linear percentile gives p10 = 2, p90 = 10
    reqs = [mreq(10.0 * i, spec(10)) for i in range(1, 12)]
    out = acceptance(reqs)
    assert out["acceptance_length_request_p10"] == pytest.approx(2.0)
    assert out["acceptance_length_request_p90"] == pytest.approx(10.0)
    assert out["acceptance_length_request_mean"] == pytest.approx(6.0)
    assert out["acceptance_length"] == pytest.approx(660 / 110)


@pytest.mark.parametrize("drafted, expected", [
    ((6, 8), 1 + (11 + 9) / (6 + 8)),  # vLLM's figure from the requests: 1 + sum accepted / sum drafting steps
    ((6, None), NAN),  # one request lacks drafting steps: no per-request figure (and no counters here)
])
def test_draft_acceptance_length_from_requests_needs_every_request(drafted: tuple[Any, Any], expected: float) -> None:
    reqs = [mreq(40.0, spec(29, accepted_drafts=11, drafted_steps=drafted[0])),
            mreq(40.0, spec(31, accepted_drafts=9, drafted_steps=drafted[1]))]
    got = acceptance(reqs)["draft_acceptance_length"]
    assert same(got, expected) or got == pytest.approx(expected)


def test_per_request_draft_length_comes_before_the_counters() -> None:
    reqs = [mreq(40.0, spec(29, accepted_drafts=11, drafted_steps=6)),
            mreq(40.0, spec(31, accepted_drafts=9, drafted_steps=8))]
    # counters that disagree (1 + 20 / 10 = 3.0): the per-request figure 1 + 20 / 14 stays
    out = acceptance(reqs, wins({"counters": vllm(80.0, 20.0, drafts=10.0, draft_tokens=40.0)}))
    assert out["draft_acceptance_length"] == pytest.approx(1 + 20 / 14)
    assert out["acceptance_source"] == "request" and out["acceptance_length"] == pytest.approx(80 / 60)


def test_request_interval_over_windows_and_over_launches() -> None:
    # three windows of one launch, two requests each: unit tokens 100, 120, 80 over steps 50, 40, 40
    reqs = [mreq(n, spec(s), repeat=rep) for rep, pairs in ((1, [(60, 30), (40, 20)]), (2, [(70, 20), (50, 20)]),
                                                            (3, [(30, 10), (50, 30)])) for n, s in pairs]
    out = acceptance(reqs)
    assert out["acceptance_length"] == pytest.approx(300 / 130)
    lo, hi = ratio_ci([100, 120, 80], [50, 40, 40])  # 2.308 exp(+-4.303 * 0.320 / 2.308): (1.270, 4.192)
    assert (out["acceptance_length_ci_low"], out["acceptance_length_ci_high"]) == (pytest.approx(lo), pytest.approx(hi))
    assert lo == pytest.approx(1.270, abs=1e-3) and hi == pytest.approx(4.192, abs=1e-3)
    # two launches, two windows each: the unit is the launch (tokens 100 + 120, 80 + 90 over 90, 70 steps)
    reqs = [mreq(n, spec(s), launch=la, repeat=rep)
            for la, rep, n, s in ((1, 1, 100, 50), (1, 2, 120, 40), (2, 1, 80, 40), (2, 2, 90, 30))]
    out = acceptance(reqs, n_launches=2)
    lo, hi = ratio_ci([220, 170], [90, 70])
    assert (out["acceptance_length_ci_low"], out["acceptance_length_ci_high"]) == (pytest.approx(lo), pytest.approx(hi))


# --- full-accept fraction and per-position acceptance from histograms ------------------------------------


@pytest.mark.parametrize("specs, expected", [
    # k = 30 / 10 = 3: H[3] = 4 of 10 steps; k = 60 / 20 = 3: H[3] = 5 of 20; pooled 9 / 30
    ([spec(10, accepted_drafts=15, proposed_drafts=30, accept_histogram=[2, 3, 1, 4]),
      spec(20, accepted_drafts=30, proposed_drafts=60, accept_histogram=[5, 5, 5, 5])], 9 / 30),
    # a request without a histogram is skipped, the next one still counts
    ([spec(10, accepted_drafts=15, proposed_drafts=30),
      spec(20, accepted_drafts=30, proposed_drafts=60, accept_histogram=[5, 5, 5, 5])], 5 / 20),
    ([spec(10, accepted_drafts=7, proposed_drafts=10, accept_histogram=[3, 7])], 7 / 10),  # k = 1
    ([spec(1, accepted_drafts=1, proposed_drafts=1, accept_histogram=[0, 1])], 1.0),  # one step, all accepted
    # k = round(2 / 10) = 0: a step that accepted its zero drafts is no full accept
    ([spec(10, accepted_drafts=1, proposed_drafts=2, accept_histogram=[9, 1])], 0.0),
    ([spec(10, accepted_drafts=15, proposed_drafts=30)], NAN),  # no histogram at all
])
def test_full_accept_fraction_from_histograms(specs: list[dict[str, Any]], expected: float) -> None:
    out = acceptance([mreq(20.0, sp) for sp in specs])
    assert same(out["full_accept_fraction"], expected) or out["full_accept_fraction"] == pytest.approx(expected)


def test_histograms_come_before_counters_for_the_full_accept_fraction() -> None:
    reqs = [mreq(20.0, spec(10, accepted_drafts=15, proposed_drafts=30, accept_histogram=[2, 3, 1, 4]))]
    w = wins({"counters": vllm(20.0, 10.0, drafts=10.0, draft_tokens=30.0), "per_position_accepted": [9, 8, 7]})
    out = acceptance(reqs, w)
    assert out["full_accept_fraction"] == pytest.approx(4 / 10)  # not the counters' 7 / 10
    assert out["acceptance_per_position"] == pytest.approx([9 / 10, 8 / 10, 7 / 10])  # counters win here


# --- source 2: window counters -------------------------------------------------------------------------------


def test_counter_reference_example_full_accept() -> None:
    # docs/metrics.md: drafts 28, draft tokens 112 (k = 4), accepted 73 of 128; position 3 accepted 12 times
    w = wins({"counters": vllm(128.0, 73.0, drafts=28.0, draft_tokens=112.0),
              "per_position_accepted": [25, 20, 16, 12]})
    out = acceptance([mreq(128.0)], w)
    assert out["full_accept_fraction"] == pytest.approx(12 / 28)
    assert out["acceptance_length"] == pytest.approx(128 / 55)


def test_counters_sum_over_windows() -> None:
    w = wins({"counters": vllm(60.0, 30.0, drafts=10.0, draft_tokens=40.0), "per_position_accepted": [8, 6, 4, 2]},
             {"repeat": 2, "counters": vllm(40.0, 10.0, drafts=10.0, draft_tokens=40.0),
              "per_position_accepted": [5, 3, 1, 1]})
    out = acceptance([mreq(60.0), mreq(40.0, repeat=2)], w)
    assert out["acceptance_source"] == "counters"
    assert out["acceptance_length"] == pytest.approx(100 / 60)  # (60 + 40) / ((60 - 30) + (40 - 10))
    assert out["acceptance_rate"] == pytest.approx(40 / 80)
    assert out["draft_acceptance_length"] == pytest.approx(1 + 40 / 20)
    assert out["acceptance_per_position"] == pytest.approx([13 / 20, 9 / 20, 5 / 20, 3 / 20])
    assert out["full_accept_fraction"] == pytest.approx(3 / 20)


def test_a_single_one_token_draft() -> None:
    # one drafting step of one token, accepted: 2 tokens in 1 step; position 0 accepted once of 1 draft
    w = wins({"counters": vllm(2.0, 1.0, drafts=1.0, draft_tokens=1.0), "per_position_accepted": [1]})
    out = acceptance([mreq(2.0)], w)
    assert out["acceptance_length"] == pytest.approx(2.0)
    assert out["acceptance_per_position"] == pytest.approx([1.0])
    assert out["full_accept_fraction"] == pytest.approx(1.0)


@pytest.mark.parametrize("draft_tokens, per_position", [
    (120.0, [9, 8, 7]),  # k = 120 / 30 = 4 drafts per step, but only 3 positions reported
    (10.0, [9, 8, 7]),  # k = round(10 / 30) = 0: no whole draft per step
])
def test_full_accept_needs_a_position_for_the_last_draft(draft_tokens: float, per_position: list[int]) -> None:
    w = wins({"counters": vllm(100.0, 24.0, drafts=30.0, draft_tokens=draft_tokens),
              "per_position_accepted": per_position})
    out = acceptance([mreq(100.0)], w)
    assert out["acceptance_per_position"] == pytest.approx([9 / 30, 8 / 30, 7 / 30])
    assert math.isnan(out["full_accept_fraction"])


def test_per_position_without_drafts_is_empty() -> None:
    w = wins({"counters": vllm(10.0, 0.0, drafts=0.0, draft_tokens=0.0), "per_position_accepted": [0, 0]})
    out = acceptance([mreq(10.0)], w)
    assert out["acceptance_length"] == pytest.approx(1.0)  # 10 tokens in 10 steps
    assert out["acceptance_per_position"] is None and math.isnan(out["full_accept_fraction"])


def test_drafter_that_accepts_nothing_is_one_not_unknown() -> None:
    w = wins({"counters": vllm(50.0, 0.0, drafts=50.0, draft_tokens=200.0), "per_position_accepted": [0, 0, 0, 0]})
    out = acceptance([mreq(50.0)], w)
    assert out["acceptance_unknown_windows"] == 0
    assert out["acceptance_length"] == pytest.approx(1.0) and out["acceptance_rate"] == 0.0
    assert out["acceptance_per_position"] == [0.0] * 4 and out["full_accept_fraction"] == 0.0


def test_verify_step_counter_of_a_command_engine() -> None:
    # engine.acceptance_metric: 90 tokens in 30 counted verify steps
    w = wins({"counters": {"generation_tokens": 90.0, "verify_steps": 30.0}})
    out = acceptance([mreq(90.0)], w)
    assert (out["acceptance_source"], out["acceptance_length"]) == ("counters", pytest.approx(3.0))
    assert math.isnan(out["acceptance_rate"]) and math.isnan(out["draft_acceptance_length"])


def test_window_with_no_usable_steps_is_dropped_not_spoiling_the_others() -> None:
    w = wins({"counters": {"generation_tokens": 90.0, "verify_steps": 30.0}},
             {"repeat": 2, "counters": {"generation_tokens": 50.0, "verify_steps": NAN}})
    assert acceptance([mreq(90.0), mreq(50.0, repeat=2)], w)["acceptance_length"] == pytest.approx(3.0)


def test_counters_with_zero_steps_give_no_acceptance() -> None:
    # every generated token counted as accepted: no target step, tau undefined, source none
    out = acceptance([mreq(10.0)], wins({"counters": vllm(10.0, 10.0)}))
    assert out["acceptance_source"] == "none" and math.isnan(out["acceptance_length"])


def test_generation_tokens_fall_back_to_the_windows_successful_usage() -> None:
    # window 1 of launch 2 has no generation_tokens delta: its two successful requests carried 60 + 40;
    # a failed request's 50 tokens and launch 1's requests do not count
    reqs = [mreq(60.0, launch=2), mreq(40.0, launch=2), mreq(50.0, launch=2, ok=False), mreq(999.0, launch=1)]
    out = acceptance(reqs, wins({"launch": 2, "counters": vllm(None, 50.0)}), n_launches=2)
    assert out["acceptance_length"] == pytest.approx(100 / 50)
    # without a launch column the window belongs to launch 1
    reqs = [mreq(60.0), mreq(40.0), mreq(999.0, launch=2)]
    out = acceptance(reqs, wins({"counters": vllm(None, 50.0)}), n_launches=2)
    assert out["acceptance_length"] == pytest.approx(100 / 50)


def test_counters_without_requests_still_count() -> None:
    # a window whose requests are not in the list: nothing to cross-check generation_tokens against
    out = acceptance([], wins({"counters": vllm(60.0, 30.0)}))
    assert out["acceptance_length"] == pytest.approx(2.0) and out["acceptance_unknown_windows"] == 0


def test_counter_interval_over_windows_and_over_launches() -> None:
    # three windows of one launch: (gen, accepted) -> tokens 100, 120, 80 over steps 50, 40, 40
    w = wins(*({"repeat": rep, "counters": vllm(g, a)} for rep, g, a in ((1, 100, 50), (2, 120, 80), (3, 80, 40))))
    out = acceptance([], w)
    lo, hi = ratio_ci([100, 120, 80], [50, 40, 40])
    assert out["acceptance_source"] == "counters" and out["acceptance_length"] == pytest.approx(300 / 130)
    assert (out["acceptance_length_ci_low"], out["acceptance_length_ci_high"]) == (pytest.approx(lo), pytest.approx(hi))
    # two launches of two windows: units are launches, tokens 220 and 170 over 90 and 70 steps
    w = wins(*({"launch": la, "repeat": rep, "counters": vllm(g, a)}
               for la, rep, g, a in ((1, 1, 100, 50), (1, 2, 120, 80), (2, 1, 80, 40), (2, 2, 90, 60))))
    out = acceptance([], w, n_launches=2)
    lo, hi = ratio_ci([220, 170], [90, 70])
    assert out["acceptance_length"] == pytest.approx(390 / 160)
    assert (out["acceptance_length_ci_low"], out["acceptance_length_ci_high"]) == (pytest.approx(lo), pytest.approx(hi))


# --- missing and reset counters: unknown, never read as 0 or 1.0 -------------------------------------------


GOOD = {"counters": vllm(60.0, 30.0), "repeat": 9}  # tau 2.0, no requests to compare against


@pytest.mark.parametrize("bad", [
    {"counters": {"generation_tokens": 60.0}},  # spec-decode counters missing (no speculative config)
    {"counters": vllm(60.0, -5.0)},  # a counter went backwards
    {"counters": vllm(60.0, 30.0, drafts=10.0, draft_tokens=40.0), "per_position_accepted": [5, -1]},
    {"counters": vllm(59.0, 30.0)},  # fewer tokens than the window's responses carried (60): a restart
])
def test_missing_or_reset_counters_are_unknown(bad: dict[str, Any]) -> None:
    # two bad windows before a good one: both counted unknown, the good one still read
    out = acceptance([mreq(60.0), mreq(60.0, repeat=2)], wins(bad, {**bad, "repeat": 2}, GOOD))
    assert out["acceptance_unknown_windows"] == 2
    assert out["acceptance_source"] == "counters" and out["acceptance_length"] == pytest.approx(2.0)


def test_reset_tolerance_boundary() -> None:
    # 1% below the delivered 100 tokens (99) is rounding, not a restart
    out = acceptance([mreq(100.0)], wins({"counters": vllm(99.0, 33.0)}))
    assert out["acceptance_unknown_windows"] == 0 and out["acceptance_length"] == pytest.approx(99 / 66)


def test_window_without_counters_before_one_with_counters() -> None:
    out = acceptance([mreq(60.0, repeat=2)], wins({"counters": None}, {"repeat": 2, "counters": vllm(60.0, 30.0)}))
    assert out["acceptance_length"] == pytest.approx(2.0)


# --- acceptance.csv ---------------------------------------------------------------------------------------


def test_request_acceptance_table_rows_and_columns() -> None:
    base = {"variant": "ngram", "category": "code", "point_id": "pt", "window_id": "w1", "warmup": False,
            "error": None, "chunk_tokens": [1, 37], "output_tokens": 40}  # usage comes before the chunks
    rows = [
        {**base, "repeat": 1, "index": 0, "prompt_id": "a", "spec": None},  # no figures
        {**base, "repeat": 1, "index": 1, "prompt_id": "b", "spec": {"verify_steps": 0}},  # no step counted
        {**base, "repeat": 1, "index": 2, "prompt_id": "c", "error": "timeout", "spec": {"verify_steps": 10}},
        {**base, "repeat": 1, "index": 3, "prompt_id": "d",
         "spec": {"verify_steps": 29, "drafted_steps": 6, "accepted_drafts": 11, "proposed_drafts": 24,
                  "source": "vllm"}},
        # usage missing: the tokens per chunk (1 + 29) stand in
        {**base, "repeat": 2, "index": 0, "prompt_id": "e", "output_tokens": None, "chunk_tokens": [1, 29],
         "window_id": "w2", "spec": {"verify_steps": 10}},
    ]
    table = request_acceptance_table(pd.DataFrame(rows), pd.DataFrame({"window_id": ["w1", "w2"]}))
    assert list(table.columns) == REQUEST_ACCEPTANCE_COLUMNS
    got = table.to_dict("records")
    assert got[0] == {"variant": "ngram", "category": "code", "point_id": "pt", "window_id": "w1", "repeat": 1,
                      "index": 3, "prompt_id": "d", "output_tokens": 40.0, "verify_steps": 29, "drafted_steps": 6,
                      "accepted_drafts": 11, "proposed_drafts": 24, "acceptance_length": pytest.approx(40 / 29),
                      "draft_acceptance_length": pytest.approx(1 + 11 / 6), "source": "vllm"}
    assert len(got) == 2
    second = got[1]
    assert (second["prompt_id"], second["window_id"]) == ("e", "w2")
    assert (second["output_tokens"], second["source"]) == (30.0, "")
    assert got[1]["acceptance_length"] == pytest.approx(3.0) and math.isnan(got[1]["draft_acceptance_length"])


def test_request_acceptance_table_without_figures_keeps_its_columns() -> None:
    rows = [{"variant": "base", "window_id": "w1", "repeat": 1, "index": 0, "output_tokens": 10, "error": None}]
    table = request_acceptance_table(pd.DataFrame(rows), pd.DataFrame({"window_id": ["w1"]}))
    assert table.empty and list(table.columns) == REQUEST_ACCEPTANCE_COLUMNS

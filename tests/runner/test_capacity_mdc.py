"""Known answer, end to end: capacity under a TTFT-percentile SLO against an M/D/c queue.

The stand-in runs as a queue (--slots 2 --service-ms S): requests wait in FIFO order for one of 2 slots and
hold it S ms, so a request's TTFT is its wait plus S. Two variants differ only in S (150 ms for the
baseline, 100 ms for the "drafter"). specbench offers both the same seeded Poisson arrivals at 6, 12 and 18
req/s, refines by bisection (capacity.search) and reports the capacity under "p90 TTFT <= 0.3 s". The test
simulates the same M/D/2 queue on the same arrivals (specbench's seeded schedule: the same times, warmup
left out the same way) and bisects the rate at which the simulated p90 crosses 0.3 s. specbench's capacity
must match it within 15% for both variants, and the capacity gain must be their ratio.

Why this cannot flake on a loaded 2-core machine: the service times are long (100 and 150 ms) and the SLO
sits at 3 and 2 service times, on the steep part of the p90-vs-rate curve, where a latency offset moves the
crossing little. Simulating with every TTFT 20 ms longer moves both capacities by under 10%, and 40 ms by under
15% (asserted below on the simulation itself); the stand-in and client add about 1-5 ms on loopback. The
percentile is taken on the same arrivals as the simulation (common random numbers), so sampling noise does not
enter the comparison, and nothing waits on a sleep or a wall-clock ratio. The send-lag gate's bound is raised
to 200 ms (its default here, 10% of 0.3 s, excludes points of a 2-core machine under 15x load): latency counts
from the planned arrival, and the 20-40 ms figures above are that lag's effect.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.plan.arrivals import arrival_offsets
from specbench.runner import RunOptions, run_matrix
from tests.conftest import make_model_dir, standin_config

SLOTS = 2
SERVICE_S = {"base": 0.150, "fast": 0.100}
THRESHOLD_S = 0.3
WARMUP, MEASURED = 10, 60
TOLERANCE = 0.15


def mdc_ttft(arrivals: list[float], slots: int, service_s: float, extra_s: float = 0.0) -> list[float]:
    """FIFO M/D/c: each arrival takes the earliest free slot; TTFT = wait + service (+ a fixed overhead)."""
    free = [0.0] * slots
    out = []
    for t in arrivals:
        start = max(t, heapq.heappop(free))
        heapq.heappush(free, start + service_s)
        out.append(start + service_s - t + extra_s)
    return out


def simulated_p90(rate: float, service_s: float, extra_s: float = 0.0) -> float:
    arrivals = arrival_offsets("poisson", WARMUP + MEASURED, rate, seed=0, fit_from=WARMUP)  # sweep.seed 0, repeat 1
    return float(np.percentile(mdc_ttft(arrivals, SLOTS, service_s, extra_s)[WARMUP:], 90))


def simulated_capacity(service_s: float, extra_s: float = 0.0) -> float:
    """The rate where the simulated p90 TTFT crosses the threshold (bisection to 1e-6 req/s)."""
    lo, hi = 0.5, SLOTS / service_s
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if simulated_p90(mid, service_s, extra_s) <= THRESHOLD_S else (lo, mid)
    return lo


def test_the_simulation_is_robust_to_client_overhead() -> None:
    for s in SERVICE_S.values():
        exact = simulated_capacity(s)
        assert abs(simulated_capacity(s, 0.020) / exact - 1) < 0.10
        assert abs(simulated_capacity(s, 0.040) / exact - 1) < TOLERANCE


def test_capacity_matches_the_simulated_queue(tmp_path: Path, port: int,
                                              no_survivors: Callable[..., None]) -> None:
    model = make_model_dir(tmp_path / "model")
    variants = [{"name": "base", "drafter": "autoregressive", "baseline": True},
                {"name": "fast", "drafter": "ngram", "params": {"num_tokens": 3}}]
    faults = {v: ["--slots", str(SLOTS), "--service-ms", f"{s * 1000:g}"] for v, s in SERVICE_S.items()}
    cfg = standin_config(model, port, variants=variants, faults=faults, name="mdc",
                         sweep={"output_lens": [4], "load": {"kind": "open", "rates": [6, 12, 18],
                                                             "requests_per_rate": MEASURED,
                                                             "warmup_requests": WARMUP,
                                                             "max_send_lag_s": 0.2}})  # see below
    del cfg["sweep"]["concurrency"]
    cfg["slo"] = {"ttft_s": {"p90": THRESHOLD_S}}
    cfg["capacity"] = {"search": True, "tolerance": 0.05}
    result = run_matrix(parse_config(cfg), RunOptions(out=tmp_path / "run", skip_preflight=True))
    assert result.status == {"base": "done", "fast": "done"}
    no_survivors()
    run = tmp_path / "run"

    cap = pd.read_csv(run / "capacity.csv").set_index("variant")
    expected = {v: simulated_capacity(s) for v, s in SERVICE_S.items()}
    # the estimate where the percentiles cross inside the measured rates; else a bound (capacity.csv's
    # crossing_bound: "fast" can meet the limit up to 18.65 req/s, above the highest rate 18, and its bound
    # used to be written, and read here, as the estimate)
    measured = {v: float(cap.loc[v, "crossing_offered_req_s"]) if cap.loc[v, "crossing_bound"] != "at_least"
                else float(cap.loc[v, "crossing_bound_offered_req_s"]) for v in SERVICE_S}
    # 60 requests decide few rates at p90 (tests/report/test_openloop_section_known_answer.py decides them)
    for v in SERVICE_S:
        if cap.loc[v, "crossing_bound"] == "at_least":  # the truth is at least the bound, within the tolerance
            assert expected[v] > measured[v] * (1 - TOLERANCE), (v, measured[v], expected[v])
        else:
            assert abs(measured[v] / expected[v] - 1) < TOLERANCE, (v, measured[v], expected[v])
        assert not cap.loc[v, "capacity_offered_req_s"] > measured[v]  # the estimate stays inside the bracket
        assert not cap.loc[v, "missed_offered_req_s"] < measured[v]
        # the three planned rates at least: whether the search adds one depends on which rates 60 requests
        # decide, which moves with the machine's timing (it failed on a quiet machine, passed under load); the
        # search itself is pinned deterministically by tests/report/test_openloop_section_known_answer.py and
        # tests/metrics/test_openloop.py
        assert cap.loc[v, "rates_measured"] >= 3
    # the gain is defined only where both estimates cross inside the measured rates (capacity_gain), which at 60
    # requests per rate moves with the machine's timing; where defined it is the ratio of the estimates
    if math.isfinite(gain := float(cap.loc["fast", "gain"])):
        assert gain == pytest.approx(measured["fast"] / measured["base"], rel=1e-12)
    assert measured["fast"] > 1.3 * measured["base"]  # the shorter service time really pays

    # every variant was offered the same schedule at the rates both measured
    recs = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    sched: dict[str, dict[float, list[float]]] = {v: {} for v in SERVICE_S}
    for r in recs:
        if r["rate"] is not None:
            sched[r["variant"]].setdefault(r["rate"], []).append(r["scheduled_s"])
    for rate in (6.0, 12.0, 18.0):
        assert sorted(sched["base"][rate]) == sorted(sched["fast"][rate]) == \
            arrival_offsets("poisson", WARMUP + MEASURED, rate, seed=0, fit_from=WARMUP)
    # per rate: goodput columns, a saturation flag, the send-time error
    pts = pd.read_csv(run / "open_loop.csv")
    assert {"goodput_req_s", "goodput_req_s_ci_low", "goodput_tok_s", "attainment", "saturated",
            "send_lag_p99_s"} <= set(pts.columns)
    assert bool(pts[(pts.variant == "base") & (pts.rate == 18.0)]["saturated"].item())  # 18 > 2 / 0.15 req/s
    assert not pts[pts.rate == 6.0]["saturated"].any()
    assert "fast" in (verdict := (run / "report.md").read_text().split("Verdict per SLO")[1]) and "capacity" in verdict

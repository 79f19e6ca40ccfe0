"""A closed-loop window's measured interval (specbench/metrics/steady.py; docs/metrics.md, "The measured
interval"): throughput C times C=1's on a stand-in whose speed does not depend on the load, at every level
the prompts allow (issue 49's goal, run through the product's own closed loop on a virtual clock); known
answers for the interval and the effective concurrency; `outliers` blind to the drain; `below_concurrency`
naming its cause."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from specbench import metrics
from specbench.client.stream import run_closed_loop
from specbench.config import parse_config
from specbench.metrics import CellOptions, compute_cells
from specbench.metrics.steady import WindowRequests, steady_window
from specbench.plan.prompts import Prompt
from specbench.plan.windows import PlannedRequest, build_sweep, window_requests
from specbench.shared.schema import RequestRecord, WindowRecord

CONFIG: dict[str, Any] = {
    "model": {"path": "/m"},
    "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True}],
    "sweep": {"output_lens": [64], "concurrency": [1, 4, 8], "waves": 1},
}
# the demo's shape: 10 prompts in one category (at C=8 a single pass ran 8, then 2)
PROMPTS = [Prompt(id=f"p{i}", category="writing", text=f"prompt {i}") for i in range(10)]


class VirtualServer:
    """Stands in for `stream_planned`: a request of prompt p streams one token every `per_token(p, in_flight)`
    seconds of a virtual clock that moves only when every request in flight waits on it (the next to finish
    ends; no real time, no sleeps). `in_flight` is counted at the request's send."""

    def __init__(self, per_token: Callable[[str, int], float]):
        self.per_token, self.now, self.seq = per_token, 0.0, 0
        self.flying: list[tuple[float, int, asyncio.Future[None]]] = []

    async def stream(self, ep: Any, planned: PlannedRequest) -> RequestRecord:
        sent, n = self.now, planned.spec.max_tokens
        step = self.per_token(planned.fields["prompt_id"], len(self.flying) + 1)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self.flying, (sent + n * step, self.seq, done))
        self.seq += 1
        await done
        offsets = [step * (j + 1) for j in range(n)]
        return RequestRecord(**planned.fields, t_send=sent, ttft_s=offsets[0], e2e_s=offsets[-1],
                             chunk_offsets_s=offsets, chunk_tokens=[1] * n, output_tokens=n, max_tokens=n)

    async def run(self, planned: list[PlannedRequest], concurrency: int) -> list[RequestRecord]:
        loop = asyncio.ensure_future(run_closed_loop(None, planned, concurrency, lambda r: None))  # type: ignore[arg-type]
        while not loop.done():
            seen, still = -1, 0
            while still < 20 and not loop.done():  # every worker has sent or waits: nothing changes any more
                await asyncio.sleep(0)
                still, seen = (still + 1, seen) if len(self.flying) == seen else (0, len(self.flying))
            if self.flying:
                end, _, done = heapq.heappop(self.flying)
                self.now = end
                done.set_result(None)
        return loop.result()


def _window(per_token: Callable[[str, int], float], c: int, monkeypatch: pytest.MonkeyPatch) -> list[RequestRecord]:
    cfg = parse_config(CONFIG)
    sweep = build_sweep(cfg.sweep, PROMPTS)
    point = next(p for p in sweep.points if p.concurrency == c)
    server = VirtualServer(per_token)
    monkeypatch.setattr("specbench.client.stream.stream_planned", server.stream)
    return asyncio.run(server.run(window_requests(cfg.sweep, sweep, point, "base", 1), c))


def _speed(prompt_id: str, in_flight: int) -> float:
    """Load-independent: each prompt its own speed (18-27 ms a token), whatever is in flight."""
    return 0.018 + 0.001 * int(prompt_id[1:])


def test_throughput_is_c_times_c1_at_every_level_on_a_load_independent_standin(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 49's goal: throughput(C) / (C x throughput(1)) >= 0.95 at C = 4 and 8 (10 prompts). Before, a
    window of one pass drained (8 then 2 at C=8) and its throughput counted the drain: 0.62 at C=8."""
    tp = {c: metrics.window_throughput(_window(_speed, c, monkeypatch)) for c in (1, 4, 8)}
    assert all(x is not None for x in tp.values()), tp
    for c in (4, 8):
        ratio = tp[c] / (c * tp[1])  # type: ignore[operator]
        assert 0.95 <= ratio <= 1.05, (c, ratio)


def test_measured_interval_and_effective_concurrency_known_answer() -> None:
    """C=2, four requests of 2 s and one token a second: sends at 0, 0, 2, 2; finishes at 2, 2, 4, 4. The
    interval runs from the first completion (2) to the last send (2): empty, so the whole window [0, 4] with
    2 in flight. A fifth request sent at 4 (finishing at 6) opens [2, 4]: 2 in flight, 4 tokens in 2 s, the
    two requests sent at 2 wholly inside it. With only one request after the first completion (sent at 2,
    the last send) none runs wholly inside: the whole window again."""
    def arrays(sends: list[float]) -> WindowRequests:
        t = np.array(sends)
        return WindowRequests(t, np.full(t.size, 2.0), np.ones(t.size, dtype=bool), np.full(t.size, 2.0),
                [[1.0, 2.0]] * t.size, [[1, 1]] * t.size)

    four = steady_window(2, arrays([0.0, 0.0, 2.0, 2.0]))
    assert not four.interval and (four.start, four.end) == (0.0, 4.0)
    assert four.effective_concurrency == pytest.approx(2.0) and four.throughput == pytest.approx(8 / 4)
    five = steady_window(2, arrays([0.0, 0.0, 2.0, 2.0, 4.0]))
    assert five.interval and (five.start, five.end) == (2.0, 4.0)
    assert five.effective_concurrency == pytest.approx(2.0)
    assert five.throughput == pytest.approx(4 / 2)  # tokens at 3 and 4 of the two requests sent at 2
    assert list(five.steady) == [False, False, True, True, False]  # the ramp's two, the drain's one left out
    three = steady_window(2, arrays([0.0, 0.0, 2.0]))
    assert not three.interval and list(three.steady) == [True] * 3 and three.throughput == pytest.approx(6 / 4)
    # a window that ran one request at a time at C=2 (a server cap): half the C it names
    half = steady_window(2, arrays([0.0, 2.0, 4.0, 6.0]))
    assert half.effective_concurrency == pytest.approx(1.0)


def _cells(records: list[RequestRecord], c: int) -> pd.DataFrame:
    req = pd.DataFrame([r.model_dump() for r in records])
    wid = records[0].window_id
    win = pd.DataFrame([WindowRecord(window_id=wid, variant="base", cell_id=records[0].cell_id,
                                     point_id=records[0].point_id, repeat=1, t_start=0.0, t_end=1.0,
                                     n_requests=len(records)).model_dump()])
    return compute_cells(req, win, CellOptions(baseline="base"))


def test_outliers_do_not_fire_on_the_drain(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server whose requests run faster with fewer in flight (the drain's last requests alone): the drain
    is left out of the latency figures, so `outliers` does not flag it; the requests stay in the records."""
    records = _window(lambda p, k: 0.010 * k, 8, monkeypatch)
    row = _cells(records, 8).iloc[0]
    assert row["n_requests"] == len(records) == 30  # 3 passes of 10: (waves + 2) x C = 24 needed
    assert row["steady_requests"] == 30 - 8 - 8  # the first 8 sent ramp up, the last 8 drain
    assert row["outlier_count"] == 0 and "outliers" not in row["warnings"]
    assert row["effective_concurrency"] == pytest.approx(8.0)


def test_below_concurrency_names_too_few_requests() -> None:
    """A C=8 window of 10 requests (one pass of the demo's prompts, as before issue 49): no request was sent
    after the first finished, so no steady interval; the warning says so and what to change."""
    recs = [RequestRecord(variant="base", cell_id="base|w|in-|out64|c8|t0", point_id="w|in-|out64|c8|t0",
                          window_id="base|w|in-|out64|c8|t0|r1", category="w", prompt_id=f"p{i}", output_len=4,
                          concurrency=8, repeat=1, index=i, t_send=0.0 if i < 8 else 1.0, ttft_s=0.25,
                          e2e_s=1.0, chunk_offsets_s=[0.25, 0.5, 0.75, 1.0], chunk_tokens=[1] * 4, output_tokens=4)
            for i in range(10)]
    row = _cells(recs, 8).iloc[0]
    assert row["effective_concurrency"] == pytest.approx(5.0)  # 8 for 1 s, then 2 for 1 s
    assert "below_concurrency" in row["warnings"] and "too few requests for C" in row["warnings"]


def test_a_steady_window_is_predicted_without_a_tail() -> None:
    """The time model's window speedup (metrics.makespan.window_speedup) of a window measured over its steady
    interval is the inverse of its requests' mean time: the spread of acceptance costs it no tail, where a
    window measured whole (fewer than 2C + 1 requests) keeps the makespan's tail."""
    from specbench.metrics.forced_surface import TimeModel
    from specbench.metrics.makespan import Spread, has_steady_interval, tail_factor, window_speedup

    model, pool, c = TimeModel(0.2, 0.8), [1.0, 1.5, 2.0, 4.0], 4
    mean_time = sum(0.2 + 0.8 / a for a in pool) / len(pool)
    assert has_steady_interval(3 * c, c) and not has_steady_interval(2 * c, c) and not has_steady_interval(10, 1)
    steady = window_speedup(model, pool, 6 * c, c, draws=2000)
    whole = window_speedup(model, pool, 2 * c, c, draws=2000)
    assert steady == pytest.approx(1 / mean_time, rel=0.02)
    assert whole < 0.95 / mean_time  # the tail of a whole window
    assert tail_factor(model, Spread(pool, 6.0 * c), c) == pytest.approx(1.0, abs=0.02)

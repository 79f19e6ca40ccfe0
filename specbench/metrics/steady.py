"""A closed-loop window's steady state (docs/metrics.md, "The measured interval"): the interval in which the
window keeps C requests in flight, the requests that finished inside it, the window's output throughput over
it and its effective concurrency.

A closed loop sends C requests at once and then one each time one finishes, until none is left to send: from
the first completion to the last send every finished request is replaced at once, so C are in flight (fewer
only while the loop waits for a prompt already in flight, or a request is being replaced). The C requests sent
at the start ramp up together (their prefills side by side); after the last send the window drains (C - 1,
C - 2, ... in flight). Throughput counts the tokens that arrived inside the interval; latency figures the
requests that ran wholly inside it (the C of the ramp and the C of the drain left out). What is left out is
counted (`steady_requests` against `n_requests`), never dropped from the records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specbench.metrics.common import NAN, as_float
from specbench.metrics.requests import request_output_tokens, window_throughput_arrays
from specbench.metrics.warnings import EFFECTIVE_CONCURRENCY_SHARE, CellWarning, WarningCode
from specbench.shared.schema import RequestRecord


@dataclass(frozen=True)
class SteadyWindow:
    """One window's measured interval and what it gives. `steady[i]`: request i ran inside the interval, sent
    at or after its start and finished by its end (its latency figures count). Without an interval (no request
    ran wholly inside it: fewer requests than 2C + 1, e.g. windows planned before issue 49) the whole window
    is measured, from its first send to its last finish, as before the steady state was defined; `interval`
    says which (True at C=1, whose whole window is steady)."""

    start: float
    end: float
    interval: bool  # True: [first completion, last send]; False: the whole window (no steady interval)
    steady: np.ndarray  # bool per request
    throughput: float  # output tokens of successful requests arriving in (start, end] / (end - start)
    effective_concurrency: float  # time-weighted requests in flight over [start, end]


def measured_interval(t_send: np.ndarray, finish: np.ndarray) -> tuple[float, float] | None:
    """[first completion, last send] of a closed-loop window; None when it is empty (no request was sent
    after the first finished)."""
    done = finish[np.isfinite(finish)]
    sent = t_send[np.isfinite(t_send)]
    if done.size == 0 or sent.size == 0:
        return None
    start, end = float(done.min()), float(sent.max())
    return (start, end) if end > start else None


def in_flight_mean(t_send: np.ndarray, finish: np.ndarray, start: float, end: float) -> float:
    """Effective concurrency = sum_i |[send_i, finish_i] n [start, end]| / (end - start): the time-weighted
    number of requests in flight (a request whose end is unknown is left out)."""
    if not end > start:
        return NAN
    known = np.isfinite(t_send) & np.isfinite(finish)
    overlap = np.clip(np.minimum(finish[known], end) - np.maximum(t_send[known], start), 0.0, None)
    return float(overlap.sum()) / (end - start)


def tokens_between(t_send: np.ndarray, ok: np.ndarray, chunk_offsets: Sequence[Sequence[float] | np.ndarray],
                   chunk_tokens: Sequence[Sequence[int] | np.ndarray], start: float, end: float) -> float:
    """Output tokens of the successful requests whose chunks arrived (send + offset) in (start, end]: a token
    that arrived with the first completion belongs to the ramp."""
    total = 0.0
    for s, good, off, k in zip(t_send, ok, chunk_offsets, chunk_tokens):
        n = min(len(off), len(k))
        if not good or n == 0:
            continue
        at = s + np.asarray(off, dtype=float)[:n]
        total += float(np.asarray(k, dtype=float)[:n][(at > start) & (at <= end)].sum())
    return total


@dataclass(frozen=True)
class WindowRequests:
    """A window's requests as arrays, one entry per request: send time, end-to-end latency, success, output
    tokens, and each request's chunk arrival offsets and token counts."""

    t_send: np.ndarray
    e2e: np.ndarray
    ok: np.ndarray
    n_out: np.ndarray
    chunk_offsets: Sequence[Sequence[float] | np.ndarray]
    chunk_tokens: Sequence[Sequence[int] | np.ndarray]


def steady_window(concurrency: int, w: WindowRequests) -> SteadyWindow:
    """One closed-loop window's measured interval, its requests inside it, throughput and effective
    concurrency. At C=1 the whole window is steady: one request in flight from its first send to its last
    finish, no ramp and no drain."""
    t_send, e2e, ok, n_out = w.t_send, w.e2e, w.ok, w.n_out
    chunk_offsets, chunk_tokens = w.chunk_offsets, w.chunk_tokens
    finish = t_send + e2e
    span = measured_interval(t_send, finish) if concurrency > 1 else None
    if span is not None:
        start, end = span
        steady = np.isfinite(finish) & (t_send >= start) & (finish <= end)
        if steady.any():  # an interval no request ran wholly inside is a sliver of the ramp and the drain
            tokens = tokens_between(t_send, ok, chunk_offsets, chunk_tokens, start, end)
            return SteadyWindow(start, end, True, steady, tokens / (end - start),
                                in_flight_mean(t_send, finish, start, end))
    # C=1, or no steady interval: the whole window, first send to last finish, every request
    start = float(np.nanmin(t_send)) if t_send.size and np.isfinite(t_send).any() else NAN
    end = float(np.nanmax(finish)) if np.isfinite(finish).any() else NAN
    return SteadyWindow(start, end, concurrency <= 1, np.ones(t_send.size, dtype=bool),
                        window_throughput_arrays(t_send, e2e, n_out, ok), in_flight_mean(t_send, finish, start, end))


def window_throughput(records: Sequence[RequestRecord]) -> float | None:
    """A window's output throughput from its RequestRecords (warmup ignored), as cells.csv computes it: over
    the measured interval for a closed loop (`steady_window`), first send to last finish for an open one; None
    if undefined. Used by the runner's adaptive mode while a cell is being measured."""
    rs = [r for r in records if not r.warmup]
    if not rs:
        return None
    t_send, e2e = np.array([r.t_send for r in rs]), np.array([as_float(r.e2e_s) for r in rs])
    n_out = np.array([request_output_tokens(r.output_tokens, r.chunk_tokens) for r in rs])
    ok = np.array([r.ok for r in rs], dtype=bool)
    if any(r.rate is not None for r in rs):
        tp = window_throughput_arrays(t_send, e2e, n_out, ok)
    else:
        w = WindowRequests(t_send, e2e, ok, n_out, [r.chunk_offsets_s for r in rs], [r.chunk_tokens for r in rs])
        tp = steady_window(max(r.concurrency for r in rs), w).throughput
    return tp if np.isfinite(tp) else None


def concurrency_warning(c: int, in_flight: Sequence[float], no_interval: int, distinct_prompts: int,
                        server_running: float, states: Sequence[dict[str, float]]) -> CellWarning | None:
    """`below_concurrency` for a closed-loop cell at concurrency `c` when a window's effective concurrency
    (`in_flight`, one per window) or the server's running mean (`server_running`, with requests waiting in its
    queue or preempted: `states`, the windows' engine_state) is under EFFECTIVE_CONCURRENCY_SHARE x C; the
    detail names the cause and its remedy. `no_interval`: windows without a measured interval."""
    floor = EFFECTIVE_CONCURRENCY_SHARE * c
    low = [x for x in in_flight if np.isfinite(x) and x < floor]
    preempted = sum(s.get("preemptions", 0.0) for s in states)
    waiting = max((s.get("waiting_max", 0.0) for s in states), default=0.0)
    server_low = bool(np.isfinite(server_running) and server_running < floor and (waiting > 0 or preempted > 0))
    if not low and not server_low:
        return None
    client = sum(x for x in in_flight if np.isfinite(x)) / max(1, sum(np.isfinite(x) for x in in_flight))
    server = f", {server_running:.2f} running (server)" if np.isfinite(server_running) else ""
    head = (f"{client:.2f} in flight (client){server} at C={c}, {len(low)} of {len(in_flight)} window(s) under "
            f"{floor:.2f}: ")
    if no_interval:
        cause = (f"too few requests for C ({no_interval} window(s) without a request wholly inside the steady "
                 "interval, measured whole with their ramp and drain): raise sweep.waves or add prompts")
    elif low and distinct_prompts < c:
        cause = (f"too few prompts for C ({distinct_prompts}: the loop waited for a copy of a prompt to finish): "
                 f"add prompts to the category (C={c} needs {c}) or lower C")
    elif server_low and preempted > 0:
        cause = (f"preemption ({preempted:g} in the cell's windows: the KV cache ran out): give the engine more KV "
                 "cache or lower C")
    elif server_low:
        cause = (f"a server cap or admission (up to {waiting:g} requests waited in its queue): raise the engine's "
                 "batch limit (vLLM --max-num-seqs, SGLang --max-running-requests) to C or lower C")
    else:
        cause = ("the client did not keep C in flight (see client_saturated, client_lagging): give it more CPU "
                 "(client.processes) or lower C")
    return CellWarning(WarningCode.BELOW_CONCURRENCY, head + cause)

"""The engine's state around and during each window, and the cells it flags (docs/metrics.md, "Engine state").

The runner samples the engine's /metrics while a window runs (`runner/enginestate.py`): requests running and
waiting, KV-cache usage, and the preemption and queue-time counters. `window_state` turns the samples into the
summary stored in the WindowRecord (`engine_state`); `state_warnings` reads the summaries of a cell's windows
and flags a server that ran fewer requests than the cell's concurrency, or preempted.

A closed loop keeps C requests in flight only until fewer than C remain, so the window's tail runs fewer by
design: the admitted figure (`running_at_c`) is the mean over the samples taken while the client still had C
requests in flight (C minus the requests finished so far, at most C: the sampler counts them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from specbench.metrics.warnings import UNDER_ADMITTED_SHARE, CellWarning, WarningCode

COUNTERS = ("preemptions", "queue_time_sum_s", "queue_time_count")


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def window_state(before: dict[str, float] | None, samples: Sequence[tuple[int | None, dict[str, float]]],
                 after: dict[str, float] | None, concurrency: int | None) -> dict[str, float] | None:
    """The summary of one window: `samples` are (requests the client had in flight, the engine's state) taken
    while the window ran; `before` and `after` are read around it (counter deltas). None without any figure."""
    out: dict[str, float] = {"samples": float(len(samples))}
    if concurrency is not None:
        out["concurrency"] = float(concurrency)
    for key in ("running", "waiting", "kv_usage"):
        vals = [s[key] for _, s in samples if key in s]
        if vals:
            out[f"{key}_mean"], out[f"{key}_max"] = _mean(vals), max(vals)
    full = [s["running"] for n, s in samples if "running" in s and concurrency and n is not None and n >= concurrency]
    if full:
        out["running_at_c"], out["samples_at_c"] = _mean(full), float(len(full))
    if before is not None and after is not None:
        for key in COUNTERS:
            if key in before and key in after and after[key] >= before[key]:  # a reset reads as no figure
                out[key] = after[key] - before[key]
    if out.get("queue_time_count"):
        out["queue_time_mean_s"] = out["queue_time_sum_s"] / out["queue_time_count"]
    return out if len(out) > 1 + (concurrency is not None) else None


def state_warnings(windows: pd.DataFrame) -> dict[str, list[CellWarning]]:
    """Per cell_id: `under_admitted` when the server ran under UNDER_ADMITTED_SHARE x C requests on average
    while C were in flight (samples of all the cell's windows pooled) and some request waited in its queue,
    `preempted` when it preempted."""
    if windows.empty or "engine_state" not in windows:
        return {}
    by_cell: dict[str, list[dict[str, Any]]] = {}
    for cell_id, state in zip(windows["cell_id"], windows["engine_state"]):
        if isinstance(state, dict):
            by_cell.setdefault(str(cell_id), []).append(state)
    out: dict[str, list[CellWarning]] = {}
    for cell_id, states in by_cell.items():
        ws: list[CellWarning] = []
        at_c = [(s["running_at_c"], s["samples_at_c"]) for s in states if "running_at_c" in s]
        c = next((s["concurrency"] for s in states if "concurrency" in s), None)
        n = sum(w for _, w in at_c)
        if c and n:
            running = sum(r * w for r, w in at_c) / n
            waiting = max((s.get("waiting_max", 0.0) for s in states), default=0.0)
            # with nothing in the server's queue the shortfall is the time a request spends outside the
            # scheduler (HTTP front end, tokenizing, the last chunk's detokenizing): not admission (seen at C=1)
            if running < UNDER_ADMITTED_SHARE * c and waiting > 0:
                ws.append(CellWarning(WarningCode.UNDER_ADMITTED,
                                      f"the server ran {running:.1f} requests on average at C={c:g} "
                                      f"(up to {waiting:g} waiting; {n:.0f} samples)"))
        preempted = sum(s.get("preemptions", 0.0) for s in states)
        if preempted > 0:
            ws.append(CellWarning(WarningCode.PREEMPTED, f"{preempted:g} preemption(s) in {len(states)} window(s)"))
        if ws:
            out[cell_id] = ws
    return out


def server_running_mean(windows: pd.DataFrame) -> float:
    """The server's own count of running requests over a cell's windows: the mean of its samples taken while
    the client had C requests in flight (`running_at_c`, weighted by their samples), else of all its samples
    (`running_mean`); NaN when the engine publishes none (docs/metrics.md, "Effective concurrency")."""
    if windows.empty or "engine_state" not in windows:
        return math.nan
    states = [s for s in windows["engine_state"] if isinstance(s, dict)]
    for mean, weight in (("running_at_c", "samples_at_c"), ("running_mean", "samples")):
        pairs = [(s[mean], s.get(weight, 1.0)) for s in states if mean in s]
        total = sum(w for _, w in pairs)
        if total > 0:
            return sum(m * w for m, w in pairs) / total
    return math.nan

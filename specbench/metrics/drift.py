"""Drift of the machine over a run: the baseline's launch means against time (launch_drift.csv).

A launch's effect is the geometric mean over its windows of (window throughput / its cell's mean window
throughput over all launches): 1.0 is the baseline's usual speed, 0.95 a launch 5% slow at every point.
A monotone drift (a node warming, a tenant arriving) moves every variant launched later the same way; the
counterbalanced launch order (runner.scheduler.round_order) spreads a linear one evenly, but not a curved
one, and no interval holds it. `trend` tests the launch effects for a slope over launch index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.stats

from specbench.metrics.requests import to_measured_requests, window_throughput_arrays

DRIFT_ALPHA = 0.05  # two-sided level of the slope t test that warns of a trend
COLUMNS = ["variant", "launch", "start_s", "windows", "effect"]


def window_throughputs(requests: pd.DataFrame) -> dict[str, float]:
    """window_id -> output throughput (metrics.requests.window_throughput_arrays) from a requests frame."""
    by: dict[str, list] = {}
    for r in to_measured_requests(requests):
        by.setdefault(r.window_id, []).append(r)
    return {w: window_throughput_arrays(np.array([r.t_send for r in rs]), np.array([r.e2e for r in rs]),
                                        np.array([r.n_out for r in rs]), np.array([r.ok for r in rs]))
            for w, rs in by.items()}


def launch_effects(requests: pd.DataFrame, windows: pd.DataFrame, variant: str) -> pd.DataFrame:
    """One row per launch of `variant` (COLUMNS): its start (s after the run's first window), its windows
    and its effect (module docstring). Empty with fewer than 2 launches."""
    if windows.empty or "variant" not in windows:
        return pd.DataFrame(columns=COLUMNS)
    w = windows[windows["variant"] == variant].copy()
    if w["launch"].nunique() < 2:
        return pd.DataFrame(columns=COLUMNS)
    tp = window_throughputs(requests[requests["window_id"].isin(set(w["window_id"]))])
    w["tp"] = w["window_id"].map(tp).astype(float)
    w = w[np.isfinite(w["tp"]) & (w["tp"] > 0)]
    w["log_dev"] = np.log(w["tp"]) - np.log(w.groupby("cell_id")["tp"].transform("mean"))
    t0 = float(windows["t_start"].min())
    rows = [{"variant": variant, "launch": int(la), "start_s": float(g["t_start"].min()) - t0, "windows": len(g),
             "effect": math.exp(float(g["log_dev"].mean()))} for la, g in w.groupby("launch")]
    return pd.DataFrame(rows, columns=COLUMNS)


@dataclass(frozen=True)
class Trend:
    slope: float  # per launch, on the log scale (0.01: 1% faster each launch)
    t: float
    df: int
    p: float  # two-sided; NaN with fewer than 3 launches

    @property
    def trending(self) -> bool:
        return self.p < DRIFT_ALPHA


def trend(effects: list[float]) -> Trend:
    """Least-squares slope of ln(effect) on launch index 0..n-1 and its t test (n - 2 df): t = b / se(b),
    se(b) = sqrt(sum(residual^2) / (n - 2) / sum((i - mean i)^2)). Fewer than 3 launches: not testable."""
    y = np.log(np.asarray(effects, dtype=float))
    n = len(y)
    if n < 3 or not np.isfinite(y).all():
        return Trend(math.nan, math.nan, max(0, n - 2), math.nan)
    x = np.arange(n, dtype=float)
    sxx = float(((x - x.mean()) ** 2).sum())
    b = float(((x - x.mean()) * (y - y.mean())).sum() / sxx)
    resid = y - (y.mean() + b * (x - x.mean()))
    se = math.sqrt(float((resid**2).sum()) / (n - 2) / sxx)
    if se == 0:
        return Trend(b, math.inf if b else 0.0, n - 2, 0.0 if b else 1.0)
    t = b / se
    return Trend(b, t, n - 2, float(2 * scipy.stats.t.sf(abs(t), n - 2)))

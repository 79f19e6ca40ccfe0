"""Coverage of the open-loop percentile intervals, through specbench's own functions, on M/D/4 queues near
their capacity: windows of consecutive requests share the queue, so their latencies are autocorrelated.

For each case, K windows of n requests, each started from the queue's steady state (a 3,000-arrival pre-roll
discarded), are measured with metrics.slo.batch_quantile_ci (specbench's interval: batch means over 5
consecutive batches) and metrics.slo.quantile_ci (the order-statistic interval of independent requests); the
truth is the long-run p90 TTFT (benchmarks/mdc.py, 400,000 arrivals). Also the share of windows whose halves
the steady-state check (metrics.slo.halves) calls disagreeing although the queue is in steady state.

    python -m benchmarks.slo_coverage [--windows 200]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from benchmarks.mdc import Queue, steady_percentile
from specbench.metrics.slo import batch_quantile_ci, halves, quantile_ci

CASES = [  # (queue, rate req/s, requests per window): utilization rate x service / slots
    (Queue(4, 0.60, 0.0), 4.99, 300), (Queue(4, 0.60, 0.0), 4.99, 3000),
    (Queue(4, 0.25, 0.25), 12.6, 300), (Queue(4, 0.25, 0.25), 12.6, 3000),
    (Queue(4, 1.01, 0.0), 2.0, 300),
]


def coverage(queue: Queue, rate: float, n: int, windows: int, seed: int = 2) -> tuple[float, float, float, float]:
    """(batch-means coverage, independent-requests coverage, false 'no steady state' rate, truth)."""
    truth = steady_percentile(queue, rate, 90, n=400_000)
    rng = np.random.default_rng(seed)
    hit_b = hit_i = trend = 0
    for _ in range(windows):
        t = list(queue.ttft(list(np.cumsum(rng.exponential(1 / rate, 3000 + n))))[3000:])
        b, i = batch_quantile_ci([t], 90), quantile_ci(t, 90)
        hit_b += b.low <= truth <= b.high
        hit_i += i.low <= truth <= i.high
        trend += halves([t], 90).trend != ""
    return hit_b / windows, hit_i / windows, trend / windows, truth


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=200)
    a = ap.parse_args(argv)
    mc = 1.96 * math.sqrt(0.95 * 0.05 / a.windows)
    print(f"Coverage of the nominal 95% p90 TTFT intervals, {a.windows} steady-state windows per row "
          f"(Monte Carlo error +-{mc:.3f} at 0.95).\n")
    print("| queue (slots, service s, first token s) | rate req/s | utilization | requests | true p90 s | "
          "batch means | independent requests | halves disagree |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for q, rate, n in CASES:
        b, i, tr, truth = coverage(q, rate, n, a.windows)
        print(f"| M/D/{q.slots} ({q.service_s:g}, {q.first_token_s:g}) | {rate:g} | "
              f"{rate * q.service_s / q.slots:.2f} | {n} | {truth:.3f} | {b:.3f} | {i:.3f} | {tr:.3f} |")


if __name__ == "__main__":
    main()

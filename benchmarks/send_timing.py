"""The open loop's send-time error: how late specbench sends each request against its schedule.

    python -m benchmarks.send_timing [--rate 50] [--requests 1000] [--tokens 16]

Starts the stand-in server (pinned to CPU 0, instant answers of `--tokens` tokens), offers it `--requests`
Poisson arrivals at `--rate` req/s through the runner's own `measure_window` (the open-loop sender,
specbench.client.load.open, on CPU 1) and prints the send-time error (`send_lag_s`: actual - planned send, on the
monotonic clock) p50 / p99 / max in ms. The goal (issue 19): p99 <= 1 ms at 50 req/s. Name the CPU with the
figures, and say whether the machine was quiet (other processes above 5% CPU are listed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import tempfile
from pathlib import Path

import numpy as np

from specbench.config import parse_config
from specbench.plan.prompts import Prompt
from specbench.plan.windows import Sweep, SweepPoint, window_requests
from specbench.records.rundir import RunDir
from specbench.runner import RecordSink, VariantSession, measure_window

from .client_overhead import CLIENT_CPU, free_port, others_busy, start_standin, stop
from .common import attach


def measure(rate: float, requests: int, tokens: int) -> list[float]:
    """Send-time errors (s) of one open-loop window against a running stand-in."""
    port = free_port()
    proc = start_standin(port)
    base = f"http://127.0.0.1:{port}"
    cfg = parse_config({"model": {"path": "standin", "served_name": "standin"}, "engine": {"kind": "vllm"},
                        "variants": [{"name": "b", "drafter": "autoregressive", "baseline": True}],
                        "sweep": {"output_lens": [tokens], "warmup_requests": 0,
                                  "load": {"kind": "open", "rates": [rate], "requests_per_rate": requests,
                                           "warmup_requests": 0}}}, "send_timing")
    point = SweepPoint(category="c", input_len=None, output_len=tokens, concurrency=cfg.sweep.load.max_in_flight,
                       temperature=0.0, rate=rate)
    sweep = Sweep(points=[point], prompts={"c": [Prompt(id="p", category="c", text="Tell a story.")]}, padded={})
    planned = window_requests(cfg.sweep, sweep, point, "b", repeat=1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rd = RunDir(Path(tmp))
            session = VariantSession(cfg, attach(cfg, base), RecordSink.open(rd, run_id="send_timing"), rd.path)

            async def go() -> list[float]:
                async with session:
                    await measure_window(session, planned, planned[0].fields["window_id"])
                    return [r.send_lag_s for r in session.last_window if r.send_lag_s is not None]

            try:
                return asyncio.run(go())
            finally:
                session.sink.close()
    finally:
        stop(proc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--tokens", type=int, default=16)
    a = ap.parse_args()
    busy = others_busy()
    os.sched_setaffinity(0, {CLIENT_CPU})
    lags = np.array(measure(a.rate, a.requests, a.tokens)) * 1000
    print(f"{platform.processor() or platform.machine()}: {len(lags)} requests at {a.rate:g} req/s, "
          f"{a.tokens} tokens each; send-time error p50 {np.percentile(lags, 50):.3f} ms, "
          f"p99 {np.percentile(lags, 99):.3f} ms, max {lags.max():.3f} ms")
    print("machine busy before the run: " + ("; ".join(busy) if busy else "no (quiet)"))


if __name__ == "__main__":
    main()

"""A closed-loop window at the concurrency it names (issue 49): throughput(C) / (C x throughput(1)) on a stand-in
whose per-request speed does not depend on the load.

    python -m benchmarks.steady_state [--prompts 10] [--concurrency 1 4 8] [--tokens 64] [--ms-per-token 20]

Starts the stand-in server (tests/standin, `--paced --ms-per-token M --tokens-per-chunk 1`: token j of a request
is due at its arrival + j x M ms, whatever else is in flight, so C requests at once give exactly C times the
throughput of one) pinned to CPU 0, and measures one category of `--prompts` prompts at each concurrency through
the runner's own `measure_window` (client on CPU 1):

- now: the window the plan builds (`plan.windows.window_requests`: the passes the level needs) and its
  throughput as cells.csv computes it (`metrics.window_throughput`: over the measured interval, first completion
  to last send), with its effective concurrency (`metrics.steady.steady_window`);
- before: one pass of the prompts (what the largest C of this sweep needed before issue 49: ceil(8 / 10) = 1)
  and its throughput over the whole window, first send to last finish (`metrics.window_throughput_arrays`), as
  cells.csv computed it before.

Prints one line per concurrency and the goal line: throughput(C) / (C x throughput(1)) >= 0.95 at every level
the prompts allow. Name the CPU with the figures, and the load (the load average is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

import numpy as np

from specbench.config import RunConfig, parse_config
from specbench.metrics import window_throughput, window_throughput_arrays
from specbench.metrics.steady import WindowRequests, steady_window
from specbench.plan.prompts import Prompt
from specbench.plan.windows import PlannedRequest, build_sweep, window_requests
from specbench.records.rundir import RunDir
from specbench.runner import RecordSink, VariantSession, measure_window
from specbench.shared import environment
from specbench.shared.schema import RequestRecord

from .client_overhead import CLIENT_CPU, SERVER_CPU, free_port, others_busy, spawn_standin, stop
from .common import attach


def config(concurrency: list[int], tokens: int) -> RunConfig:
    return parse_config({"model": {"path": "standin", "served_name": "standin"}, "engine": {"kind": "vllm"},
                         "variants": [{"name": "b", "drafter": "autoregressive", "baseline": True}],
                         "sweep": {"output_lens": [tokens], "concurrency": concurrency, "waves": 1,
                                   "warmup_requests": 0}}, "steady_state")


async def _measure(session: VariantSession, planned: list[PlannedRequest]) -> list[RequestRecord]:
    await measure_window(session, planned, planned[0].fields["window_id"])
    return list(session.last_window)


def _whole(records: list[RequestRecord]) -> float:
    """The window's throughput as cells.csv computed it before issue 49: first send to last finish."""
    return window_throughput_arrays(np.array([r.t_send for r in records]), np.array([r.e2e_s for r in records]),
                                    np.array([float(r.output_tokens or 0) for r in records]),
                                    np.array([r.ok for r in records]))


def _in_flight(records: list[RequestRecord], c: int) -> float:
    window = WindowRequests(np.array([r.t_send for r in records]), np.array([r.e2e_s for r in records]),
                            np.array([r.ok for r in records]), np.array([float(r.output_tokens or 0) for r in records]),
                            [r.chunk_offsets_s for r in records], [r.chunk_tokens for r in records])
    return steady_window(c, window).effective_concurrency


def measure(args: argparse.Namespace) -> list[dict[str, float]]:
    cfg = config(args.concurrency, args.tokens)
    prompts = [Prompt(id=f"p{i}", category="c", text=f"Tell story number {i}.") for i in range(args.prompts)]
    sweep = build_sweep(cfg.sweep, prompts)
    port = free_port()
    proc = spawn_standin(port, ["--paced", "--ms-per-token", str(args.ms_per_token), "--tokens-per-chunk", "1"],
                         preexec_fn=lambda: os.sched_setaffinity(0, {SERVER_CPU}))
    rows: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rd = RunDir(Path(tmp))
            session = VariantSession(cfg, attach(cfg, f"http://127.0.0.1:{port}"),
                                     RecordSink.open(rd, run_id="steady_state"), rd.path)

            async def go() -> None:
                async with session:
                    for point in sweep.points:
                        c = point.concurrency
                        planned = window_requests(cfg.sweep, sweep, point, "b", repeat=1)
                        now = await _measure(session, planned)
                        # one pass, as its own window (repeat 2: its own id and seeded order)
                        one_pass = window_requests(cfg.sweep, sweep, point, "b", repeat=2)[:len(prompts)]
                        before = await _measure(session, one_pass)
                        rows.append({"c": c, "requests": len(now), "tp": window_throughput(now) or float("nan"),
                                     "in_flight": _in_flight(now, c), "before_requests": len(before),
                                     "before_tp": _whole(before), "before_in_flight": _in_flight(before, c)})

            try:
                asyncio.run(go())
            finally:
                session.sink.close()
    finally:
        stop(proc)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=10)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--ms-per-token", type=float, default=20.0)
    args = ap.parse_args()
    busy = others_busy()
    os.sched_setaffinity(0, {CLIENT_CPU})
    rows = measure(args)
    one = next((r for r in rows if r["c"] == 1), None)
    print(f"{environment.cpu_model()}; load average {os.getloadavg()[0]:.2f}; {args.prompts} "
          f"prompts, {args.tokens} tokens at {args.ms_per_token:g} ms a token (paced: speed independent of load)")
    ratios = []
    for r in rows:
        ratio = r["tp"] / (r["c"] * one["tp"]) if one else float("nan")
        before = r["before_tp"] / (r["c"] * one["before_tp"]) if one else float("nan")
        ratios.append(ratio)
        print(f"C={r['c']:<3} now: {r['requests']:3.0f} requests, {r['tp']:7.1f} tok/s, in flight "
              f"{r['in_flight']:.2f}, ratio {ratio:.3f} | before: {r['before_requests']:3.0f} requests, "
              f"{r['before_tp']:7.1f} tok/s, in flight {r['before_in_flight']:.2f}, ratio {before:.3f}")
    worst = min(ratios) if ratios else float("nan")
    print(f"throughput(C) / (C x throughput(1)) >= 0.95 at every level: {'yes' if worst >= 0.95 else 'NO'} "
          f"(lowest {worst:.3f})")
    print("machine busy before the run: " + ("; ".join(busy) if busy else "no (quiet)"))


if __name__ == "__main__":
    main()

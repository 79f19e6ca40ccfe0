"""Open-loop fidelity: specbench's open loop against vLLM's `bench serve --request-rate`, on a server whose
answer is known: the stand-in as an M/D/c queue (--slots C --service-ms S).

    python -m benchmarks.open_fidelity [--rates 5 10 15] [--requests 200] [--slots 2] [--service-ms 100]

For each rate both clients offer Poisson arrivals (their own seeds) to the same stand-in: specbench through
the runner's own `measure_window` (specbench.client.load.open), vLLM's benchmark client in a subprocess with
--request-rate R --burstiness 1. The queue's TTFT is known from each client's own send times (wait for one of
C FIFO slots, plus S), so each client's measured TTFT minus the simulated one is its timing error, and the
two clients are compared on their offered rate (1 / slope of send times by rank), achieved request rate, TTFT
p50 / p90 and that error. Writes docs/fidelity-open-loop.md (rewritten above its notes marker).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from specbench.config import parse_config
from specbench.metrics.slo import rank_rate
from specbench.plan.prompts import Prompt
from specbench.plan.windows import Sweep, SweepPoint, window_requests
from specbench.records.rundir import RunDir
from specbench.runner import RecordSink, VariantSession, measure_window

from .client_overhead import free_port, others_busy, spawn_standin, stop
from .common import REPO, BenchServe, attach, generated_header, write_generated

NAME = "open_fidelity"
PROMPT = "Tell a short story."
OUTPUT_LEN = 4


@dataclass(frozen=True)
class Queue:
    """The stand-in's M/D/c queue: slots served at once, each for service_s."""

    slots: int
    service_s: float


def mdc_ttft(send_s: list[float], slots: int, service_s: float) -> list[float]:
    """The queue's TTFT for requests sent at `send_s` (any clock): FIFO wait for one of `slots`, plus service."""
    order = np.argsort(send_s)
    free = [0.0] * slots
    out = [0.0] * len(send_s)
    t0 = min(send_s)
    for i in order:
        t = send_s[i] - t0
        start = max(t, heapq.heappop(free))
        heapq.heappush(free, start + service_s)
        out[i] = start + service_s - t
    return out


def start_queue(port: int, slots: int, service_ms: float) -> subprocess.Popen:
    return spawn_standin(port, ["--slots", str(slots), "--service-ms", str(service_ms)])


def summary(client: str, rate: float, send: list[float], finish: list[float], ttft: list[float],
            sim: list[float]) -> dict[str, Any]:
    err = 1000 * (np.array(ttft) - np.array(sim))
    return {"client": client, "rate": rate, "n": len(ttft), "offered": rank_rate(send), "achieved": rank_rate(finish),
            "ttft_p50_ms": 1000 * float(np.percentile(ttft, 50)), "ttft_p90_ms": 1000 * float(np.percentile(ttft, 90)),
            "sim_p90_ms": 1000 * float(np.percentile(sim, 90)),
            "err_p50_ms": float(np.percentile(err, 50)), "err_p99_ms": float(np.percentile(err, 99))}


def run_specbench(base: str, rate: float, n: int, q: Queue) -> dict[str, Any]:
    cfg = parse_config({"model": {"path": "standin", "served_name": "standin"}, "engine": {"kind": "vllm"},
                        "variants": [{"name": "b", "drafter": "autoregressive", "baseline": True}],
                        "sweep": {"output_lens": [OUTPUT_LEN], "warmup_requests": 0,
                                  "load": {"kind": "open", "rates": [rate], "requests_per_rate": n,
                                           "warmup_requests": 0}}}, NAME)
    point = SweepPoint(category="c", input_len=None, output_len=OUTPUT_LEN,
                       concurrency=cfg.sweep.load.max_in_flight, temperature=0.0, rate=rate)
    sweep = Sweep(points=[point], prompts={"c": [Prompt(id="p", category="c", text=PROMPT)]}, padded={})
    planned = window_requests(cfg.sweep, sweep, point, "b", repeat=1)
    with tempfile.TemporaryDirectory() as tmp:
        rd = RunDir(Path(tmp))
        session = VariantSession(cfg, attach(cfg, base), RecordSink.open(rd, run_id=NAME), rd.path)

        async def go() -> list[Any]:
            async with session:
                await measure_window(session, planned, planned[0].fields["window_id"])
                return list(session.last_window)

        try:
            recs = asyncio.run(go())
        finally:
            session.sink.close()
    ok = [r for r in recs if r.ok and r.ttft_s is not None and r.e2e_s is not None]
    send = [r.t_send for r in ok]
    return summary("specbench", rate, send, [r.t_send + (r.e2e_s or 0) for r in ok], [r.ttft_s or 0 for r in ok],
                   mdc_ttft(send, q.slots, q.service_s))


def run_vllm(base: str, rate: float, n: int, q: Queue, tokenizer: str, workdir: Path) -> dict[str, Any]:
    data = workdir / f"prompts-{rate:g}.jsonl"
    data.write_text("".join(json.dumps({"prompt": PROMPT}) + "\n" for _ in range(n)))
    argv = BenchServe(base, "standin", tokenizer, data, OUTPUT_LEN, n, n, workdir / f"vllm-{rate:g}.json",
                      extra_args=("--request-rate", str(rate), "--burstiness", "1", "--seed", "0")).argv()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    if p.returncode != 0:
        raise SystemExit("vllm bench serve failed:\n" + "\n".join((p.stdout + p.stderr).splitlines()[-15:]))
    res = json.loads((workdir / f"vllm-{rate:g}.json").read_text())
    send, ttft = list(res["start_times"]), list(res["ttfts"])
    # vLLM's latency of a request ends at its last token: start + ttft + sum(itl)
    finish = [s + t + sum(itl) for s, t, itl in zip(send, ttft, res["itls"])]
    return summary("vLLM bench serve", rate, send, finish, ttft, mdc_ttft(send, q.slots, q.service_s))


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = generated_header("Open-loop fidelity", meta["cmd"], meta["started"])
    lines += [f"Machine: {meta['cpu']}; stand-in M/D/{meta['slots']} queue, service {meta['service_ms']:g} ms, "
              f"{meta['n']} requests of {OUTPUT_LEN} tokens per rate and client, Poisson arrivals (each client its own "
              f"seed). Other processes above 5% CPU before the run: {meta['busy'] or 'none (quiet)'}.", "",
              "TTFT error = measured TTFT - the queue's TTFT simulated on that client's own send times (FIFO wait "
              "for a slot + service): the client's timing error plus loopback transfer.", "",
              "| rate req/s | client | offered | achieved | TTFT p50 ms | TTFT p90 ms | simulated p90 ms "
              "| TTFT error p50 ms | TTFT error p99 ms |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['rate']:g} | {r['client']} | {r['offered']:.2f} | {r['achieved']:.2f} | "
                     f"{r['ttft_p50_ms']:.1f} | {r['ttft_p90_ms']:.1f} | {r['sim_p90_ms']:.1f} | "
                     f"{r['err_p50_ms']:.2f} | {r['err_p99_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", type=float, nargs="+", default=[5.0, 10.0, 15.0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--service-ms", type=float, default=100.0)
    ap.add_argument("--out", default=str(REPO / "docs" / "fidelity-open-loop.md"))
    a = ap.parse_args()
    from specbench.demo_models import prepare

    tokenizer = str(prepare("smollm2"))
    busy = "; ".join(others_busy())
    port = free_port()
    proc = start_queue(port, a.slots, a.service_ms)
    base = f"http://127.0.0.1:{port}"
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for rate in a.rates:
                q = Queue(a.slots, a.service_ms / 1000)
                rows.append(run_specbench(base, rate, a.requests, q))
                rows.append(run_vllm(base, rate, a.requests, q, tokenizer, Path(tmp)))
                print(json.dumps(rows[-2:]), flush=True)
    finally:
        stop(proc)
    meta = {"cmd": "python -m benchmarks.open_fidelity " + " ".join(sys.argv[1:]),
            "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"), "cpu": platform.processor() or "?",
            "slots": a.slots, "service_ms": a.service_ms, "n": a.requests, "busy": busy}
    from specbench.shared.environment import collect

    meta["cpu"] = collect("standin", None, {}).get("cpu") or meta["cpu"]
    write_generated(Path(a.out), render(rows, meta), NAME)
    print(render(rows, meta))


if __name__ == "__main__":
    main()

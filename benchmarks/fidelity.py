"""Fidelity check: specbench's client vs vLLM's own `bench serve` client on the same vLLM-CPU server.

    python scripts/fidelity.py [--out docs/fidelity.md] [--port 8031] [--rounds 3] [--no-ngram]
    python scripts/fidelity.py --url http://127.0.0.1:8000 --model-path DIR   # a server already running

Launches one vLLM-CPU server on the demo model (baseline; then, unless --no-ngram, a second one with
ngram k=4), waits until it generates, and on that server runs the same workload with both clients,
alternating which goes first in each round: the same prompts in the same order, chat endpoint, the same
output length (ignore_eos, temperature 0), the same request count and max concurrency (closed loop).

- vLLM side: `vllm.benchmarks.serve` (the code behind `vllm bench serve`; the `vllm` console script is
  broken in vllm-cpu) in a subprocess with --dataset-name custom --skip-chat-template --disable-shuffle,
  no ready-check request and no warmups (the script warms the server once), and --extra-body carrying
  the request fields specbench sends (return_token_ids, continuous usage stats), so the server does the
  same work for both clients.
- specbench side: specbench.plan.window_requests + client.run_closed_loop + metrics.compute_cells, with
  the vLLM engine's counter scrapes around the window, exactly as the runner measures a window.

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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specbench import environment  # noqa: E402
from specbench.client import make_http_client, run_closed_loop, stream_request  # noqa: E402
from specbench.config import parse_config  # noqa: E402
from specbench.engines.base import LaunchSpec, dist_version  # noqa: E402
from specbench.engines.vllm import VLLMEngine  # noqa: E402
from specbench.metrics import compute_cells, draft_acceptance_length, tau_from_counters  # noqa: E402
from specbench.plan import SweepPoint, build_sweep, window_requests  # noqa: E402
from specbench.prompts import load_prompts  # noqa: E402
from specbench.records import RequestRecord, WindowRecord  # noqa: E402
from specbench.rundir import records_frame  # noqa: E402
from specbench.runner import counter_delta  # noqa: E402
from specbench.server import EngineProcess, port_in_use  # noqa: E402

NOTES_MARKER = "<!-- notes: kept across runs of scripts/fidelity.py -->"
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}

# `vllm bench serve` without the console script: its own argument parser and main().
VLLM_BENCH = ("import sys\n"
              "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
              "from vllm.benchmarks.serve import add_cli_args, main\n"
              "p = FlexibleArgumentParser(prog='vllm bench serve'); add_cli_args(p)\n"
              "main(p.parse_args(sys.argv[1:]))\n")


# -- the workload ------------------------------------------------------------------------------------
def make_cfg(model_path: str, served: str, prompts_file: Path, output_len: int, concurrency: list[int]):
    return parse_config({
        "name": "fidelity",
        "model": {"path": model_path, "served_name": served},
        "engine": {"kind": "vllm"},
        "variants": [{"name": "baseline", "drafter": "autoregressive", "baseline": True}],
        "sweep": {"prompts": [{"set": "file", "path": str(prompts_file)}], "output_lens": [output_len],
                  "concurrency": concurrency, "warmup_requests": 0},
    }, "scripts/fidelity.py")


def write_prompts(path: Path, n: int) -> None:
    """The first n prompts of specbench's seed set, as one category (window_requests rotates within it)."""
    from specbench.config import PromptSource

    seed = load_prompts([PromptSource(set="seed")])
    rows = [{"category": "fidelity", "prompt": p.text} for p in seed[:n]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def planned_window(cfg, sweep, c: int, n_requests: int, variant: str, repeat: int):
    cfg.sweep.waves = max(1, n_requests // c)
    point = SweepPoint(category="fidelity", input_len=None, output_len=cfg.sweep.output_lens[0],
                       concurrency=c, temperature=0.0)
    return window_requests(cfg, sweep, point, variant, repeat)


# -- the two clients -----------------------------------------------------------------------------------
async def read_counters(engine: VLLMEngine, metrics_url: str) -> dict[str, Any]:
    async with make_http_client(1) as http:
        return await engine.read_counters(http, metrics_url)


async def specbench_run(engine: VLLMEngine, base_url: str, planned, c: int, save: Path | None = None) -> dict[str, Any]:
    """One window measured the way MatrixRunner._run_window does (counters diffed around it)."""
    async with make_http_client(c) as http:
        before = await engine.read_counters(http, base_url + "/metrics")
        t_start = time.time()
        records: list[RequestRecord] = await run_closed_loop(engine, http, base_url, planned, c, 600.0,
                                                             lambda r: None)
        t_end = time.time()
        after = await engine.read_counters(http, base_url + "/metrics")
    counters, per_pos = counter_delta(before, after)
    if save is not None:
        save.write_text("".join(r.model_dump_json() + "\n" for r in records))
    f = planned[0].fields
    win = WindowRecord(window_id=f["window_id"], variant=f["variant"], cell_id=f["cell_id"],
                       point_id=f["point_id"], repeat=f["repeat"], t_start=t_start, t_end=t_end,
                       n_requests=len(records), counters=counters, per_position_accepted=per_pos)
    cells = compute_cells(records_frame(records), records_frame([win]), baseline="__none__", n_resamples=200)
    row = cells.iloc[0]
    ok = [r for r in records if r.ok]
    # vLLM's definitions applied to specbench's own records (to separate definitions from clients):
    # latency ends at the last token chunk, not at the end of the stream
    tpot_vdef = [(r.chunk_offsets_s[-1] - r.ttft_s) / (r.output_tokens - 1) for r in ok if (r.output_tokens or 0) > 1]
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
    extra = {"return_token_ids": True,
             "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    argv = [python, "-c", VLLM_BENCH, "--backend", "openai-chat", "--base-url", base_url,
            "--endpoint", "/v1/chat/completions", "--model", served, "--tokenizer", tokenizer,
            "--dataset-name", "custom", "--dataset-path", str(data), "--skip-chat-template", "--disable-shuffle",
            "--custom-output-len", str(output_len), "--num-prompts", str(len(prompts)),
            "--max-concurrency", str(c), "--request-rate", "inf", "--ignore-eos", "--temperature", "0",
            "--extra-body", json.dumps(extra), "--ready-check-timeout-sec", "0", "--num-warmups", "0",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--disable-tqdm", "--save-result", "--save-detailed",
            "--result-dir", str(workdir), "--result-filename", f"{tag}.json"]
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
        "dal": res.get("spec_decode_acceptance_length"), "acc_rate": (res["spec_decode_acceptance_rate"] / 100
                                                                      if "spec_decode_acceptance_rate" in res else None),
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


def launch(model_path: str, served: str, port: int, spec: dict | None, logdir: Path) -> EngineProcess:
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path,
            "--served-model-name", served, "--host", "127.0.0.1", "--port", str(port), "--max-num-seqs", "4",
            "--enforce-eager", "--max-model-len", "2048", "--dtype", "bfloat16"]
    if spec:
        argv += ["--speculative-config", json.dumps(spec)]
    env = {"VLLM_CPU_KVCACHE_SPACE": "2", "HF_HUB_OFFLINE": "1"}
    name = "ngram" if spec else "baseline"
    proc = EngineProcess(name, LaunchSpec(argv=argv, env=env), logdir / f"server-{name}.log", "127.0.0.1", port)
    proc.start()
    return proc


# -- one server ------------------------------------------------------------------------------------------
def measure_server(args, variant: str, base_url: str, served: str, model_path: str, workdir: Path,
                   proc: EngineProcess | None) -> dict[str, Any]:
    prompts_file = workdir / "prompts.jsonl"
    write_prompts(prompts_file, args.requests)
    cfg = make_cfg(model_path, served, prompts_file, args.output_len, args.concurrency)
    sweep = build_sweep(cfg, load_prompts(cfg.sweep.prompts))
    engine = VLLMEngine(cfg, model_path, served)
    metrics_url = base_url + "/metrics"

    async def warm() -> None:  # the same two requests before everything; outside every window
        async with make_http_client(1) as http:
            for pr in planned_window(cfg, sweep, 1, 2, variant, 0):
                res = await stream_request(engine, http, base_url, pr.spec, 600.0)
                if res.error:
                    raise RuntimeError(f"warmup request failed: {res.error}")
    asyncio.run(warm())

    runs: list[dict[str, Any]] = []
    busy: list[tuple[str, float]] = []
    for rnd in range(1, args.rounds + 1):
        for c in args.concurrency:
            planned = planned_window(cfg, sweep, c, args.requests, variant, rnd)
            order = ["vllm", "specbench"] if (rnd + args.concurrency.index(c)) % 2 else ["specbench", "vllm"]
            for client in order:
                before = asyncio.run(read_counters(engine, metrics_url))
                t0 = time.perf_counter()
                if client == "specbench":
                    r = asyncio.run(specbench_run(engine, base_url, planned, c,
                                                  workdir / f"specbench-{variant}-c{c}-r{rnd}.jsonl"))
                else:
                    r = vllm_run(base_url, served, model_path, [p.spec.prompt_text for p in planned], c,
                                 args.output_len, workdir, f"vllm-{variant}-c{c}-r{rnd}", args.vllm_python)
                wall = time.perf_counter() - t0
                after = asyncio.run(read_counters(engine, metrics_url))
                eng, _ = counter_delta(before, after)
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
            busy += other_cpu(my_pids(proc), 1.0)
    return {"variant": variant, "runs": runs, "busy": busy}


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
                f"| {res['variant']} | {c} | specbench (counters) | specbench's | {fmt(mean(r['tau'] for r in s), '.3f')} | "
                f"{fmt(mean(r['dal'] for r in s), '.3f')} | {fmt(mean(r['acc_rate'] for r in s), '.3f')} |",
                f"| {res['variant']} | {c} | engine /metrics (script) | specbench's | {fmt(mean(r['engine_tau'] for r in s), '.3f')} | "
                f"{fmt(mean(r['engine_dal'] for r in s), '.3f')} | |",
                f"| {res['variant']} | {c} | specbench stream (tokens/chunk) | specbench's | {fmt(chunk_tau, '.3f')} | | |",
                f"| {res['variant']} | {c} | vLLM bench (printed) | vLLM's | – (not reported) | "
                f"{fmt(mean(r['dal'] for r in v), '.3f')} | {fmt(mean(r['acc_rate'] for r in v), '.3f')} |",
                f"| {res['variant']} | {c} | engine /metrics (script) | vLLM's | {fmt(mean(r['engine_tau'] for r in v), '.3f')} | "
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
        out.append(f"{res['variant']}: prompt token counts (server usage) identical for both clients: "
                   f"{'yes' if same_prompt else 'NO'}; errors: specbench {sum(r['errors'] for r in s)}, "
                   f"vLLM {sum(r['errors'] for r in v)}; output tokens per window = engine counter delta: "
                   f"{'yes' if all(abs(r['out_tokens'] - (r['engine_gen'] or 0)) < 0.5 for r in res['runs']) else 'NO'}")
    return out


def render(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    a, env = argparse.Namespace(**meta["args"]), meta["env"]
    table, _ = summarize(results)
    runs_lines = ["| server | C | round | order | client | n | TTFT p50 ms | TPOT p50 ms | tok/s | "
                  "sb TPOT, vLLM def. ms | engine gen tokens |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        for r in res["runs"]:
            runs_lines.append(f"| {r['variant']} | {r['c']} | {r['round']} | {r['position'] + 1} | {r['client']} | "
                              f"{r['n']} | {fmt(r['ttft_ms'], '.1f')} | {fmt(r['tpot_ms'], '.2f')} | {fmt(r['tput'], '.1f')} | "
                              f"{fmt(r.get('tpot_vdef_ms'), '.2f')} | {fmt(r['engine_gen'], '.0f')} |")
    return "\n".join([
        "# Fidelity: specbench vs vLLM's `bench serve` (generated)",
        "",
        f"Generated by `{meta['cmd']}` on {meta['started']} (UTC). Everything above the notes marker is rewritten "
        "by every run; the notes below it are kept.",
        "",
        f"- Machine: {env['cpu']}, {env['cpus']} CPUs, {env['memory_gib']} GiB, {env['platform']}, Python {env['python']}",
        f"- Engine: vllm-cpu {meta['version']}, model {a.model_label}, `--max-num-seqs 4 --enforce-eager --dtype bfloat16`",
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

    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    if args.model_path is None:
        from specbench.models import prepare
        args.model_path = str(prepare("smollm2"))
    args.model_label = Path(args.model_path).name
    version = dist_version(args.vllm_python, "vllm-cpu") or dist_version(args.vllm_python, "vllm") or "unknown"
    env = environment.collect("vllm", version, {})
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="fidelity-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results, busy = [], []

    servers: list[tuple[str, dict | None]] = [("baseline", None)] + ([] if args.no_ngram or args.url else [("ngram", NGRAM)])
    for variant, spec in servers:
        proc = None
        try:
            if args.url:
                base_url = args.url.rstrip("/")
                served = args.served_name or _served_name(base_url)
            else:
                if port_in_use("127.0.0.1", args.port):
                    raise SystemExit(f"port {args.port} is in use: pass --port")
                served = args.served_name or "smollm2"
                base_url = f"http://127.0.0.1:{args.port}"
                proc = launch(args.model_path, served, args.port, spec, workdir)
                cfg = make_cfg(args.model_path, served, workdir / "p.jsonl", args.output_len, args.concurrency)
                eng = VLLMEngine(cfg, args.model_path, served)

                async def ready() -> float:
                    async with make_http_client(1) as http:
                        return await proc.wait_ready(lambda: eng.probe_ready(http, base_url), 300)
                print(f"{variant}: server pid {proc.pid} ready in {asyncio.run(ready()):.0f}s", flush=True)
            res = measure_server(args, variant, base_url, served, args.model_path, workdir, proc)
            results.append(res)
            busy += res["busy"]
        finally:
            if proc is not None:
                proc.stop(grace_s=30)
                print(f"{variant}: server stopped (survivors: {proc.survivors() or 'none'})", flush=True)

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
            "cmd": ("python scripts/fidelity.py " + " ".join(sys.argv[1:] if argv is None else argv)).strip()}
    (workdir / "runs.json").write_text(json.dumps({"meta": meta, "results": results}, default=str, indent=1))
    write_doc(Path(args.out), results, meta)
    print(f"raw runs in {workdir / 'runs.json'}")
    return 0


def write_doc(out: Path, results: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    md = render(results, meta)
    print("\n" + summarize(results)[0] + "\n\n" + acceptance_table(results))
    notes = ""
    if out.exists() and NOTES_MARKER in out.read_text():
        notes = out.read_text().split(NOTES_MARKER, 1)[1]
    out.write_text(md + "\n" + NOTES_MARKER + (notes or "\n"))
    print(f"\nwrote {out}")


def _served_name(base_url: str) -> str:
    import httpx

    return httpx.get(base_url + "/v1/models", timeout=10).json()["data"][0]["id"]


if __name__ == "__main__":
    sys.exit(main())

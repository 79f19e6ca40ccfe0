"""The matrix runner: one engine launch per variant, the identical sweep on each, raw records on disk.

Flow: config -> plan (launches, sweep) -> server -> client -> records -> statistics -> report.
Each variant is launched once for its whole sweep. Request records are appended one by one; a window
(one repeat of one cell) counts only once its WindowRecord is written, so an interrupted window is
measured again from scratch on resume, and nothing already measured is ever rewritten.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import shlex
import signal
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

from . import environment
from .client import PlannedRequest, make_http_client, run_closed_loop
from .config import RunConfig, VerdictConfig, check_model_context, dump_config
from .engines.base import Engine
from .errors import ConfigError, EngineDiedError, EngineStartError, Interrupted, PreflightError, RunDirError
from .launch import VariantLaunch, make_engine, plan_launches
from .plan import Sweep, SweepPoint, build_sweep, warmup_requests, window_requests
from .progress import Reporter, make_reporter
from .records import RequestRecord, WindowRecord
from .rundir import JsonlAppender, RunDir, atomic_write, write_json
from .reuse import copy_reusable, variant_fingerprints
from .server import EngineProcess, port_in_use, port_owner

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass
class RunOptions:
    out: Path | None = None  # the run directory; default <output_dir>/<name>-<timestamp>
    resume: bool = False
    force: bool = False
    reuse: Path | None = None  # an earlier run whose unchanged variants are taken as they are
    skip_preflight: bool = False
    reporter: Reporter | None = None


@dataclass
class RunResult:
    run_dir: Path
    status: dict[str, str] = field(default_factory=dict)  # variant -> done | failed | reused
    interrupted: str | None = None


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: ("<redacted>" if any(m in k.upper() for m in SECRET_MARKERS) else v) for k, v in env.items()}


def api_headers(cfg: RunConfig) -> dict[str, str] | None:
    """The API key is read from the environment variable the config names; it is never stored."""
    name = cfg.engine.api_key_env
    if not name:
        return None
    key = os.environ.get(name)
    if not key:
        raise PreflightError(f"engine.api_key_env: environment variable {name} is not set")
    return {"Authorization": f"Bearer {key}"}


class MatrixRunner:
    def __init__(self, cfg: RunConfig, opts: RunOptions):
        self.cfg = cfg
        self.opts = opts
        self.reporter = opts.reporter or make_reporter()
        self.rd: RunDir
        self.meta: dict[str, Any] = {}
        self.window_tp: dict[str, float] = {}  # window_id -> output throughput (adaptive repeats)

    # -- setup ------------------------------------------------------------------------------------
    def _prepare(self) -> tuple[Engine, list[VariantLaunch], Sweep]:
        from .models import prepare_all, resolve_model
        from .prompts import load_prompts

        m = self.cfg.model
        if self.cfg.engine.kind == "external" and m.path and not Path(m.path).expanduser().is_dir():
            # an endpoint someone else runs: model.path is the name it serves, nothing local to read
            model_path, tokenizer_path = m.path, m.tokenizer
        else:
            prepare_all(self.cfg)  # demo models (target, and a demo draft model) are built on first use
            model_path, tokenizer_path = resolve_model(m)
            check_model_context(self.cfg, model_path)  # sweep.output_lens vs the model's context
        api_headers(self.cfg)  # an unset engine.api_key_env is refused before anything starts
        served = self.cfg.model.served_name or str(model_path)
        engine = make_engine(self.cfg, str(model_path), served)
        launches = plan_launches(self.cfg, engine)
        prompts = load_prompts(self.cfg.sweep.prompts)
        pad = None
        if self.cfg.sweep.input_lens:
            if tokenizer_path is None:
                raise ConfigError("model.tokenizer", "sweep.input_lens needs a local tokenizer folder")
            pad = _padder(str(tokenizer_path))
        sweep = build_sweep(self.cfg, prompts, pad)
        return engine, launches, sweep

    def _open_run_dir(self) -> RunDir:
        o = self.opts
        if o.out is None:
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            o.out = Path(self.cfg.output_dir) / f"{self.cfg.name}-{stamp}"
        rd = RunDir(o.out)
        self._check_run_dir(rd)
        if not o.resume and rd.path.exists() and any(rd.path.iterdir()):
            if rd.has_measurements():
                # --force never deletes measurements: earlier raw files are set aside, not removed
                stamp = datetime.now().strftime('%Y%m%d-%H%M%S')
                aside = rd.path / f"previous-{stamp}"
                n = 1
                while aside.exists():  # two --force runs within one second must not collide
                    n += 1
                    aside = rd.path / f"previous-{stamp}-{n}"
                aside.mkdir()
                for name in ("requests.jsonl", "windows.jsonl", "run.json", "requests.jsonl.torn",
                             "windows.jsonl.torn"):
                    if (rd.path / name).exists():
                        (rd.path / name).rename(aside / name)
        rd.path.mkdir(parents=True, exist_ok=True)
        return rd

    def _check_run_dir(self, rd: RunDir) -> None:
        """Refuse a run directory this call must not touch; no side effects (runs before any check)."""
        o = self.opts
        if rd.path.exists() and not rd.path.is_dir():
            raise RunDirError(f"--out: {rd.path} exists and is not a directory")
        if o.resume:
            if not rd.meta.exists():
                raise RunDirError(f"--resume: {rd.path} is not a specbench run directory (no run.json)")
        elif rd.path.exists() and any(rd.path.iterdir()) and not o.force:
            raise RunDirError(f"{rd.path} already exists and is not empty: use --resume to finish it "
                              f"or --force to measure again into it (earlier data is kept aside)")

    # -- the run ------------------------------------------------------------------------------------
    async def run(self) -> RunResult:
        if self.opts.out is not None:
            self._check_run_dir(RunDir(self.opts.out))  # before model resolution and preflight
        engine, launches, sweep = self._prepare()
        if not self.opts.skip_preflight:
            from .preflight import preflight

            problems = preflight(self.cfg, engine, launches, self.cfg.engine.port)
            if problems:
                raise PreflightError("; ".join(problems))
        self.rd = rd = self._open_run_dir()
        fingerprints = variant_fingerprints(self.cfg, engine, launches, sweep)
        self.meta = meta = rd.load_meta() if self.opts.resume else {}
        if self.opts.resume and meta.get("config_hash") not in (None, _config_hash(self.cfg)):
            raise RunDirError(f"--resume: the config differs from the one {rd.path} was started with")
        if "interrupted" in meta:
            meta.setdefault("interruptions", []).append(meta.pop("interrupted"))
        if self.opts.resume:  # also after a kill -9, which leaves no "interrupted" mark behind
            meta.setdefault("resumed", []).append(datetime.now(timezone.utc).isoformat(timespec="seconds"))
        meta.setdefault("run_id", secrets.token_hex(6))
        meta.setdefault("created", datetime.now(timezone.utc).isoformat(timespec="seconds"))
        meta.update(name=self.cfg.name, baseline=self.cfg.baseline.name, config_hash=_config_hash(self.cfg))
        if self.cfg.sweep.input_lens:
            from .prompts import padding_document

            meta["padding_document"] = padding_document().source
        variants_meta = meta.setdefault("variants", {})
        for vl in launches:
            vm = variants_meta.setdefault(vl.name, {"status": "pending"})
            vm.update(drafter=vl.drafter.name, fingerprint=fingerprints[vl.name])
        atomic_write(rd.config, dump_config(self.cfg))
        write_json(rd.environment, environment.collect(
            self.cfg.engine.kind, engine.version(), {vl.name: vl.drafter.name for vl in launches}))
        self._write_fairness(launches)
        rd.save_meta(meta)

        requests_out = JsonlAppender(rd.requests)  # opening repairs a torn tail (before --reuse appends too)
        windows_out = JsonlAppender(rd.windows)
        if self.opts.reuse:
            self._reuse(self.opts.reuse, fingerprints)
        done_windows = {w.window_id for w in rd.window_records()}
        if self.cfg.sweep.adaptive:  # resume: adaptive stopping needs the finished windows' throughputs
            from .metrics import window_throughput

            by_window: dict[str, list[RequestRecord]] = {}
            for rec in rd.request_records():
                if rec.window_id in done_windows:
                    by_window.setdefault(rec.window_id, []).append(rec)
            self.window_tp = {w: tp for w, recs in by_window.items() if (tp := window_throughput(recs)) is not None}
        todo = {vl.name: self._todo(vl, sweep, done_windows) for vl in launches}
        self.reporter.start(sum(n for _, n in todo.values()))
        result = RunResult(run_dir=rd.path)
        try:
            for vl in launches:
                vm = variants_meta[vl.name]
                if vm["status"] == "reused" or not todo[vl.name][0]:
                    if vm["status"] != "reused":
                        vm["status"] = "done"
                    continue
                await self._measure_variant(engine, vl, sweep, done_windows, requests_out, windows_out)
                rd.save_meta(meta)
        finally:
            requests_out.close()
            windows_out.close()
            rd.save_meta(meta)
            self.reporter.close()
        result.status = {n: v["status"] for n, v in variants_meta.items()}
        return result

    def _todo(self, vl: VariantLaunch, sweep: Sweep, done: set[str]) -> tuple[list[SweepPoint], int]:
        """Points with windows still to measure, and how many requests that is (for the ETA)."""
        points, n = [], 0
        for p in sweep.points:
            missing = self._windows_to_do(p.key(vl.name).cell_id, done)
            if missing:
                points.append(p)
                n += missing * self.cfg.sweep.waves * p.concurrency
        return points, n

    def _windows_to_do(self, cell_id: str, done: set[str]) -> int:
        """Windows a cell still needs: the fixed repeats, then (adaptive) one more until its interval is
        narrow enough or the cap is reached. Counts what is known now, for planning and the ETA."""
        from .metrics import adaptive_done

        s = self.cfg.sweep
        ids = [f"{cell_id}|r{r}" for r in range(1, max(s.repeats, s.adaptive.max_repeats if s.adaptive else 0) + 1)]
        have = [w for w in ids if w in done]
        missing = max(0, s.repeats - len(have))
        if missing == 0 and s.adaptive and len(have) < s.adaptive.max_repeats:
            tps = [self.window_tp[w] for w in have if w in self.window_tp]
            if not adaptive_done(tps, s.adaptive.target_rel_half_width):
                missing = 1
        return missing

    async def _measure_variant(self, engine: Engine, vl: VariantLaunch, sweep: Sweep, done: set[str],
                               requests_out: JsonlAppender, windows_out: JsonlAppender) -> None:
        engine = vl.engine or engine  # a variant with its own command runs under the command engine
        vm = self.meta["variants"][vl.name]
        vdir = self.rd.variant_dir(vl.name)
        vdir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        proc: EngineProcess | None = None
        max_c = max(self.cfg.sweep.concurrency)
        vm["status"] = "starting"  # so an interruption during startup is recorded as one
        try:
            async with make_http_client(max_c) as http:
                http.headers.update(api_headers(self.cfg) or {})  # probes and scrapes authenticate too
                if vl.spec is not None:
                    write_json(vdir / "command.json", {"argv": vl.spec.argv, "env": redact_env(vl.spec.env)})
                    atomic_write(vdir / "command.sh", _shell_line(vl.spec.argv, redact_env(vl.spec.env)) + "\n")
                    if port_in_use(self.cfg.engine.host, self.cfg.engine.port):
                        owner = port_owner(self.cfg.engine.port) or "unknown process"
                        raise EngineStartError(f"{vl.name}: port {self.cfg.engine.port} is already in use "
                                               f"by {owner} (engine.port)")
                    proc = EngineProcess(vl.name, vl.spec, vdir / "server.log", self.cfg.engine.host,
                                         self.cfg.engine.port, reaper_grace_s=self.cfg.engine.stop_timeout_s)
                    self.reporter.phase(vl.name, "starting engine")
                    proc.start()
                    vm["pid"] = proc.pid

                    def on_wait(elapsed: float, line: str) -> None:
                        self.reporter.phase(vl.name, f"startup {elapsed:.0f}s | {line[-70:]}")

                    vm["startup_s"] = round(await proc.wait_ready(
                        lambda: engine.probe_ready(http, vl.base_url), self.cfg.engine.startup_timeout_s,
                        on_wait), 2)
                    self.reporter.log(f"{vl.name}: engine ready in {vm['startup_s']:.1f}s")
                else:
                    self.reporter.phase(vl.name, "checking endpoint")
                    if not await engine.probe_ready(http, vl.base_url):
                        raise EngineStartError(f"{vl.name}: endpoint {vl.base_url} does not generate")
                vm["status"] = "running"
                self.rd.save_meta(self.meta)
                headers = api_headers(self.cfg)
                warm = warmup_requests(self.cfg, sweep, vl.name)
                if warm:
                    self.reporter.phase(vl.name, f"warmup ({len(warm)} requests)")
                    await run_closed_loop(engine, http, vl.base_url, warm, 1, self.cfg.sweep.request_timeout_s,
                                          requests_out.append, headers)
                for point in sweep.points:
                    await self._measure_point(engine, http, vl, sweep, point, done, proc, headers,
                                              requests_out, windows_out)
            vm["status"] = "done"
            vm.pop("reason", None)
        except (EngineStartError, EngineDiedError) as exc:
            vm["status"] = "failed"
            vm["reason"] = str(exc).splitlines()[0]
            self.reporter.log(f"{vl.name}: FAILED: {exc}")
        finally:
            if proc is not None:
                self.reporter.phase(vl.name, "stopping engine")
                proc.stop(grace_s=self.cfg.engine.stop_timeout_s)
            vm["wall_s"] = round(vm.get("wall_s", 0) + time.monotonic() - t0, 1)

    async def _measure_point(self, engine: Engine, http: httpx.AsyncClient, vl: VariantLaunch, sweep: Sweep,
                             point: SweepPoint, done: set[str], proc: EngineProcess | None,
                             headers: dict[str, str] | None, requests_out: JsonlAppender,
                             windows_out: JsonlAppender) -> None:
        from .metrics import adaptive_done, window_throughput

        s = self.cfg.sweep
        key = point.key(vl.name)
        adaptive = s.adaptive
        max_repeats = max(s.repeats, adaptive.max_repeats) if adaptive else s.repeats
        flushed = False
        for repeat in range(1, max_repeats + 1):
            throughputs = [self.window_tp[w] for r in range(1, repeat)
                           if (w := f"{key.cell_id}|r{r}") in self.window_tp]
            if repeat > s.repeats and (adaptive is None or
                                       adaptive_done(throughputs, adaptive.target_rel_half_width)):
                break
            window_id = f"{key.cell_id}|r{repeat}"
            if window_id in done:
                continue
            if not flushed:
                await engine.between_cells(http, vl.base_url)
                flushed = True
            planned = window_requests(self.cfg, sweep, point, vl.name, repeat)
            self.reporter.phase(vl.name, f"{point.category} out={point.output_len} c={point.concurrency} "
                                         f"rep {repeat}")
            records = await self._run_window(engine, http, vl, planned, point.concurrency, window_id, repeat,
                                             headers, requests_out, windows_out, proc)
            done.add(window_id)
            tp = window_throughput(records)
            if tp is not None:
                self.window_tp[window_id] = tp

    async def _run_window(self, engine: Engine, http: httpx.AsyncClient, vl: VariantLaunch,
                          planned: list[PlannedRequest], concurrency: int, window_id: str, repeat: int,
                          headers: dict[str, str] | None, requests_out: JsonlAppender,
                          windows_out: JsonlAppender, proc: EngineProcess | None) -> list[RequestRecord]:
        run_id = self.meta["run_id"]
        before = await engine.read_counters(http, vl.metrics_url) if engine.counter_acceptance else None
        t_start = time.time()

        def on_record(rec: RequestRecord) -> None:
            rec.run_id = run_id
            requests_out.append(rec)
            self.reporter.advance()

        records = await run_closed_loop(engine, http, vl.base_url, planned, concurrency,
                                        self.cfg.sweep.request_timeout_s, on_record, headers)
        t_end = time.time()
        if proc is not None and not proc.alive():
            # The window is left without its WindowRecord: resume measures it again from scratch.
            raise EngineDiedError(f"{vl.name}: engine exited with code {proc.exit_code()} during "
                                  f"{window_id}; see {proc.log_path}")
        counters, per_pos = None, None
        if before is not None:
            after = await engine.read_counters(http, vl.metrics_url)
            counters, per_pos = counter_delta(before, after)
        first = planned[0].fields
        gpu = environment.gpu_telemetry()  # clocks, power, temperature after the window (None: no nvidia-smi)
        windows_out.append(WindowRecord(
            run_id=run_id, window_id=window_id, variant=vl.name, cell_id=first["cell_id"],
            point_id=first["point_id"], repeat=repeat, t_start=t_start, t_end=t_end, n_requests=len(records),
            counters=counters, per_position_accepted=per_pos, extra={"gpu": gpu} if gpu else {}))
        return records

    # -- side files -------------------------------------------------------------------------------
    def _write_fairness(self, launches: list[VariantLaunch]) -> None:
        from .fairness import audit

        write_json(self.rd.fairness, audit(launches).to_dict())

    def _reuse(self, source: Path, fingerprints: dict[str, str]) -> None:
        reusable = copy_reusable(source, self.rd, fingerprints)
        for name in sorted(reusable):
            self.meta["variants"][name].update(status="reused", reused_from=str(source), wall_s=0.0)
            self.reporter.log(f"{name}: unchanged since {source}: reusing its measurements")
        for name in sorted(set(fingerprints) - reusable):
            self.reporter.log(f"{name}: changed or not measured in {source}: measuring")
        self.rd.save_meta(self.meta)


def counter_delta(before: dict[str, Any], after: dict[str, Any]) -> tuple[dict[str, float], list[float] | None]:
    """Counter increases over a window (server-wide totals are never used as a run metric)."""
    counters = {k: float(after[k]) - float(before.get(k) or 0.0) for k, v in after.items()
                if k != "per_position" and v is not None}
    pa, pb = after.get("per_position") or [], before.get("per_position") or []
    per_pos = [a - (pb[i] if i < len(pb) else 0.0) for i, a in enumerate(pa)] or None
    return counters, per_pos


def _shell_line(argv: list[str], env: dict[str, str]) -> str:
    """For reading and copy-paste only: specbench itself never runs a shell."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (prefix + " " if prefix else "") + shlex.join(argv)


def _config_hash(cfg: RunConfig) -> str:
    """What the measurements depend on: the config without its `verdict` section (advice only)."""
    return hashlib.sha256(dump_config(cfg.model_copy(update={"verdict": VerdictConfig()})).encode()).hexdigest()[:16]


def _padder(tokenizer_path: str):
    from .prompts import load_tokenizer, pad_prompt

    tok = load_tokenizer(tokenizer_path)
    return lambda text, n: pad_prompt(text, n, tok)


def run_matrix(cfg: RunConfig, opts: RunOptions) -> RunResult:
    """Run (or resume) a matrix, then derive cells and the report. SIGINT/SIGTERM stop every engine."""
    runner = MatrixRunner(cfg, opts)

    async def main() -> RunResult:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        try:
            return await runner.run()
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    try:
        result = asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        rd = getattr(runner, "rd", None)
        if rd is None:
            raise Interrupted("interrupted before anything was measured") from None
        runner.meta["interrupted"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        for vm in runner.meta.get("variants", {}).values():
            if vm.get("status") in ("running", "starting"):
                vm["status"] = "interrupted"  # resume measures its unfinished windows again
        rd.save_meta(runner.meta)
        try:
            finalize(rd, cfg)  # whatever was measured is still analysed and reported
        except Exception as exc:  # never let the report hide the interruption
            print(f"warning: could not analyse the partial run: {exc}", file=sys.stderr)
        raise Interrupted(f"interrupted: every engine was stopped; measurements kept in {rd.path}; "
                          f"finish with: specbench run --resume {rd.path}") from None
    finalize(RunDir(result.run_dir), cfg)
    return result


def finalize(rd: RunDir, cfg: RunConfig) -> None:
    """Derive cells.csv and break_even.csv from the raw records, then render the report."""
    from .analysis import analyse_run_dir

    analyse_run_dir(rd, cfg)

"""The stand-in server: `python -m tests.standin.server --port N --format {vllm,sglang,sglang-0.5.9,openai}`.

Serves /v1/chat/completions and /v1/completions (streaming or not, usage and continuous usage stats,
`return_token_ids` on the vllm/openai formats), /v1/models, /health, and per format:
- vllm: /metrics with vllm:spec_decode_* counters, vllm:generation_tokens_total and the TTFT / end-to-end
  latency histograms; with --per-request-spec-decode-metrics summary|detailed (a vLLM 0.32 server flag) the
  request's acceptance as `metrics.speculative_decoding` on the final usage chunk (vLLM's shape);
- sglang (0.5.23 names): /health_generate, /flush_cache, /server_info, native /generate with meta_info
  spec_* fields, `sglext.spec_tokens_details` when a request sends `return_spec_tokens_details` (objects
  shaped by SGLang's own protocol classes: sglang_protocol.py),
  /metrics (sglang:spec_verify_calls_total) with --enable-metrics; streaming chat rejects return_token_ids;
- sglang-0.5.9: the same with the 0.5.9 meta_info names and no sglext.
Tokens derive from the prompt (greedy is reproducible across formats and acceptance rates). With
--accept-rate the server "speculates": each target step (one --ms-per-token sleep) yields the accepted
drafts plus a bonus token in one chunk; with --paced, step j of a request is due at its arrival plus
j x --ms-per-token, so a late wake-up of a loaded machine does not add up over the request (the speed is
set, not left to the scheduler). GET /standin/stats reports what the server saw.
With --ledger DIR (or $STANDIN_LEDGER) every finished generation request appends its ground truth (arrival
and finish time, requests in flight on arrival, prompt, seed, max_tokens, tokens, target steps, accepted and
proposed drafts, histogram) to DIR/<pid>.jsonl, for tests that check specbench's figures against the server.
Faults (--die-after-requests, --http-error-rate, --malformed-sse-after, --truncate-after, --stall-after,
--usage-factor, --empty, --overlong, --lone-surrogate) apply to streamed generation requests only, so
readiness probes still work. Measurement faults:
--spec-metrics-skew (per-request acceptance disagrees with the counters), --histogram-skew-ms (the
server's latency histograms record more than happened), --pre-arrival-ms (time the server spends on a
request before its clock starts, invisible to its histograms).
Tuning (--accept-table K:A,... --step-tokens B): with --drafts-per-step K the server speculates with A
accepted drafts per step on average, set per K and the same for every prompt; a target step of n requests
in flight, each verifying K + 1 tokens (1 when not speculating), takes --ms-per-token x max(1, n(K + 1)/B):
memory-bound up to B tokens a step, compute-bound beyond (a roofline), so the best K falls as the
concurrency rises. With --paced the steps are due at their cumulative times from the arrival.
With --per-batch-size (vLLM's dynamic schedule, JSON ranges) a request drafts the k of the range holding
the number of requests in flight on its arrival (k = 0: plain decoding), from the accept table.
A queue (--slots C --service-ms S): streamed requests wait in FIFO order for one of C slots, hold it for S ms,
then stream their whole output at once: an M/D/c queue, whose TTFT is the wait plus S (open-loop tests).
Engine state on /metrics (vllm, and sglang with --enable-metrics, under each engine's names): requests running
(being served: holding a slot with --slots) and waiting (the rest in flight), KV-cache usage (running /
--kv-capacity), preemptions (one per --preempt-every streamed requests) and the queue-time histogram (the wait
for a slot): with --slots below C the server admits fewer requests than the client keeps in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import json
import os
import random
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .httpserver import Request, Response, Stream, serve
from .sglang_protocol import Protocol, ProtocolError, load
from .tokens import SpecStats, TableSteps, eos_position, plan_steps, prompt_key, token_id, token_text

FORMATS = ("vllm", "sglang", "sglang-0.5.9", "openai")
DRAFTS: contextvars.ContextVar[int] = contextvars.ContextVar("drafts", default=0)  # this request's draft length


@dataclass
class Options:
    port: int
    host: str = "127.0.0.1"
    format: str = "openai"
    served_name: str = "standin"
    startup_delay: float = 0.0
    exit_during_startup: int | None = None
    startup_error: str | None = None
    hang_startup: bool = False
    die_after_requests: int | None = None
    http_error_rate: float = 0.0
    malformed_sse_after: int | None = None
    truncate_after: int | None = None
    stall_after: int | None = None
    tokens_per_chunk: int = 1
    ms_per_token: float = 0.0
    paced: bool = False  # token j of a request is due at arrival + j * ms_per_token: load delays do not add up
    accept_rate: float | None = None
    drafts_per_step: int = 3
    enable_metrics: bool = False
    metrics_errors: int = 0  # answer 500 to the first N /metrics scrapes (-1: to every scrape)
    seed: int = 0
    api_key_env: str | None = None
    no_spec_metrics: bool = False  # vllm format: export no spec_decode counters (as vLLM without a drafter)
    metrics_reset_after: int | None = None  # zero every counter after this many streamed requests (a restart)
    stamp_text: bool = False  # append "|<CLOCK_MONOTONIC ns at send>" to each chunk's text (overhead benchmark)
    vary_acceptance: bool = False  # acceptance differs between repeats of one prompt (not only between prompts)
    spec_field: bool = False  # put the request's verify steps and acceptance length on its final usage chunk
    ledger: str | None = None  # a folder: one JSON line per finished generation request (the ground truth)
    per_request_spec_decode_metrics: str = "none"  # vllm format: none | summary | detailed, as vLLM 0.32
    spec_metrics_skew: int = 0  # added to each request's reported accepted drafts (not to the counters)
    histogram_skew_ms: float = 0.0  # added to every TTFT / e2e histogram observation
    pre_arrival_ms: float = 0.0  # sleep before the request's server-side clock starts
    usage_factor: float = 1.0  # the final usage claims this many times the completion tokens streamed
    empty: bool = False  # streamed requests produce no tokens (only the usage chunk, 0 tokens, and [DONE])
    overlong: int = 1  # streamed requests produce this many times the requested tokens
    eos_id: int | None = None  # the token id the 'model' ends with (at eos_position; generated past with ignore_eos)
    lone_surrogate: bool = False  # the first content chunk's text ends in a lone UTF-16 surrogate (\ud83d)
    strict_model: bool = False  # answer 404 (as vLLM does) to a request naming another model than served_name
    ready_file: str | None = None  # not ready until this file exists (a test decides when, no clock involved)
    slots: int | None = None  # M/D/c: requests served at once; the rest wait in FIFO order
    service_ms: float = 0.0  # M/D/c: how long a request holds its slot before its output streams
    accept_table: str | None = None  # "K:A,...": mean accepted drafts per step at --drafts-per-step K
    step_tokens: float | None = None  # tokens a target step verifies at --ms-per-token (the roofline's knee)
    per_batch_size: str | None = None  # JSON [[start, end, k], ...]: k by the requests in flight on arrival
    preempt_every: int | None = None  # count a preemption at every Nth streamed request (engine state metrics)
    kv_capacity: int = 64  # requests whose KV fits: the KV-cache usage gauge is running / this


@dataclass
class State:
    ready: bool = False
    streams: int = 0  # streamed generation requests received
    requests: int = 0  # all generation requests
    in_flight: int = 0
    decoding: int = 0  # requests between their first and last step (the batch a step of the roofline sees)
    max_in_flight: int = 0
    flushes: int = 0
    scrapes: int = 0  # /metrics requests received
    generation_tokens: int = 0
    spec: SpecStats = field(default_factory=SpecStats)
    per_position: list[int] = field(default_factory=list)
    latency: dict[str, float] = field(default_factory=lambda: {"ttft_sum": 0.0, "ttft_count": 0,
                                                                "e2e_sum": 0.0, "e2e_count": 0})
    bodies: list[dict[str, Any]] = field(default_factory=list)  # last request bodies (for tests)
    running: int = 0  # streamed requests being served (holding a slot when --slots), the rest wait
    preemptions: int = 0
    queue: dict[str, float] = field(default_factory=lambda: {"sum": 0.0, "count": 0})  # time waiting for a slot


def log(msg: str) -> None:
    print(f"[standin {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class StandIn:
    def __init__(self, opts: Options, protocol: Protocol | None = None):
        self.o = opts
        self.s = State()
        self.rng = random.Random(opts.seed)
        self.slots = asyncio.Semaphore(opts.slots) if opts.slots else None  # FIFO: waiters wake in order
        # sglext objects come from SGLang's own classes (sglang_protocol.json); refuse at start, not mid-stream,
        # when a spec_* name used here is not a SpecTokensDetails field of that SGLang
        self.protocol = (protocol or load()) if opts.format == "sglang" else None
        if self.protocol:
            self.protocol.details(self._spec_meta(SpecStats(verify_steps=1, proposed=1, histogram=[1]), 1))

    @property
    def sglang(self) -> bool:
        return self.o.format.startswith("sglang")

    # -- routing ----------------------------------------------------------------------------------
    async def handle(self, req: Request, stream: Stream) -> Response | None:
        p, m = req.path, req.method
        if self.o.api_key_env and p.startswith("/v1/") and \
                req.headers.get("authorization") != f"Bearer {os.environ.get(self.o.api_key_env, '')}":
            return Response.json({"error": {"message": "Unauthorized"}}, 401)
        if p == "/v1/models":
            return Response.json({"object": "list", "data": [{"id": self.o.served_name, "object": "model"}]})
        if p == "/health":
            return Response.json({}, 200 if self.s.ready else 503)
        if p == "/standin/stats":
            return Response.json(self._stats())
        if p == "/metrics":
            self.s.scrapes += 1
            if self.o.metrics_errors < 0 or self.s.scrapes <= self.o.metrics_errors:
                return Response.json({"error": {"message": "metrics unavailable (--metrics-errors)"}}, 500)
            return self._metrics()
        if self.sglang and p == "/health_generate":
            return Response.json({}, 200 if self.s.ready else 503)
        if self.sglang and p == "/flush_cache":
            self.s.flushes += 1
            return Response.text("Cache flushed.\n")
        if self.sglang and p == "/server_info":
            avg = 1 + self.s.spec.accepted / self.s.spec.verify_steps if self.s.spec.verify_steps else None
            return Response.json({"internal_states": [{"avg_spec_accept_length": avg}], "version": "standin"})
        if m == "POST" and p in ("/v1/chat/completions", "/v1/completions") or \
                (self.sglang and m == "POST" and p == "/generate"):
            if not self.s.ready:
                return Response.json({"error": {"message": "server is starting"}}, 503)
            try:
                body = req.json()
            except ValueError:
                return Response.json({"error": {"message": "invalid JSON body"}}, 400)
            self.s.bodies = (self.s.bodies + [body])[-50:]
            if self.o.strict_model and p.startswith("/v1/") and body.get("model") != self.o.served_name:
                return Response.json({"object": "error", "message": f"The model `{body.get('model')}` does "
                                      "not exist.", "type": "NotFoundError", "param": None, "code": 404}, 404)
            return await self._generate(p, body, stream)
        return Response.json({"detail": "Not Found"}, 404)

    def _stats(self) -> dict[str, Any]:
        s = self.s
        return {"ready": s.ready, "streams": s.streams, "requests": s.requests, "max_in_flight": s.max_in_flight,
                "flushes": s.flushes, "generation_tokens": s.generation_tokens,
                "verify_steps": s.spec.verify_steps, "accepted": s.spec.accepted, "proposed": s.spec.proposed,
                "per_position": s.per_position, "last_bodies": s.bodies[-5:]}

    def _metrics(self) -> Response:
        s = self.s
        if self.o.format == "vllm":
            drafts = s.spec.verify_steps
            lines = [
                "# TYPE vllm:generation_tokens_total counter",
                f'vllm:generation_tokens_total{{model_name="{self.o.served_name}"}} {s.generation_tokens}',
            ]
            if self.o.no_spec_metrics:
                return Response.text("\n".join(lines) + "\n")
            lines += [
                "# TYPE vllm:spec_decode_num_drafts_total counter",
                f'vllm:spec_decode_num_drafts_total{{model_name="{self.o.served_name}"}} {drafts}',
                "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
                f'vllm:spec_decode_num_draft_tokens_total{{model_name="{self.o.served_name}"}} {s.spec.proposed}',
                "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
                f'vllm:spec_decode_num_accepted_tokens_total{{model_name="{self.o.served_name}"}} {s.spec.accepted}',
                "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
                *(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name="{self.o.served_name}",'
                  f'position="{i}"}} {v}' for i, v in enumerate(s.per_position)),
                *self._histogram("vllm:time_to_first_token_seconds", "ttft"),
                *self._histogram("vllm:e2e_request_latency_seconds", "e2e"),
                *self._state_lines("vllm:num_requests_running", "vllm:num_requests_waiting",
                                   "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total",
                                   "vllm:request_queue_time_seconds")]
            return Response.text("\n".join(lines) + "\n")
        if self.sglang and self.o.enable_metrics:
            acc_len = 1 + s.spec.accepted / s.spec.verify_steps if s.spec.verify_steps else 0.0
            lines = ["# TYPE sglang:generation_tokens_total counter",
                     f'sglang:generation_tokens_total{{model_name="{self.o.served_name}"}} {s.generation_tokens}',
                     "# TYPE sglang:spec_verify_calls_total counter",
                     f'sglang:spec_verify_calls_total{{model_name="{self.o.served_name}"}} {s.spec.verify_steps}',
                     "# TYPE sglang:spec_accept_length gauge",
                     f'sglang:spec_accept_length{{model_name="{self.o.served_name}"}} {acc_len}',
                     *self._state_lines("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                                        "sglang:num_retracted_requests_total", "sglang:queue_time_seconds")]
            return Response.text("\n".join(lines) + "\n")
        return Response.json({"detail": "Not Found"}, 404)

    def _state_lines(self, running: str, waiting: str, kv: str, preemptions: str, queue: str) -> list[str]:
        """The engine's state under the engine's own names: gauges of running and waiting requests and KV usage,
        the preemption counter and the queue-time histogram (time waiting for a slot)."""
        s, lab = self.s, f'model_name="{self.o.served_name}"'
        return [f"# TYPE {running} gauge", f"{running}{{{lab}}} {s.running}",
                f"# TYPE {waiting} gauge", f"{waiting}{{{lab}}} {s.in_flight - s.running}",
                f"# TYPE {kv} gauge", f"{kv}{{{lab}}} {min(1.0, s.running / self.o.kv_capacity)}",
                f"# TYPE {preemptions[:-6]} counter", f"{preemptions}{{{lab}}} {s.preemptions}",
                f"# TYPE {queue} histogram", f'{queue}_bucket{{{lab},le="+Inf"}} {s.queue["count"]}',
                f"{queue}_count{{{lab}}} {s.queue['count']}", f"{queue}_sum{{{lab}}} {s.queue['sum']}"]

    def _histogram(self, name: str, key: str) -> list[str]:
        """A Prometheus histogram with one (+Inf) bucket: only _sum and _count are read."""
        lab = f'model_name="{self.o.served_name}"'
        count, total = self.s.latency[f"{key}_count"], self.s.latency[f"{key}_sum"]
        return [f"# TYPE {name} histogram", f'{name}_bucket{{{lab},le="+Inf"}} {count}',
                f"{name}_count{{{lab}}} {count}", f"{name}_sum{{{lab}}} {total}"]

    def _observe(self, key: str, seconds: float) -> None:
        self.s.latency[f"{key}_sum"] += seconds + self.o.histogram_skew_ms / 1000
        self.s.latency[f"{key}_count"] += 1

    # -- generation -------------------------------------------------------------------------------
    async def _generate(self, path: str, body: dict[str, Any], stream: Stream) -> Response | None:
        native = path == "/generate"
        sampling = (body.get("sampling_params") or {}) if native else body
        max_tokens = int(sampling.get("max_new_tokens" if native else "max_tokens")
                         or body.get("max_completion_tokens") or 16)
        temperature = float(sampling.get("temperature") or 0.0)
        source = body.get("text") if native else (body.get("messages") or body.get("prompt"))
        key = prompt_key(source, temperature, body.get("seed"))
        n = max_tokens if sampling.get("ignore_eos") else min(max_tokens, eos_position(key))
        finish = "length" if n == max_tokens else "stop"
        streaming = bool(body.get("stream"))
        if streaming and self.o.empty:
            n = 0
        elif streaming:
            n *= self.o.overlong
        chat = path.endswith("chat/completions")
        if streaming and self.sglang and not native and body.get("return_token_ids") and chat:
            return Response.json({"object": "error", "message": "return_token_ids is not supported with "
                                  "streaming on /v1/chat/completions.", "code": 400}, 400)
        self.s.requests += 1
        if streaming:
            self.s.streams += 1
            if self.o.metrics_reset_after is not None and self.s.streams == self.o.metrics_reset_after + 1:
                log(f"resetting every counter after {self.o.metrics_reset_after} streamed requests")
                self.s.generation_tokens, self.s.spec, self.s.per_position = 0, SpecStats(), []
            if self.o.die_after_requests is not None and self.s.streams > self.o.die_after_requests:
                log(f"fatal: simulated crash after {self.o.die_after_requests} requests")
                os._exit(1)
            if self.o.http_error_rate and self.rng.random() < self.o.http_error_rate:
                return Response.json({"object": "error", "message": "simulated internal error", "code": 500}, 500)
        # the output tokens always derive from the prompt; with --vary-acceptance the accept/reject draws
        # also depend on the request's arrival number, so repeated windows accept differently
        plan_key = prompt_key(f"{key}#{self.s.requests}") if self.o.vary_acceptance else key
        steps: list[int] | TableSteps
        stats: SpecStats | None
        table = self._accept_table()
        if table is not None:  # the draft length is looked up at every step (vLLM's dynamic schedule)
            steps = TableSteps(n, table, self._drafts_now)
            stats = steps.stats
        else:
            steps, stats = plan_steps(plan_key, n, self.o.accept_rate, self.o.drafts_per_step, self.o.tokens_per_chunk)
        ids = [token_id(key, i) for i in range(n)]
        if self.o.eos_id is not None and eos_position(key) <= n:
            ids[eos_position(key) - 1] = self.o.eos_id
        self.s.in_flight += 1
        self.s.max_in_flight = max(self.s.max_in_flight, self.s.in_flight)
        entry = {"t_recv": time.time(), "in_flight": self.s.in_flight, "path": path, "stream": streaming,
                 "source": source, "seed": body.get("seed"), "max_tokens": max_tokens, "temperature": temperature,
                 "n_tokens": n, "target_steps": len(steps)}
        try:
            if not streaming:
                await asyncio.sleep(len(steps) * self.o.ms_per_token / 1000)
                self._account(n, stats)
                self._record(entry, stats)
                return Response.json(self._full(path, body, ids, finish, stats))
            if self.o.pre_arrival_ms:
                await asyncio.sleep(self.o.pre_arrival_ms / 1000)
            if self.o.preempt_every and self.s.streams % self.o.preempt_every == 0:
                self.s.preemptions += 1
            if self.slots is not None:
                async with self.slots:  # the queue: wait for a slot, hold it for the service time
                    entry["t_service"] = time.time()
                    with self._serving(entry):
                        await asyncio.sleep(self.o.service_ms / 1000)
                        sent = await self._stream(path, body, stream, ids, steps, finish, stats)
            else:
                with self._serving(entry):
                    sent = await self._stream(path, body, stream, ids, steps, finish, stats)
            if sent:
                self._record(entry, stats)
            return None
        finally:
            self.s.in_flight -= 1

    @contextlib.contextmanager
    def _serving(self, entry: dict[str, Any]) -> Iterator[None]:
        """A streamed request being served: counted as running, its wait for a slot observed as queue time."""
        self.s.queue["sum"] += time.time() - entry["t_recv"]
        self.s.queue["count"] += 1
        self.s.running += 1
        try:
            yield
        finally:
            self.s.running -= 1

    def _drafts_now(self) -> int:
        """The draft length of a step now: --drafts-per-step, or with --per-batch-size the k of the range
        holding the requests in flight (a gap and the tail carry the previous k, as vLLM)."""
        k = self.o.drafts_per_step
        if self.o.per_batch_size:
            k = 0
            for start, _end, rk in sorted(json.loads(self.o.per_batch_size)):
                if start <= self.s.decoding:
                    k = min(int(rk), self.o.drafts_per_step)
        DRAFTS.set(k)
        return k

    def _accept_table(self) -> dict[int, float] | None:
        """--accept-table as {draft length: mean accepted drafts per step}; None: not set."""
        if not self.o.accept_table:
            return None
        table = {int(k): float(a) for k, a in (item.split(":") for item in self.o.accept_table.split(","))}
        if self.o.drafts_per_step not in table:
            raise SystemExit(f"--accept-table has no entry for --drafts-per-step {self.o.drafts_per_step}")
        return table

    def _step_ms(self) -> float:
        """The step just drafted: the roofline of --step-tokens, else --ms-per-token."""
        if not self.o.step_tokens:
            return self.o.ms_per_token
        return self.o.ms_per_token * max(1.0, self.s.decoding * (DRAFTS.get() + 1) / self.o.step_tokens)

    def _record(self, entry: dict[str, Any], stats: SpecStats | None) -> None:
        """Append the request's ground truth to the ledger: what the server did, computed here and not by
        specbench, so tests compare specbench's report against it."""
        if not self.o.ledger:
            return
        entry.update(t_done=time.time(), verify_steps=stats.verify_steps if stats else None,
                     accepted=stats.accepted if stats else None, proposed=stats.proposed if stats else None,
                     histogram=stats.histogram if stats else None)
        with open(os.path.join(self.o.ledger, f"{os.getpid()}.jsonl"), "a") as fh:
            fh.write(json.dumps(entry) + "\n")

    def _account(self, n: int, stats: SpecStats | None) -> None:
        self.s.generation_tokens += n
        if stats:
            sp = self.s.spec
            sp.verify_steps += stats.verify_steps
            sp.accepted += stats.accepted
            sp.proposed += stats.proposed
            for acc, count in enumerate(stats.histogram):  # accepted at position i = steps accepting > i
                for pos in range(acc):
                    while len(self.s.per_position) <= pos:
                        self.s.per_position.append(0)
                    self.s.per_position[pos] += count

    async def _stream(self, path: str, body: dict[str, Any], stream: Stream, ids: list[int],
                      steps: list[int] | TableSteps, finish: str, stats: SpecStats | None) -> bool:
        """Stream the steps; True when the whole output was sent (no injected fault cut it short)."""
        o = self.o
        native = path == "/generate"
        opts = body.get("stream_options") or {}
        usage_each = bool(opts.get("continuous_usage_stats"))
        prompt_tokens = self._prompt_tokens(body)
        rid = f"cmpl-{uuid.uuid4().hex[:12]}"
        arrival = time.perf_counter()  # the server's clock for this request (vLLM: arrival_time)
        await stream.start()
        done = 0
        due = arrival
        self.s.decoding += 1  # until the last step is sent: the client's next request never overlaps it
        try:
            for j, k in enumerate(steps):
                if o.stall_after is not None and j >= o.stall_after:
                    log(f"stalling stream {rid} after {j} chunks")
                    await asyncio.sleep(3600)
                if o.truncate_after is not None and j >= o.truncate_after:
                    log(f"truncating stream {rid} after {j} chunks")
                    stream.abort()
                    return False
                if o.malformed_sse_after is not None and j >= o.malformed_sse_after:
                    await stream.raw(b'data: {"choices": [{"delta": {"content": "x"\n\n')
                    await stream.raw(b"data: [DONE]\n\n")
                    await stream.end()
                    return False
                if o.ms_per_token and o.paced and o.step_tokens:
                    due += self._step_ms() / 1000
                    await asyncio.sleep(max(0.0, due - time.perf_counter()))
                elif o.ms_per_token and o.paced:
                    await asyncio.sleep(max(0.0, arrival + (j + 1) * o.ms_per_token / 1000 - time.perf_counter()))
                elif o.ms_per_token:
                    await asyncio.sleep(o.ms_per_token / 1000)
                chunk_ids = ids[done:done + k]
                if done == 0:
                    self._observe("ttft", time.perf_counter() - arrival)
                done += k
                last = done == len(ids)
                if native:
                    await stream.event(self._native(ids[:done], body, prompt_tokens, finish if last else None,
                                                    stats if last else None, rid))
                    continue
                event = self._chunk(path, body, rid, chunk_ids, finish if last else None,
                                    {"prompt_tokens": prompt_tokens, "completion_tokens": done,
                                     "total_tokens": prompt_tokens + done} if usage_each else None)
                if o.lone_surrogate and j == 0:  # json.dumps writes the escape \ud83d: a lone surrogate once decoded
                    choice = event["choices"][0]
                    if "delta" in choice:
                        choice["delta"]["content"] += "\ud83d"
                    else:
                        choice["text"] += "\ud83d"
                await stream.event(event)
        finally:
            self.s.decoding -= 1
        if isinstance(steps, TableSteps):  # known once streamed: a request that never drafted has none
            stats = steps.final_stats()
        self._account(len(ids), stats)
        self._observe("e2e", time.perf_counter() - arrival)
        if not native:
            fields = self._sglext_fields(body, stats)
            if fields and self.protocol:
                await stream.event(self.protocol.chunk(path.endswith("chat/completions"), rid, int(time.time()),
                                                       o.served_name, fields))
            if opts.get("include_usage"):  # vLLM: per-request metrics ride on this chunk only
                final: dict[str, Any] = {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()),
                                         "model": o.served_name, "choices": [],
                                         "usage": {"prompt_tokens": prompt_tokens,
                                                   "completion_tokens": round(len(ids) * o.usage_factor),
                                                   "total_tokens": prompt_tokens + round(len(ids) * o.usage_factor)}}
                if o.spec_field and stats:  # a custom server's own acceptance field (engine.acceptance_field)
                    final["standin_spec"] = {"verify_steps": stats.verify_steps,
                                             "accept_length": len(ids) / stats.verify_steps}
                metrics = self._vllm_metrics(stats)
                if metrics:
                    final["metrics"] = metrics
                await stream.event(final)
        await stream.event(b"[DONE]")
        await stream.end()
        return True

    def _prompt_tokens(self, body: dict[str, Any]) -> int:
        src = body.get("messages") or body.get("prompt") or body.get("text") or ""
        text = " ".join(_content_text(m.get("content", "")) for m in src if isinstance(m, dict)) \
            if isinstance(src, list) else str(src)
        return max(1, len(text.split()))

    def _chunk(self, path: str, body: dict[str, Any], rid: str, ids: list[int], finish: str | None,
               usage: dict[str, int] | None) -> dict[str, Any]:
        text = "".join(token_text(t) for t in ids)
        if self.o.stamp_text:
            text += f"|{time.monotonic_ns()}"
        chat = path.endswith("chat/completions")
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
        if chat:
            choice["delta"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        if body.get("return_token_ids") and not self.sglang:
            choice["token_ids"] = ids
        out: dict[str, Any] = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                               "created": int(time.time()), "model": self.o.served_name, "choices": [choice]}
        if usage is not None:
            out["usage"] = usage
        return out

    def _full(self, path: str, body: dict[str, Any], ids: list[int], finish: str,
              stats: SpecStats | None) -> dict[str, Any]:
        prompt_tokens = self._prompt_tokens(body)
        if path == "/generate":
            return self._native(ids, body, prompt_tokens, finish, stats, f"gen-{uuid.uuid4().hex[:12]}")
        text = "".join(token_text(t) for t in ids)
        chat = path.endswith("chat/completions")
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
        out: dict[str, Any] = {"id": f"cmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion" if chat
                               else "text_completion", "created": int(time.time()), "model": self.o.served_name,
                               "choices": [choice], "usage": {"prompt_tokens": prompt_tokens,
                                                              "completion_tokens": len(ids),
                                                              "total_tokens": prompt_tokens + len(ids)}}
        fields = self._sglext_fields(body, stats)
        if fields and self.protocol:
            out["sglext"] = self.protocol.sglext(fields)
        metrics = self._vllm_metrics(stats)
        if metrics:
            out["metrics"] = metrics
        return out

    def _vllm_metrics(self, stats: SpecStats | None) -> dict[str, Any] | None:
        """`metrics.speculative_decoding` as vLLM 0.32 fills it (RequestSpecDecodeMetrics.to_dict): a dense
        histogram of drafting steps by accepted drafts, counts, and per-step arrays at `detailed`."""
        level = self.o.per_request_spec_decode_metrics
        if self.o.format != "vllm" or level == "none" or not stats:
            return None
        k = self.o.drafts_per_step
        hist = (stats.histogram + [0] * (k + 1))[:k + 1]
        accepted = stats.accepted + self.o.spec_metrics_skew
        steps = sum(hist)
        sd: dict[str, Any] = {"mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
                              "draft_acceptance_rate": accepted / stats.proposed if stats.proposed else 0.0,
                              "acceptance_histogram": hist, "num_spec_steps": steps,
                              "num_accepted_draft_tokens": accepted, "num_draft_tokens": stats.proposed,
                              "num_spec_tokens": k}
        if level == "detailed":
            sd["per_step_accepted"] = list(stats.per_step)
            sd["per_step_drafted"] = [k] * len(stats.per_step)
        return {"speculative_decoding": sd}

    def _spec_meta(self, stats: SpecStats, completion: int) -> dict[str, Any]:
        """The spec_* fields as SGLang's TokenizerManager fills them (names by version)."""
        meta: dict[str, Any] = {"spec_verify_ct": stats.verify_steps,
                                "spec_accept_length": completion / stats.verify_steps,
                                "spec_accept_rate": stats.accepted / stats.proposed if stats.proposed else 0.0}
        if self.o.format == "sglang-0.5.9":
            meta.update(spec_accept_token_num=stats.accepted, spec_draft_token_num=stats.proposed,
                        spec_accept_histogram=stats.histogram)
        else:
            meta.update(spec_num_correct_drafts=stats.accepted, spec_num_proposed_drafts=stats.proposed,
                        spec_correct_drafts_histogram=stats.histogram)
        return meta

    def _sglext_fields(self, body: dict[str, Any], stats: SpecStats | None) -> dict[str, Any] | None:
        """The SpecTokensDetails values of a request that asked for them (serving_chat copies meta_info's)."""
        if self.o.format != "sglang" or not body.get("return_spec_tokens_details") or not stats:
            return None
        completion = sum(stats.histogram[i] * (i + 1) for i in range(len(stats.histogram)))
        return self._spec_meta(stats, completion)

    def _native(self, ids: list[int], body: dict[str, Any], prompt_tokens: int, finish: str | None,
                stats: SpecStats | None, rid: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"id": rid, "prompt_tokens": prompt_tokens, "completion_tokens": len(ids),
                                "finish_reason": {"type": finish, "length": len(ids)} if finish else None}
        if stats:
            meta.update(self._spec_meta(stats, len(ids)))
        return {"text": "".join(token_text(t) for t in ids), "output_ids": ids, "meta_info": meta}


def _content_text(content: Any) -> str:
    """A message's content as text: a string, or OpenAI content parts (vLLM's bench client sends
    [{"type": "text", "text": ...}])."""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


# -- process ------------------------------------------------------------------------------------------
READY_LINE = {"sglang": "The server is fired up and ready to roll!", "vllm": "Application startup complete.",
              "openai": "Application startup complete."}


async def run(opts: Options) -> None:
    log(f"stand-in server pid={os.getpid()} format={opts.format} port={opts.port} "
        f"speculative={'off' if opts.accept_rate is None else f'accept_rate={opts.accept_rate}'}")
    if opts.exit_during_startup is not None:
        log("loading model weights ...")
        await asyncio.sleep(opts.startup_delay)
        log(opts.startup_error or f"fatal: startup failed (exit code {opts.exit_during_startup})")
        sys.exit(opts.exit_during_startup)
    try:
        app = StandIn(opts)
    except ProtocolError as exc:
        log(f"fatal: {exc}")
        sys.exit(1)
    server = await serve(opts.host, opts.port, app.handle)
    log(f"listening on http://{opts.host}:{opts.port}")
    if opts.hang_startup:
        log("loading model weights ... (hangs: --hang-startup)")
    else:
        await asyncio.sleep(opts.startup_delay)
        while opts.ready_file and not os.path.exists(opts.ready_file):
            await asyncio.sleep(0.02)
        app.s.ready = True
        log(READY_LINE["sglang" if app.sglang else opts.format])
    async with server:
        await server.serve_forever()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tests.standin.server", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--format", choices=FORMATS, default="openai")
    p.add_argument("--served-model-name", dest="served_name", default="standin")
    p.add_argument("--startup-delay", type=float, default=0.0, help="seconds before the server is ready")
    p.add_argument("--exit-during-startup", type=int, metavar="CODE", help="exit with CODE before listening")
    p.add_argument("--startup-error", help="the log line printed before --exit-during-startup exits")
    p.add_argument("--hang-startup", action="store_true", help="listen but never become ready")
    p.add_argument("--ready-file", help="listen, but become ready only once this file exists")
    p.add_argument("--strict-model", action="store_true",
                   help="answer 404 (vLLM's error body) to a generation request naming another model")
    p.add_argument("--die-after-requests", type=int, metavar="N", help="exit(1) when streamed request N+1 arrives")
    p.add_argument("--http-error-rate", type=float, default=0.0, help="fraction of streamed requests answered 500")
    p.add_argument("--malformed-sse-after", type=int, metavar="N", help="send broken JSON after N chunks")
    p.add_argument("--truncate-after", type=int, metavar="N", help="drop the connection after N chunks")
    p.add_argument("--stall-after", type=int, metavar="N", help="stop sending (but keep open) after N chunks")
    p.add_argument("--tokens-per-chunk", type=int, default=1, help="tokens per chunk when not speculating")
    p.add_argument("--ms-per-token", type=float, default=0.0,
                   help="milliseconds per target step (one token, or one verify step when speculating)")
    p.add_argument("--paced", action="store_true",
                   help="pace each request against its arrival clock, so a late wake-up does not slow the rest")
    p.add_argument("--accept-rate", type=float, default=None, help="speculate: P(a draft token is accepted)")
    p.add_argument("--drafts-per-step", type=int, default=3, help="draft tokens proposed per verify step")
    p.add_argument("--enable-metrics", action="store_true", help="sglang formats: serve /metrics")
    p.add_argument("--metrics-errors", type=int, default=0, metavar="N",
                   help="answer 500 to the first N /metrics scrapes (-1: to every one)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fault injection")
    p.add_argument("--no-spec-metrics", action="store_true", help="vllm format: no spec_decode counters")
    p.add_argument("--metrics-reset-after", type=int, metavar="N",
                   help="zero every counter when streamed request N+1 arrives (an engine restart)")
    p.add_argument("--stamp-text", action="store_true",
                   help="append |<monotonic ns at send> to each chunk's text (client timing error)")
    p.add_argument("--vary-acceptance", action="store_true", default=bool(os.environ.get("STANDIN_VARY_ACCEPTANCE")),
                   help="acceptance draws depend on the request's arrival number too (default: on when "
                        "$STANDIN_VARY_ACCEPTANCE is set)")
    p.add_argument("--spec-field", action="store_true",
                   help="speculating: add standin_spec.{verify_steps,accept_length} to the final usage chunk")
    p.add_argument("--ledger", default=os.environ.get("STANDIN_LEDGER"),
                   help="folder for the ground-truth ledger: <pid>.jsonl, one line per finished generation "
                        "request (default: $STANDIN_LEDGER)")
    p.add_argument("--per-request-spec-decode-metrics", choices=("none", "summary", "detailed"), default="none",
                   help="vllm format: per-request acceptance in the response (metrics.speculative_decoding)")
    p.add_argument("--spec-metrics-skew", type=int, default=0,
                   help="add N to each request's reported accepted drafts (disagrees with the counters)")
    p.add_argument("--histogram-skew-ms", type=float, default=0.0,
                   help="add this to every TTFT / e2e histogram observation")
    p.add_argument("--pre-arrival-ms", type=float, default=0.0,
                   help="sleep before the server-side clock of a streamed request starts")
    p.add_argument("--usage-factor", type=float, default=1.0,
                   help="the final usage chunk claims this many times the completion tokens streamed")
    p.add_argument("--empty", action="store_true", help="streamed requests produce no tokens")
    p.add_argument("--eos-id", type=int, default=None,
                   help="the token at eos_position is this id (the output ends there without ignore_eos)")
    p.add_argument("--overlong", type=int, default=1, metavar="F",
                   help="streamed requests produce F times the requested tokens")
    p.add_argument("--lone-surrogate", action="store_true",
                   help="the first chunk of each stream carries a lone UTF-16 surrogate (\\ud83d) in its text")
    p.add_argument("--slots", type=int, default=None,
                   help="queue: serve this many streamed requests at once, the rest wait in FIFO order (M/D/c)")
    p.add_argument("--service-ms", type=float, default=0.0,
                   help="queue: milliseconds a request holds its slot before its output streams")
    p.add_argument("--accept-table", help="K:A,...: speculate with A accepted drafts per step at --drafts-per-step K")
    p.add_argument("--per-batch-size", help="JSON [[start, end, k], ...]: vLLM's dynamic schedule")
    p.add_argument("--step-tokens", type=float, help="a step of n in flight x (K+1) tokens takes --ms-per-token x "
                   "max(1, n(K+1)/STEP_TOKENS)")
    p.add_argument("--preempt-every", type=int, metavar="N",
                   help="count a preemption at every Nth streamed request (vllm:num_preemptions_total)")
    p.add_argument("--kv-capacity", type=int, default=64,
                   help="requests whose KV fits: the KV-cache usage gauge is running / N")
    p.add_argument("--api-key-env", help="require 'Authorization: Bearer $NAME' on /v1/* (401 otherwise), "
                   "like vLLM's --api-key; the key itself never appears on the command line")
    return p


def main(argv: list[str] | None = None) -> None:
    args, unknown = parser().parse_known_args(argv)
    if unknown:
        log(f"ignoring arguments: {' '.join(unknown)}")
    opts = Options(**vars(args))
    try:
        asyncio.run(run(opts))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

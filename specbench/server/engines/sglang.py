"""SGLang: `python -m sglang.launch_server`, readiness by a real generation, per-request acceptance.

Facts used here, checked in the sglang 0.5.23 wheel (and 0.5.9 for the older names):
- `/health_generate` answers 200 only after a real generation (srt/entrypoints/http_server.py);
  `/flush_cache` (GET/POST) clears the prefix cache.
- Per-request acceptance: `TokenizerManager._calculate_spec_decoding_metrics`
  (srt/managers/tokenizer_manager.py) puts `spec_verify_ct`, `spec_accept_length` (= completion_tokens /
  spec_verify_ct, bonus token included), `spec_accept_rate`, `spec_num_correct_drafts`,
  `spec_num_proposed_drafts`, `spec_correct_drafts_histogram` into the native `meta_info`; 0.5.9 names
  the counts `spec_accept_token_num`, `spec_draft_token_num` and the histogram `spec_accept_histogram`.
  OpenAI endpoints copy them into `sglext.spec_tokens_details` on a final chunk with `choices: []` when
  the request has `return_spec_tokens_details: true` (srt/entrypoints/openai/protocol.py SpecTokensDetails,
  serving_chat.py); 0.5.9 has no such field.
- The cumulative `/server_info` `avg_spec_accept_length` is never used (since start, rank 0, sampled).
- Streaming chat rejects `return_token_ids` (serving_chat.py): not sent; losslessness falls back to text.
"""

from __future__ import annotations

from typing import Any

import httpx

from specbench.config import VariantConfig
from specbench.server.engines.base import (
    Engine,
    LaunchSpec,
    Probe,
    RequestSpec,
    check_forced,
    dist_version,
    json_float,
    json_int,
    parse_version,
)
from specbench.server.engines.pins import (
    PREFIX_CACHING_FLAGS,
    SGLANG_GRAPH_FLAG_NEW,
    SGLANG_GRAPH_FLAG_OLD,
    SGLANG_GRAPH_RENAMED_IN,
    SGLANG_MEM_FRACTION_STATIC,
    SGLANG_PREFIX_CACHING_OFF,
    has_option,
    parse_options,
    sglang_pins,
)
from specbench.server.engines.prometheus import scrape, total
from specbench.shared.errors import ConfigError
from specbench.shared.schema import SpecDetails

SPEC_DETAILS_SINCE = (0, 5, 19)  # first release whose OpenAI endpoints take return_spec_tokens_details
COUNTERS = {"verify_steps": "sglang:spec_verify_calls_total",  # >= 0.5.15, with --enable-metrics
            "generation_tokens": "sglang:generation_tokens_total"}
# engine state, with --enable-metrics (sglang 0.5.23 srt/observability/metrics_collector.py: the gauges
# num_running_reqs, num_queue_reqs, token_usage (KV pool fraction in use), the counter of retracted requests
# (SGLang's preemption) and the queue_time_seconds histogram)
STATE = {"running": "sglang:num_running_reqs", "waiting": "sglang:num_queue_reqs", "kv_usage": "sglang:token_usage",
         "preemptions": "sglang:num_retracted_requests_total", "queue_time_sum_s": "sglang:queue_time_seconds_sum",
         "queue_time_count": "sglang:queue_time_seconds_count"}
# forced acceptance (see `simulated_acceptance`): the mode set next to SGLANG_SIMULATE_ACC_LEN
FORCED_MODE = {"SGLANG_SIMULATE_ACC_METHOD": "match-expected", "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}
EAGLE_CHAINS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")  # a chain only with --speculative-eagle-topk 1


class SGLangEngine(Engine):
    kind = "sglang"
    concurrency_flag = "--max-running-requests"
    memory_fraction = ("--mem-fraction-static", float(SGLANG_MEM_FRACTION_STATIC))  # pinned
    rank_flags = ("--nnodes", "--node-rank", "--dist-init-addr")  # srt/server_args.py
    # srt/environ.py SGLANG_SIMULATE_ACC_LEN (default -1: off), _METHOD, _TOKEN_MODE, read at import by
    # speculative/spec_utils.py: see `simulated_acceptance`
    forced_acceptance = ("environment SGLANG_SIMULATE_ACC_LEN=AL, SGLANG_SIMULATE_ACC_METHOD=match-expected, "
                         "SGLANG_SIMULATE_ACC_TOKEN_MODE=real-draft-token (one launch per length; topk=1 chains)")
    forced_env = ("SGLANG_SIMULATE_ACC_LEN", *FORCED_MODE)
    state_metrics = STATE
    distributions = ("sglang",)
    prefix_caching_flags = PREFIX_CACHING_FLAGS  # engine.prefix_caching pins it
    argv_parser = "specbench.server.sglang_flags"
    algorithm_flag = "--speculative-algorithm"

    def prefix_caching(self, argv: list[str]) -> str | None:
        return "off" if SGLANG_PREFIX_CACHING_OFF in argv else "on"

    def argv_problems(self, argv: list[str], version: tuple[int, ...] | None,
                      shown: str) -> list[tuple[str, str]]:
        """The decode cuda-graph flag under the name this version takes (renamed in 0.5.21)."""
        if version is not None and version >= SGLANG_GRAPH_RENAMED_IN and has_option(argv, SGLANG_GRAPH_FLAG_OLD):
            return [(SGLANG_GRAPH_FLAG_OLD, f"{SGLANG_GRAPH_FLAG_OLD} is rejected as ambiguous by SGLang >= 0.5.21 "
                                            f"(engine version {shown}): use {SGLANG_GRAPH_FLAG_NEW}")]
        if version is not None and version < SGLANG_GRAPH_RENAMED_IN and has_option(argv, SGLANG_GRAPH_FLAG_NEW):
            return [(SGLANG_GRAPH_FLAG_NEW, f"{SGLANG_GRAPH_FLAG_NEW} does not exist before SGLang 0.5.21 (engine "
                                            f"version {shown}): use {SGLANG_GRAPH_FLAG_OLD}")]
        return []

    # -- launch -----------------------------------------------------------------------------------
    def launch_spec(self, variant: VariantConfig, drafter_args: list[str], port: int,
                    where: str) -> LaunchSpec:
        e = self.config
        served = ["--served-model-name", self.served_name] if self.served_name != self.model_path else []
        argv = [*e.launch_prefix, self.python(), "-m", "sglang.launch_server",
                "--model-path", self.model_path, *served, "--host", e.host, "--port", str(port),
                *sglang_pins(e.args, self.sweep.max_concurrency, self.version_tuple(), e.prefix_caching),
                *e.args, *drafter_args, *variant.args]
        env = {**e.env, **variant.env}
        if isinstance(variant.forced_acceptance, list):  # refused before any launch (plan_launches), and here
            raise ConfigError(f"{where}.forced_acceptance", str(self.force_refusal(variant)))
        if variant.forced_acceptance is not None:
            env.update(simulated_acceptance([*e.args, *drafter_args, *variant.args], variant.forced_acceptance,
                                            where))
        return LaunchSpec(argv=argv, env=env)

    def fairness_pins(self) -> list[str]:
        return sglang_pins([], self.sweep.max_concurrency, self.version_tuple(), self.config.prefix_caching)

    @staticmethod
    def draft_tokens(args: list[str]) -> int | None:
        """k: EAGLE's --speculative-num-steps (a chain), DFLASH's block size - 1, NGRAM's draft tokens - 1 (its
        --speculative-num-draft-tokens counts the verified root, drafters/ngram.py)."""
        opts = parse_options(list(args))[1]
        algo = opts.get("--speculative-algorithm", "").upper()
        if algo == "DFLASH":
            block = opts.get("--speculative-dflash-block-size") or opts.get("--speculative-num-draft-tokens")
            return int(block) - 1 if block and block.isdigit() else None
        if algo == "NGRAM":
            n = opts.get("--speculative-num-draft-tokens", "")
            return int(n) - 1 if n.isdigit() else None
        steps = opts.get("--speculative-num-steps", "")
        return int(steps) if steps.isdigit() else None

    def version(self) -> str | None:
        if self.config.version:
            return self.config.version
        if self.config.launch_prefix:
            return None  # the engine lives behind a prefix (container, srun): cannot look here
        return dist_version(self.python(), "sglang")

    def version_tuple(self) -> tuple[int, ...] | None:
        return parse_version(self.version())

    # -- readiness --------------------------------------------------------------------------------
    async def probe_ready(self, http: httpx.AsyncClient, base_url: str, timeout_s: float = 30.0) -> Probe:
        """/health_generate runs a real generation and answers 503 until the server's warmup succeeded."""
        try:
            r = await http.get(f"{base_url}/health_generate", timeout=timeout_s)
        except httpx.HTTPError as exc:
            return Probe(False, f"/health_generate: no answer ({type(exc).__name__})")
        return Probe(r.status_code == 200, f"/health_generate: HTTP {r.status_code}")

    # -- requests ---------------------------------------------------------------------------------
    def request_body(self, req: RequestSpec) -> dict[str, Any]:
        """The base OpenAI body plus `return_spec_tokens_details`, sent to every variant (baseline
        included, so request bodies stay identical) unless the version is known to predate it. Older
        servers ignore unknown fields (pydantic default), so an unknown version gets it too."""
        body = super().request_body(req)
        version = self.version_tuple()
        if version is None or version >= SPEC_DETAILS_SINCE:
            body["return_spec_tokens_details"] = True
        return body

    def parse_spec(self, data: dict[str, Any]) -> SpecDetails | None:
        return parse_sglang_spec(data)

    def spec_keys(self) -> tuple[str, ...] | None:
        return ("sglext", "meta_info")  # spec_fields

    # -- cells and counters -----------------------------------------------------------------------
    async def between_cells(self, http: httpx.AsyncClient, base_url: str) -> None:
        """Clear the prefix cache so one cell's prompts do not warm the next cell's."""
        try:
            await http.post(f"{base_url}/flush_cache", timeout=30.0)
        except httpx.HTTPError:
            pass  # a server that cannot flush still measures; the runner's next request shows if it died

    async def read_counters(self, http: httpx.AsyncClient, metrics_url: str) -> dict[str, Any] | None:
        """Verify-step counters as a cross-check (only with --enable-metrics); never the cumulative
        /server_info figure. Per-request sglext data stays the primary acceptance source."""
        try:
            samples = await scrape(http, metrics_url, prefix="sglang:")
        except (httpx.HTTPError, ValueError):
            return None
        out = {k: total(samples, name) for k, name in COUNTERS.items()}
        return {k: v for k, v in out.items() if v is not None} or None


# -- forced acceptance -----------------------------------------------------------------------------
# sglang 0.5.23 srt/environ.py: SGLANG_SIMULATE_ACC_LEN (EnvFloat, -1 = off), SGLANG_SIMULATE_ACC_METHOD (EnvStr,
# "match-expected" in 0.5.23, "multinomial" in older releases: a normal draw around AL, rounded and clamped,
# whose mean is biased), SGLANG_SIMULATE_ACC_TOKEN_MODE (EnvStr, "fixed" or "real-draft-token"). Both set
# explicitly: "fixed" writes token id 100 for every accepted token (spec_utils.py
# generate_simulated_accept_index), which stalls a tokenizer where 100 is a byte token (Kimi K2.x);
# "real-draft-token" keeps the drafter's own chain and a target bonus token, and eagle_utils.py raises
# ("requires speculative_eagle_topk=1") for any tree (EAGLE topk > 1; NGRAM's tree_topk is -1). DFLASH is
# always a chain (speculative_hook.py _handle_dflash sets topk 1). SGLang draws one length per step for the
# whole batch (match-expected: floor(AL) or floor(AL) + 1 with the weights that give mean AL).


def simulated_acceptance(args: list[str], length: float, where: str) -> dict[str, str]:
    """The environment that forces mean acceptance `length` on SGLang, after checking that the launch drafts a
    topk=1 chain of k tokens with 1 <= length <= k + 1 (ConfigError naming the variant's field otherwise)."""
    field = f"{where}.forced_acceptance"
    opts = parse_options(list(args))[1]
    algo = opts.get("--speculative-algorithm", "").upper()
    why = ("SGLang forces acceptance with the drafter's own tokens (SGLANG_SIMULATE_ACC_TOKEN_MODE="
           "real-draft-token) on topk=1 chains only")
    if not algo:
        raise ConfigError(field, "needs a speculative drafter (no --speculative-algorithm)")
    if algo in EAGLE_CHAINS:
        topk = opts.get("--speculative-eagle-topk")
        if topk is None:
            raise ConfigError(field, f"{why}: set params.topk: 1 (and steps), else SGLang picks the tree shape "
                                     f"itself (topk 4 for Llama models)")
        if topk != "1":
            raise ConfigError(field, f"{why}; this {algo} drafts a tree of topk {topk}")
    elif algo != "DFLASH":
        raise ConfigError(field, f"{why}; {algo} verifies a tree (its tree_topk is not 1)")
    check_forced(length, SGLangEngine.draft_tokens(args), where)
    return {"SGLANG_SIMULATE_ACC_LEN": f"{length:g}", **FORCED_MODE}


# -- wire format ------------------------------------------------------------------------------------
_NEW = {"accepted": "spec_num_correct_drafts", "proposed": "spec_num_proposed_drafts",
        "histogram": "spec_correct_drafts_histogram"}
_OLD = {"accepted": "spec_accept_token_num", "proposed": "spec_draft_token_num",  # sglang <= 0.5.9
        "histogram": "spec_accept_histogram"}


def spec_fields(data: dict[str, Any]) -> dict[str, Any] | None:
    """The spec_* mapping of an OpenAI chunk (`sglext.spec_tokens_details`) or a native response
    (`meta_info`), or None when the chunk carries none."""
    ext = data.get("sglext")
    if isinstance(ext, dict):
        details = ext.get("spec_tokens_details")
        if isinstance(details, list):  # n > 1: one per choice; specbench sends n = 1
            details = details[0] if details else None
        if isinstance(details, dict):
            return details
    meta = data.get("meta_info")
    if isinstance(meta, dict) and any(k.startswith("spec_") for k in meta):
        return meta
    return None


def parse_sglang_spec(data: dict[str, Any]) -> SpecDetails | None:
    f = spec_fields(data)
    if f is None:
        return None
    names = _NEW if any(k in f for k in _NEW.values()) else _OLD
    verify = json_int(f.get("spec_verify_ct"))
    length = json_float(f.get("spec_accept_length"))
    if verify is None and length:
        completion = json_int(f.get("completion_tokens"))
        verify = round(completion / length) if completion else None
    hist = f.get(names["histogram"])
    return SpecDetails(
        verify_steps=verify or None,  # 0 steps: nothing was verified (no speculation happened)
        accepted_drafts=json_int(f.get(names["accepted"])),
        proposed_drafts=json_int(f.get(names["proposed"])),
        accept_histogram=[int(x) for x in hist] if isinstance(hist, list) and hist else None,
        reported_accept_length=length or None,
        source="sglang",
        raw={k: v for k, v in f.items() if k.startswith("spec_")})

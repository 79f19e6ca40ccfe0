"""The engine interface: how to launch it, when it is ready, what to send, how to read what comes back.

An engine is one small class. The default behaviour is a plain OpenAI-compatible server; vLLM and
SGLang override the few places where they differ (launch argv, extra request fields, acceptance data).
"""

from __future__ import annotations

import abc
import functools
import subprocess
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
from packaging.version import InvalidVersion, Version

from specbench.config import EngineConfig, VariantConfig
from specbench.plan.drafter import Drafter, DrafterParams, LaunchContext
from specbench.plan.specs import RequestSpec, SweepFacts
from specbench.server.engines.prometheus import scrape, state_of
from specbench.shared.errors import ConfigError
from specbench.shared.schema import SpecDetails


@dataclass(frozen=True)
class LaunchSpec:
    """The exact process to start: an argument list (never a shell string) and the added environment."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class ChunkInfo:
    """What one streamed chunk tells us."""

    text: str = ""
    token_ids: list[int] | None = None
    cumulative_completion_tokens: int | None = None  # usage on this chunk (continuous usage stats)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # final usage chunk
    finish_reason: str | None = None
    spec: SpecDetails | None = None


@dataclass(frozen=True)
class Probe:
    """One readiness probe: ready or not, and what the endpoint answered (for the timeout message)."""

    ready: bool
    detail: str = ""
    fatal: bool = False  # waiting cannot help (the server runs, but under another model name): fail now

    def __bool__(self) -> bool:
        return self.ready


class Engine(abc.ABC):
    kind: ClassVar[str] = ""
    # True when acceptance comes from server-wide counters: cells must then run one at a time, and
    # only the window's own requests may run while the counters are read.
    counter_acceptance: ClassVar[bool] = False
    # (nnodes, node rank, rank-0 address) flags when one server can span several nodes (engine.nodes > 1)
    rank_flags: ClassVar[tuple[str, str, str] | None] = None
    # How a variant's `forced_acceptance` reaches this engine (docs/surface.md); None: it cannot be forced
    forced_acceptance: str | None = None
    # How a per-position profile (`forced_acceptance` as a list) reaches it; None: one mean length only
    forced_profile: str | None = None
    forced_env: tuple[str, ...] = ()  # environment keys the engine sets to force acceptance (not unfair)
    # the engine's state during a window (docs/metrics.md, "Engine state"): key -> Prometheus sample name, keys
    # running, waiting (requests, gauges), kv_usage (fraction, gauge), preemptions, queue_time_sum_s,
    # queue_time_count (counters); empty: the engine publishes none
    state_metrics: ClassVar[dict[str, str]] = {}
    # -- what else the kind decides, asked by the stages outside server/engines/ (docs/architecture.md) ------
    launched: ClassVar[bool] = True  # False: an endpoint already running (nothing started, stopped, relaunched)
    user_command: ClassVar[bool] = False  # the argv is the user's command template (preflight looks for its program)
    distributions: ClassVar[tuple[str, ...]] = ()  # what provides it in engine.python (preflight; the first found)
    prefix_caching_flags: ClassVar[tuple[str, ...]] = ()  # refused in a config: engine.prefix_caching pins it
    dynamic_schedule: ClassVar[bool] = False  # switches draft tokens by batch size within one launch (tune)
    argv_parser: ClassVar[str | None] = None  # the module whose `validate` section runs the engine's own parser
    algorithm_flag: ClassVar[str | None] = None  # the flag naming the algorithm (Drafter.check_engine_args)

    def __init__(self, config: EngineConfig, sweep: SweepFacts, model_path: str, served_name: str):
        self.config = config
        self.sweep = sweep
        self.model_path = model_path
        self.served_name = served_name

    # -- launch -----------------------------------------------------------------------------------
    def python(self) -> str:
        import sys

        return self.config.python or sys.executable

    @abc.abstractmethod
    def launch_spec(self, variant: VariantConfig, drafter_args: list[str], port: int,
                    where: str) -> LaunchSpec | None:
        """None when specbench does not launch anything (an external endpoint). `where`: the variant's
        place in the config (e.g. `variants[2]`), for error messages."""

    def version(self) -> str | None:
        """The engine's version as installed in the chosen interpreter, or None when unknown."""
        return self.config.version

    concurrency_flag: ClassVar[str | None] = None  # caps the requests run at once (a fairness pin)
    memory_fraction: ClassVar[tuple[str, float] | None] = None  # (flag, default): GPU share for weights + KV

    def fairness_pins(self) -> list[str]:
        """The pinned arguments a variant gets when engine.args sets none of them (engines/pins.py)."""
        return []

    # -- forced acceptance (docs/surface.md) ------------------------------------------------------
    def force_refusal(self, variant: VariantConfig) -> str | None:
        """Why this engine cannot force `variant`'s acceptance at all, or None when it may (the drafter's own
        shape is checked by `launch_spec`, which knows the arguments)."""
        if self.forced_acceptance is None:
            return f"engine {self.kind} cannot force acceptance"
        if isinstance(variant.forced_acceptance, list) and self.forced_profile is None:
            return (f"engine {self.kind} forces one mean acceptance length, not a per-position profile (give a "
                    "number)")
        return None

    def drafter_args(self, drafter: Drafter[Any], params: DrafterParams, ctx: LaunchContext) -> list[str]:
        """The drafter's launch arguments on this engine, with what the engine adds to a speculative launch."""
        return drafter.launch_args(params, ctx)

    def prefix_caching(self, argv: list[str]) -> str | None:
        """"on" or "off" as the launch's argv pins prefix caching (server/engines/pins.py); None: not pinned."""
        return None

    def argv_problems(self, argv: list[str], version: tuple[int, ...] | None,
                      shown: str) -> list[tuple[str, str]]:
        """(flag, why) for each flag this engine version refuses in a final argv (`shown`: the version as known)."""
        return []

    def drafter_flags(self, variant: VariantConfig) -> set[str]:
        """Launch flags outside the drafter's arguments that still carry its settings (a command template's
        flags filled from its parameters); the fairness audit does not compare them."""
        return set()

    @staticmethod
    def draft_tokens(args: list[str]) -> int | None:
        """Draft tokens per verify step (k) that these launch arguments give, or None when they do not say."""
        return None

    def base_url(self, variant: VariantConfig, port: int) -> str:
        return f"http://{self.config.host}:{port}"

    def metrics_url(self, variant: VariantConfig, port: int) -> str:
        return self.config.metrics_url or f"{self.base_url(variant, port)}/metrics"

    # -- readiness --------------------------------------------------------------------------------
    async def probe_ready(self, http: httpx.AsyncClient, base_url: str, timeout_s: float = 30.0) -> Probe:
        """Ready once the engine really generates (a 1-token completion on the endpoint the sweep uses:
        a model without a chat template never answers chat), not merely answers HTTP."""
        body: dict[str, Any] = {"model": self.served_name, "max_tokens": 1, "temperature": 0.0}
        if self.sweep.endpoint == "chat":
            path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": "Hi"}]
        else:
            path, body["prompt"] = "/v1/completions", "Hi"
        try:
            r = await http.post(f"{base_url}{path}", json=body, timeout=timeout_s)
        except httpx.HTTPError as exc:
            return Probe(False, f"{path}: no answer ({type(exc).__name__})")
        if r.status_code != 200:
            return await self._refusal(http, base_url, f"{path}: HTTP {r.status_code}", r)
        try:
            data = r.json()
        except ValueError:  # e.g. a wrapper that always streams: "data: {...}" lines
            return Probe(False, f"{path}: HTTP 200 with a body that is not JSON ({r.text[:60]!r})")
        if not (isinstance(data, dict) and data.get("choices")):
            return Probe(False, f"{path}: HTTP 200 without choices ({r.text[:60]!r})")
        return Probe(True)

    async def _refusal(self, http: httpx.AsyncClient, base_url: str, what: str, r: httpx.Response) -> Probe:
        """A probe the server answered with an error: its reason, and on a 400/404 the models it serves
        (GET /v1/models). A name missing from a list the server gives is fatal: waiting cannot fix it."""
        detail = f"{what}: {error_reason(r)}" if error_reason(r) else what
        if r.status_code not in (400, 404):
            return Probe(False, detail)
        try:
            models = await http.get(f"{base_url}/v1/models", timeout=10.0)
            ids = [str(m["id"]) for m in models.json()["data"]]
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return Probe(False, detail)
        if self.served_name in ids:
            return Probe(False, detail)
        return Probe(False, f"the server serves {', '.join(map(repr, ids)) or 'no model'}, not "
                            f"{self.served_name!r} (model.served_name); {detail}", fatal=True)

    # -- requests ---------------------------------------------------------------------------------
    def request_path(self, req: RequestSpec) -> str:
        return "/v1/chat/completions" if req.endpoint == "chat" else "/v1/completions"

    def request_body(self, req: RequestSpec) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.served_name,
            "max_tokens": req.max_tokens,
            "temperature": req.temperature,
            "seed": req.seed,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        if req.ignore_eos:  # exact output length: every variant generates the same token count
            body["ignore_eos"] = True
        if req.endpoint == "chat":
            body["messages"] = req.messages
            if req.chat_template_kwargs:
                body["chat_template_kwargs"] = req.chat_template_kwargs
        else:
            body["prompt"] = req.prompt_text
        return body

    def parse_chunk(self, data: dict[str, Any]) -> ChunkInfo:
        info = ChunkInfo()
        choices = data.get("choices") or []
        if choices:
            ch = choices[0]
            delta = ch.get("delta")
            info.text = (delta.get("content") or "") if isinstance(delta, dict) else (ch.get("text") or "")
            ids = ch.get("token_ids")
            info.token_ids = list(ids) if isinstance(ids, list) else None
            info.finish_reason = ch.get("finish_reason")
        usage = data.get("usage")
        if isinstance(usage, dict):
            info.cumulative_completion_tokens = usage.get("completion_tokens")
            info.prompt_tokens = usage.get("prompt_tokens")
            if not choices:  # the final usage-only chunk
                info.completion_tokens = usage.get("completion_tokens")
        info.spec = self.parse_spec(data)
        return info

    def parse_spec(self, data: dict[str, Any]) -> SpecDetails | None:
        """Per-request acceptance fields carried in a response chunk, when the engine has them."""
        return None

    def spec_keys(self) -> tuple[str, ...] | None:
        """The top-level chunk keys `parse_spec` reads: a chunk with none of them carries no SpecDetails, so
        the fast chunk decoder (engines/fastchunk.py) may read it. None: every chunk takes the dict path. An
        engine that overrides parse_spec or parse_chunk overrides this too (else fastchunk ignores it)."""
        return ()

    # -- acceptance windows and cells ---------------------------------------------------------------
    async def read_counters(self, http: httpx.AsyncClient, metrics_url: str) -> dict[str, float] | None:
        """Server-wide acceptance counters now (diffed around each window). None: engine has none."""
        return None

    async def read_state(self, http: httpx.AsyncClient, metrics_url: str) -> dict[str, float] | None:
        """One sample of the engine's state (`state_metrics`), None when it publishes none. Raises
        httpx.HTTPError or ValueError when the page cannot be read."""
        if not self.state_metrics:
            return None
        return state_of(await scrape(http, metrics_url), self.state_metrics)

    async def between_cells(self, http: httpx.AsyncClient, base_url: str) -> None:  # noqa: B027 (a no-op by default)
        """Reset engine state that would leak from one cell into the next (prefix cache)."""


def check_forced(forced: float | list[float], k: int | None, where: str) -> None:
    """A forced acceptance length counts the bonus token: within [1, k + 1] for k draft tokens per step. A
    profile has one rate per draft position: k of them (k must be known, else the engine refuses at startup)."""
    field = f"{where}.forced_acceptance"
    if isinstance(forced, list):
        if k is None:
            raise ConfigError(field, "a per-position profile needs the drafter's draft tokens per step, which its "
                                     "launch arguments do not say")
        if len(forced) != k:
            raise ConfigError(field, f"a profile of {len(forced)} positions, but {k} draft tokens per step (one "
                                     "rate per draft position)")
    elif k is not None and not 1.0 <= forced <= k + 1:
        raise ConfigError(field, f"{forced:g} is outside [1, {k + 1}] ({k} draft tokens per step)")


def json_int(v: Any) -> int | None:
    """A JSON number as int (bools and anything else: None)."""
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def json_float(v: Any) -> float | None:
    """A JSON number as float (bools and anything else: None)."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_version(v: str | None) -> tuple[int, ...] | None:
    """The release numbers of a version string, by PEP 440 (`packaging.version`): "0.5.23" -> (0, 5, 23);
    a pre-release or local build counts as its release ("0.5.20rc1" and "0.5.23+ddtree" -> (0, 5, 20),
    (0, 5, 23)). None when v is empty or not a version. The only version parser in specbench."""
    if not v:
        return None
    try:
        return Version(v.strip()).release
    except InvalidVersion:
        return None


def error_reason(r: httpx.Response, limit: int = 200) -> str:
    """The reason an OpenAI-compatible server gives with an error status ({"error": {"message": ...}},
    {"message": ...} or {"detail": ...}), else the start of the body; one line."""
    try:
        data = r.json()
    except ValueError:
        return " ".join(r.text.split())[:limit]
    if isinstance(data, dict):
        err = data.get("error")
        reason = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
        reason = reason or data.get("message") or data.get("detail")
        if reason:
            return " ".join(str(reason).split())[:limit]
    return " ".join(r.text.split())[:limit]


@functools.lru_cache(maxsize=32)
def dist_version(python: str, dist: str) -> str | None:
    """Installed version of a distribution in another interpreter (metadata only: no heavy import)."""
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    try:
        r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None

"""The config's parts that are not the sweep: the model, the engine, the variants, and the small sections
(estimates, verdict, scheduler, client). `Strict` forbids unknown keys in every section.

Anything engine-specific stays a pass-through list of arguments (`engine.args`, `variants[].args`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from specbench.shared.registry import DEFAULT_ENGINE, ENGINE_KINDS, ENGINE_TARGETS


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelConfig(Strict):
    """The target model: a local folder, or a demo model specbench prepares offline (`demo: smollm2`)."""

    path: str | None = None
    demo: str | None = None
    tokenizer: str | None = None  # defaults to the model folder
    served_name: str | None = None  # name sent as "model" in requests; defaults to the path

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if bool(self.path) == bool(self.demo):
            raise ValueError("give exactly one of model.path or model.demo")
        return self


class EngineConfig(Strict):
    kind: str = DEFAULT_ENGINE  # a name in registry.ENGINE_KINDS
    python: str | None = None  # interpreter that has the engine; default: the one running specbench
    launch_prefix: list[str] = Field(default_factory=list)  # e.g. ["srun", "--gres=gpu:8"] or a container exec
    command: list[str] | None = None  # kind=command: argv template with {model} {host} {port} {draft_model} ...
    args: list[str] = Field(default_factory=list)  # passed to every variant
    env: dict[str, str] = Field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    startup_timeout_s: float = Field(600.0, gt=0)
    stop_timeout_s: float = Field(30.0, gt=0)  # grace period before SIGKILL
    url: str | None = None  # kind=external: the running endpoint, e.g. http://127.0.0.1:30000
    metrics_url: str | None = None  # Prometheus endpoint when not <url>/metrics
    api_key_env: str | None = None  # NAME of the environment variable holding the API key, never the key
    version: str | None = None  # engine version when it cannot be probed (launch prefix, container)
    acceptance_field: str | None = None  # kind=command: dotted path of a per-response acceptance field
    # what acceptance_field holds: tokens per verify step (bonus included) or a count of verify steps
    acceptance_field_kind: Literal["accept_length", "verify_steps"] = "accept_length"
    acceptance_metric: str | None = None  # kind=command: Prometheus counter of verify steps
    allow_busy_gpu: bool = False
    # memory of one GPU when nvidia-smi cannot tell (preflight), as the spec sheet says it: GiB (an H100 "80GB" is 80)
    gpu_memory_gb: float | None = Field(None, gt=0)
    # a draft path without "/" that is not a folder here is taken by the engines as a hub id and downloaded:
    # refused unless this says so
    allow_hub_ids: bool = False
    nodes: int = Field(1, ge=1)  # > 1: one rank per node through srun (docs/cluster.md)
    dist_init_port: int = Field(20000, ge=1, le=65535)  # nodes > 1: rank 0's rendezvous port
    # GPUs on each node the engine runs on, when nvidia-smi cannot tell (planning on a login node, a launch
    # prefix): `specbench plan` prices GPU-hours with it; None: the launch's TP x PP over engine.nodes
    gpus: int | None = Field(None, ge=1)
    # kind=external: the server's hardware as free text (e.g. "8 x H200 141GB, TP8"); specbench cannot see an
    # endpoint it did not launch, so the report says "unknown" without it, never the client's hardware
    hardware: str | None = Field(None, min_length=1)
    # a fairness pin (server/engines/pins.py): vLLM and SGLang cache prompt prefixes by default; off for every
    # variant unless true. Engines specbench does not launch with its own flags (command, external) are not pinned
    prefix_caching: bool = False
    # kind=external: what the endpoint speaks beyond OpenAI's API. vllm / sglang: its acceptance is read from
    # each response as specbench reads a server it launches (vLLM's `metrics`, SGLang's `sglext` / `meta_info`,
    # and their Prometheus counters), and outputs come back as token ids; openai: only acceptance_field/_metric
    protocol: Literal["openai", "vllm", "sglang"] = "openai"

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        if v not in ENGINE_TARGETS:
            raise ValueError(f"unknown engine kind {v!r} (known: {', '.join(ENGINE_TARGETS)})")
        return v

    @field_validator("hardware")
    @classmethod
    def _hardware(cls, v: str | None, info: ValidationInfo) -> str | None:
        kind = ENGINE_KINDS.get(info.data.get("kind") or "")
        if v is not None and not (kind and kind.endpoint):
            raise ValueError("describes an external endpoint's server; a launched engine's hardware is read from "
                             "the node it runs on (remove it)")
        return v

    @model_validator(mode="after")
    def _kind_fields(self) -> EngineConfig:
        kind = ENGINE_KINDS[self.kind]
        if kind.needs and not getattr(self, kind.needs[0]):
            raise ValueError(f"engine.kind {self.kind} needs engine.{kind.needs[0]} ({kind.needs[1]})")
        if self.protocol != "openai" and not kind.endpoint:
            raise ValueError(f"engine.protocol: {self.protocol} is for an external endpoint; a {self.kind} engine "
                             "that specbench launches speaks its own protocol already (remove it)")
        if self.protocol != "openai" and (self.acceptance_field or self.acceptance_metric):
            raise ValueError(f"engine.protocol: {self.protocol} reads the server's own acceptance fields and "
                             "counters; remove engine.acceptance_field / acceptance_metric (or use protocol: openai)")
        return self


class VariantConfig(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)
    drafter: str
    baseline: bool = False
    params: dict[str, Any] = Field(default_factory=dict)
    args: list[str] = Field(default_factory=list)  # extra engine args for this variant only
    env: dict[str, str] = Field(default_factory=dict)
    command: list[str] | None = None  # overrides engine.command for this variant (kind=command)
    url: str | None = None  # kind=external: this variant's endpoint, when not engine.url
    # The variant's server runs at most this many requests at once (e.g. a batch-1 reference server): sweep
    # points above it are not measured for this variant (closed loop only). None: every point.
    max_concurrency: int | None = Field(None, ge=1)
    # Benchmark knob (`specbench surface`): the engine accepts drafts at this mean acceptance length
    # (tokens per target step), or at these per-position unconditional rates (one per draft position, a
    # profile), whatever the target says; outputs are not the target's (docs/surface.md)
    forced_acceptance: float | list[float] | None = None

    @field_validator("forced_acceptance", mode="before")
    @classmethod
    def _forced(cls, v: Any) -> float | list[float] | None:
        """A mean length >= 1, or a profile: rates in [0, 1], non-increasing (its length is the drafter's k,
        checked by the engine, which reads k from the drafter's arguments: `check_forced`)."""
        def number(x: Any) -> bool:
            return isinstance(x, (int, float)) and not isinstance(x, bool)

        if v is None:
            return None
        if number(v):
            if v < 1:
                raise ValueError(f"{v:g} is below 1 (a mean acceptance length counts the bonus token)")
            return float(v)
        if not isinstance(v, list) or not v or not all(number(x) for x in v):
            raise ValueError("must be a mean acceptance length (a number >= 1) or a non-empty list of "
                             "per-position acceptance rates")
        for i, r in enumerate(v):
            if not 0 <= r <= 1:
                raise ValueError(f"position {i}: {r:g} is outside [0, 1] (a per-position acceptance rate)")
            if i and r > v[i - 1]:
                raise ValueError(f"position {i}: {r:g} is above position {i - 1}'s {v[i - 1]:g} (per-position "
                                 "rates are unconditional, so non-increasing)")
        return [float(r) for r in v]

    @property
    def forced_length(self) -> float | None:
        """The mean acceptance length the variant forces (`forced_length`), or None when it forces none."""
        return None if self.forced_acceptance is None else forced_length(self.forced_acceptance)


def forced_length(forced: float | list[float]) -> float:
    """The mean acceptance length (tokens / target step) a forced acceptance gives: the length itself, or for a
    profile of per-position unconditional rates p_i, 1 + sum(p_i) (docs/metrics.md, "Speedup surface")."""
    return 1.0 + sum(forced) if isinstance(forced, list) else float(forced)


class EstimatesConfig(Strict):
    """Stated estimates for `specbench plan` where no run has measured them yet (the history's figures,
    when it has them, come first for the variance components)."""

    startup_s: float | None = Field(None, gt=0)  # one engine launch until it generates
    # per-request decode speed (tok/s): one figure, or per concurrency ({1: 26, 32: 25.2}; nearest used)
    per_request_tok_s: float | dict[int, float] | None = None
    launch_cv: float | None = Field(None, ge=0, lt=1)  # between launches, relative
    repeat_cv: float | None = Field(None, ge=0, lt=1)  # between repeats inside a launch, relative
    # between prompts: the CV of one prompt's speedup around its category's (assumed: prices a prompt subset)
    prompt_cv: float | None = Field(None, ge=0, lt=1)

    @field_validator("per_request_tok_s")
    @classmethod
    def _rates(cls, v: float | dict[int, float] | None) -> float | dict[int, float] | None:
        rates = v.values() if isinstance(v, dict) else [] if v is None else [v]
        if any(not r > 0 for r in rates) or (isinstance(v, dict) and (not v or min(v) < 1)):
            raise ValueError("must be a positive rate, or a map of concurrency >= 1 to positive rates")
        return v


# A drafter costs memory (draft weights, its KV cache) that could otherwise hold a larger batch, and a
# second model to deploy and keep in step with the target: a gain below 5% rarely pays for that. The
# default asks the whole 95% interval to clear +5% (docs/metrics.md, "Verdict").
DEFAULT_MIN_SPEEDUP = 1.05


class VerdictConfig(Strict):
    """How the report turns intervals into advice."""

    min_speedup: float = Field(DEFAULT_MIN_SPEEDUP, ge=1.0)  # adopt only where the interval's low end clears it
    # the variance history's directory (a team's shared one); default $SPECBENCH_HISTORY, else the cache
    history_dir: str | None = None


class SchedulerConfig(Strict):
    """How the variants are placed on machines (docs/cluster.md)."""

    # compare variants measured on nodes whose hardware fingerprints differ (the report says so)
    allow_mixed_hardware: bool = False
    srun_args: list[str] = Field(default_factory=list)  # added to every srun step, e.g. [--gres=gpu:8]


class ClientConfig(Strict):
    """specbench's own load generator. `processes`: worker processes that share the streams of each window
    (C in flight in total; `auto`: one per CPU specbench may use, at most 8); 1 = the runner's own process."""

    processes: int | Literal["auto"] = Field(1)

    @field_validator("processes", mode="before")
    @classmethod
    def _processes(cls, v: Any) -> Any:
        if v == "auto":
            return v
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 64:
            raise ValueError(f"must be a number of processes between 1 and 64, or auto (got {v!r})")
        return v

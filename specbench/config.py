"""The one YAML file that describes a matrix run, as pydantic models.

Validation errors become a ConfigError naming the field path (`sweep.concurrency[2]: must be >= 1`).
Anything engine-specific stays a pass-through list of arguments (`engine.args`, `variants[].args`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ConfigError
from .registry import ENGINE_TARGETS


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelConfig(Strict):
    """The target model: a local folder, or a demo model specbench prepares offline (`demo: smollm2`)."""

    path: str | None = None
    demo: str | None = None
    tokenizer: str | None = None  # defaults to the model folder
    served_name: str | None = None  # name sent as "model" in requests; defaults to the path

    @model_validator(mode="after")
    def _one_source(self) -> "ModelConfig":
        if bool(self.path) == bool(self.demo):
            raise ValueError("give exactly one of model.path or model.demo")
        return self


class EngineConfig(Strict):
    kind: str = "vllm"  # a name in registry.ENGINE_TARGETS
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
    nodes: int = Field(1, ge=1)  # > 1: one rank per node through srun (docs/cluster.md)
    dist_init_port: int = Field(20000, ge=1, le=65535)  # nodes > 1: rank 0's rendezvous port

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        if v not in ENGINE_TARGETS:
            raise ValueError(f"unknown engine kind {v!r} (known: {', '.join(ENGINE_TARGETS)})")
        return v

    @model_validator(mode="after")
    def _kind_fields(self) -> "EngineConfig":
        if self.kind == "external" and not self.url:
            raise ValueError("engine.kind external needs engine.url")
        if self.kind == "command" and not self.command:
            raise ValueError("engine.kind command needs engine.command (an argv template)")
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


class PromptSource(Strict):
    set: str = "seed"  # seed | mtbench | humaneval | file
    path: str | None = None  # set=file: a JSONL file of {"category", "prompt"} lines
    categories: list[str] | None = None  # None: all of the set's categories
    per_category: int | None = Field(None, ge=1)  # prompts taken from each category (None: all)


class AdaptiveConfig(Strict):
    """Repeat a cell until the 95% interval of its output throughput is narrow enough."""

    target_rel_half_width: float = Field(0.03, gt=0, lt=1)
    max_repeats: int = Field(10, ge=2)


class EstimatesConfig(Strict):
    """Stated estimates for `specbench plan` where no run has measured them yet (the history's figures,
    when it has them, come first for the variance components)."""

    startup_s: float | None = Field(None, gt=0)  # one engine launch until it generates
    # per-request decode speed (tok/s): one figure, or per concurrency ({1: 26, 32: 25.2}; nearest used)
    per_request_tok_s: float | dict[int, float] | None = None
    launch_cv: float | None = Field(None, ge=0, lt=1)  # between launches, relative
    repeat_cv: float | None = Field(None, ge=0, lt=1)  # between repeats inside a launch, relative

    @field_validator("per_request_tok_s")
    @classmethod
    def _rates(cls, v: float | dict[int, float] | None) -> float | dict[int, float] | None:
        rates = v.values() if isinstance(v, dict) else [] if v is None else [v]
        if any(not r > 0 for r in rates) or (isinstance(v, dict) and (not v or min(v) < 1)):
            raise ValueError("must be a positive rate, or a map of concurrency >= 1 to positive rates")
        return v


DEFAULT_MAX_IN_FLIGHT = 256  # open loop: requests in flight beyond this wait (a late send is recorded)


class LoadConfig(Strict):
    """How requests are offered: a closed loop (`sweep.concurrency` in flight) or an open loop (arrivals at
    offered rates, whatever is in flight). docs/metrics.md, "Open loop"."""

    kind: Literal["closed", "open"] = "closed"
    rates: list[float] | None = None  # requests/s; with a trace: the trace time-scaled to each rate
    arrival: Literal["poisson", "gamma", "constant"] = "poisson"
    burstiness: float = Field(1.0, gt=0)  # gamma shape: 1 = poisson, < 1 burstier
    requests_per_rate: int = Field(100, ge=2)  # measured requests per rate and window
    warmup_requests: int = Field(10, ge=0)  # sent first at the same rate, left out of every figure
    trace: str | None = None  # JSONL of arrival offsets (+ prompt_id, input_len, output_len) replayed as recorded
    max_in_flight: int = Field(DEFAULT_MAX_IN_FLIGHT, ge=1)  # the safety cap

    @field_validator("rates")
    @classmethod
    def _rates(cls, v: list[float] | None) -> list[float] | None:
        if v is None:
            return None
        if not v:
            raise ValueError("needs at least one rate")
        for i, x in enumerate(v):
            if not x > 0:
                raise ValueError(f"item {i} is {x}: must be > 0 requests/s")
        if len(set(v)) != len(v):
            raise ValueError("has duplicate values")
        return sorted(float(x) for x in v)

    @model_validator(mode="after")
    def _kind_fields(self) -> "LoadConfig":
        if self.kind == "closed":
            if self.rates is not None or self.trace is not None:
                raise ValueError("rates and trace need kind: open (a closed loop uses sweep.concurrency)")
        elif self.rates is None and self.trace is None:
            raise ValueError("kind open needs rates (requests/s) or a trace file")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError("burstiness applies to arrival: gamma only")
        return self

    @property
    def open(self) -> bool:
        return self.kind == "open"


class SweepConfig(Strict):
    prompts: list[PromptSource] = Field(default_factory=lambda: [PromptSource()], min_length=1)
    output_lens: list[int] = Field(min_length=1)
    concurrency: list[int] = Field(min_length=1)  # open loop: [load.max_in_flight], filled in
    load: LoadConfig = Field(default_factory=LoadConfig)
    input_lens: list[int] | None = None  # pad prompts with a shared document to ~N prompt tokens
    temperatures: list[float] = Field(default_factory=lambda: [0.0], min_length=1)
    waves: int = Field(1, ge=1)  # requests per cell and repeat = waves x concurrency
    repeats: int = Field(1, ge=1)  # windows per cell in each launch
    # engine launches per variant, interleaved (A B A B ...): launches are a level of variation of their own
    launches: int = Field(1, ge=1)
    adaptive: AdaptiveConfig | None = None
    warmup_requests: int = Field(2, ge=0)
    seed: int = 0
    endpoint: Literal["chat", "completions"] = "chat"
    system_prompt: str | None = None
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    request_timeout_s: float = Field(600.0, gt=0)
    max_error_rate: float = Field(0.0, ge=0, le=1)  # a cell with more failed requests is invalid
    # "decided": after `launches`, one more launch at a time (baseline and the drafters concerned, only
    # their undecided points) until every point is decided, `max_launches` is reached or `budget_h` is
    # spent; intervals then spend alpha over the max_launches - launches + 1 looks (docs/metrics.md)
    until: Literal["fixed", "decided"] = "fixed"
    max_launches: int = Field(10, ge=2)
    budget_h: float | None = Field(None, gt=0)  # wall-time budget of the whole run (until: decided)

    @model_validator(mode="after")
    def _sequential(self) -> "SweepConfig":
        if self.until == "decided" and self.launches < 2:
            raise ValueError("until: decided needs launches >= 2 (each look compares launch means)")
        if self.until == "decided" and self.max_launches <= self.launches:
            raise ValueError(f"until: decided needs max_launches > launches ({self.launches})")
        if self.until == "decided" and self.load.open:
            raise ValueError("until: decided decides closed-loop speedups (load.kind: closed)")
        return self

    @model_validator(mode="before")
    @classmethod
    def _open_concurrency(cls, data: Any) -> Any:
        """An open loop has no concurrency axis: `concurrency` holds its in-flight cap (sizes the pool)."""
        if isinstance(data, dict) and isinstance(data.get("load"), dict) and data["load"].get("kind") == "open":
            cap = data["load"].get("max_in_flight", DEFAULT_MAX_IN_FLIGHT)
            if data.get("concurrency") not in (None, [cap]):
                raise ValueError("concurrency is not used with sweep.load.kind open (the in-flight cap is "
                                 "sweep.load.max_in_flight)")
            data = {**data, "concurrency": [cap]}
        return data

    @field_validator("output_lens", "concurrency", "input_lens")
    @classmethod
    def _positive(cls, v: list[int] | None) -> list[int] | None:
        for i, x in enumerate(v or []):
            if x < 1:
                raise ValueError(f"item {i} is {x}: must be >= 1")
        if v is not None and len(set(v)) != len(v):
            raise ValueError("has duplicate values")
        return sorted(v) if v is not None else None

    @model_validator(mode="after")
    def _open_loop(self) -> "SweepConfig":
        if self.load.open and self.adaptive is not None:
            raise ValueError("adaptive: repeats until a throughput interval is narrow apply to a closed loop "
                             "only (an open loop measures load.requests_per_rate per rate)")
        return self

    @field_validator("temperatures")
    @classmethod
    def _temps(cls, v: list[float]) -> list[float]:
        if any(t < 0 for t in v):
            raise ValueError("temperatures must be >= 0")
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


SLO_METRICS = ("ttft_s", "tpot_s", "e2e_s")


class CapacityConfig(Strict):
    """Capacity under the SLO: with `search`, rates are added by bisection between the highest measured rate
    that meets an SLO and the lowest that fails it, until they are within `tolerance` (relative)."""

    search: bool = False
    tolerance: float = Field(0.05, gt=0, lt=1)
    max_steps: int = Field(6, ge=1, le=20)  # bisection windows per SLO and variant, at most


def _check_slo(v: dict[str, dict[str, float]] | None) -> dict[str, dict[str, float]] | None:
    """`{metric: {pNN: seconds}}`: metrics ttft_s, tpot_s, e2e_s; percentiles p50..p99 (p99.9 allowed)."""
    if v is None:
        return None
    if not v:
        raise ValueError("needs at least one of ttft_s, tpot_s, e2e_s")
    for metric, pcts in v.items():
        if metric not in SLO_METRICS:
            raise ValueError(f"unknown metric {metric!r} (known: {', '.join(SLO_METRICS)})")
        if not isinstance(pcts, dict) or not pcts:
            raise ValueError(f"{metric}: give percentiles and thresholds, e.g. {{p90: 0.5}}")
        for key, thr in pcts.items():
            try:
                q = float(str(key).removeprefix("p"))
            except ValueError:
                q = math.nan
            if not str(key).startswith("p") or not 50 <= q < 100:
                raise ValueError(f"{metric}.{key}: percentiles are p50 .. p99 (e.g. p90, p99.9)")
            if not isinstance(thr, (int, float)) or isinstance(thr, bool) or not thr > 0:
                raise ValueError(f"{metric}.{key}: threshold must be a positive number of seconds, not {thr!r}")
    return v


class TuneConfig(Strict):
    """`specbench tune`: per tuned variant, a grid of the drafter's own params (docs/metrics.md, "Tuning").
    Each setting is one launch; the search is successive halving per concurrency on the search split of
    the prompts, the winners confirmed against the baseline on the held-out split."""

    variants: dict[str, dict[str, list[Any]]] = Field(min_length=1)  # variant -> {param: [values]}
    confirm_fraction: float = Field(0.5, gt=0, lt=1)  # share of each category's prompts held out
    search_repeats: int = Field(1, ge=1)  # repeats per launch in every search round (launches double)

    @field_validator("variants")
    @classmethod
    def _grids(cls, v: dict[str, dict[str, list[Any]]]) -> dict[str, dict[str, list[Any]]]:
        for name, grid in v.items():
            if not grid:
                raise ValueError(f"{name}: give at least one param and its values")
            for param, values in grid.items():
                if not isinstance(values, list) or not values:
                    raise ValueError(f"{name}.{param}: give a non-empty list of values")
                if len({repr(x) for x in values}) != len(values):
                    raise ValueError(f"{name}.{param}: has duplicate values")
        return v


class RunConfig(Strict):
    name: str = "run"
    model: ModelConfig
    engine: EngineConfig = Field(default_factory=EngineConfig)
    variants: list[VariantConfig] = Field(min_length=1)
    sweep: SweepConfig
    verdict: VerdictConfig = Field(default_factory=VerdictConfig)
    estimates: EstimatesConfig = Field(default_factory=EstimatesConfig)
    slo: dict[str, dict[str, float]] | None = None  # e.g. {ttft_s: {p90: 0.5}}: open loop (docs/metrics.md)
    capacity: CapacityConfig = Field(default_factory=CapacityConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    tune: TuneConfig | None = None  # read by `specbench tune` only; `specbench run` ignores it
    client: ClientConfig = Field(default_factory=ClientConfig)
    output_dir: str = "runs"

    @model_validator(mode="after")
    def _variants(self) -> "RunConfig":
        names = [v.name for v in self.variants]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"variants: duplicate variant names: {', '.join(dupes)}")
        baselines = [v.name for v in self.variants if v.baseline]
        if len(baselines) != 1:
            found = ", ".join(baselines) if baselines else "none"
            raise ValueError(f"variants: exactly one variant must have baseline: true (found {found})")
        _check_caps(self)
        if self.slo and not self.sweep.load.open:
            raise ValueError("slo: needs sweep.load.kind open (an SLO is met at an offered rate)")
        if self.capacity.search and not self.slo:
            raise ValueError("capacity.search: needs an slo to search the capacity under")
        for name in (self.tune.variants if self.tune else {}):
            if name not in names:
                raise ValueError(f"tune.variants.{name}: no such variant (known: {', '.join(names)})")
            if name == baselines[0]:
                raise ValueError(f"tune.variants.{name}: is the baseline; tune a drafter's variant")
        return self

    @field_validator("slo")
    @classmethod
    def _slo(cls, v: dict[str, dict[str, float]] | None) -> dict[str, dict[str, float]] | None:
        return _check_slo(v)

    @property
    def baseline(self) -> VariantConfig:
        return next(v for v in self.variants if v.baseline)

    def variant(self, name: str) -> VariantConfig:
        return next(v for v in self.variants if v.name == name)


def _check_caps(cfg: "RunConfig") -> None:
    """variants[i].max_concurrency: a closed loop only, below nothing it would leave unmeasured, not the baseline."""
    for i, v in enumerate(cfg.variants):
        if v.max_concurrency is None:
            continue
        where = f"variants[{i}].max_concurrency"
        if cfg.sweep.load.open:
            raise ValueError(f"{where}: needs a closed loop (an open loop offers rates, not a concurrency)")
        if v.baseline:
            raise ValueError(f"{where}: the baseline measures every point (each speedup needs it); cap a drafter's "
                             "variant")
        if v.max_concurrency < min(cfg.sweep.concurrency):
            raise ValueError(f"{where}: {v.max_concurrency} is below every sweep.concurrency "
                             f"({', '.join(map(str, cfg.sweep.concurrency))}): nothing would be measured")


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "model-")) or part in ("list[int]", "str", "int"):
            continue  # pydantic's internal validator names carry no meaning for the user
        else:
            out += f".{part}" if out else str(part)
    return out


def format_validation_error(exc: ValidationError) -> tuple[str, str]:
    """The first error as (field path, problem)."""
    err = exc.errors()[0]
    where = _field_path(tuple(err["loc"]))
    msg = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "missing":
        msg = "required field is missing"
    return where, msg


def non_finite(data: Any, where: str = "") -> str | None:
    """Path of the first NaN or infinite number anywhere in parsed YAML (.nan, .inf), else None."""
    if isinstance(data, float) and not math.isfinite(data):
        return where
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        found = non_finite(v, f"{where}[{k}]" if isinstance(k, int) else f"{where}.{k}" if where else str(k))
        if found is not None:
            return found
    return None


def parse_config(data: Any, source: str | None = None) -> RunConfig:
    if not isinstance(data, dict):
        raise ConfigError("", "the config must be a YAML mapping", source)
    bad = non_finite(data)
    if bad is not None:  # YAML's .nan/.inf: no field of a config means anything with them
        raise ConfigError(bad, "must be a finite number (not NaN or infinite)", source)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        where, msg = format_validation_error(exc)
        raise ConfigError(where, msg, source) from None


# A config expands to a few thousand YAML nodes; aliases can make 15 lines expand to 10^8 (an "alias bomb"),
# which PyYAML composes in microseconds (an alias is a reference) but every walk of the result then visits
# one by one. Refused above this, before anything walks the tree.
MAX_YAML_NODES = 1_000_000


def expanded_size(node: yaml.Node, limit: int = MAX_YAML_NODES) -> int:
    """The number of nodes of `node` with every alias expanded, counted over the composed graph (each node
    once: its size is memoised), so the count costs the graph's size, not the expansion's. Stops as soon
    as it passes `limit` (returns limit + 1); a recursive alias (a node inside itself) counts as infinite."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(n: yaml.Node) -> int:
        key = id(n)
        if key in sizes:
            return sizes[key]
        if key in open_:
            return limit + 1  # the node contains itself: no finite expansion
        total = 1
        if isinstance(n, (yaml.SequenceNode, yaml.MappingNode)):
            open_.add(key)
            children = n.value if isinstance(n, yaml.SequenceNode) else [x for kv in n.value for x in kv]
            for child in children:
                total += size(child)
                if total > limit:
                    break
            open_.discard(key)
        sizes[key] = total = min(total, limit + 1)
        return total

    return size(node)


class _TooLarge(Exception):
    """The document expands past MAX_YAML_NODES."""


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses a document whose aliases expand it past MAX_YAML_NODES, before construction."""

    def construct_document(self, node: yaml.Node) -> Any:
        if expanded_size(node) > MAX_YAML_NODES:
            raise _TooLarge()
        return super().construct_document(node)


def load_yaml(text: str, source: str) -> Any:
    """yaml.safe_load, but an alias bomb (or a recursive alias) is a one-line ConfigError."""
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 (a SafeLoader subclass)
    except _TooLarge:
        raise ConfigError("", f"refused: its aliases (&/*) expand it to more than {MAX_YAML_NODES:,} YAML nodes "
                          "(an alias bomb, or an alias inside itself?); write the values out instead", source) from None
    except RecursionError:
        raise ConfigError("", "refused: nested too deeply for a config", source) from None


def _read_yaml(p: Path) -> Any:
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("", f"config file not found: {p}") from None
    except OSError as exc:
        raise ConfigError("", f"cannot read config file {p}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"not UTF-8 text (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r})",
                          str(p)) from None
    try:
        return load_yaml(text, str(p))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        raise ConfigError("", f"{line}invalid YAML ({getattr(exc, 'problem', exc)})", str(p)) from None


def _merge(parent: Any, child: Any) -> Any:
    """Child over parent: mappings merge key by key, anything else (lists included) is replaced."""
    if isinstance(parent, dict) and isinstance(child, dict):
        return {**parent, **{k: _merge(parent.get(k), v) for k, v in child.items()}}
    return child


def _load_with_includes(p: Path, seen: tuple[Path, ...] = ()) -> Any:
    """A config may start from another: `include: base.yaml` (relative to the including file)."""
    data = _read_yaml(p)
    if not isinstance(data, dict) or "include" not in data:
        return data
    parent_path = (p.parent / str(data.pop("include"))).resolve()
    if parent_path in seen or parent_path == p.resolve():
        raise ConfigError("include", f"include cycle through {parent_path}", str(p))
    parent = _load_with_includes(parent_path, (*seen, p.resolve()))
    if not isinstance(parent, dict):
        raise ConfigError("include", f"{parent_path} is not a YAML mapping", str(p))
    return _merge(parent, data)


def load_config(path: str | os.PathLike[str]) -> RunConfig:
    p = Path(path)
    cfg = parse_config(_load_with_includes(p), str(p))
    for src in cfg.sweep.prompts:  # prompt files are relative to the config file, not the cwd
        if src.path and not Path(src.path).expanduser().is_absolute():
            src.path = str((p.parent / src.path).resolve())
    load = cfg.sweep.load
    if load.trace and not Path(load.trace).expanduser().is_absolute():
        load.trace = str((p.parent / load.trace).resolve())
    return cfg


# config.json keys that hold a model's context length, most specific first
_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length")
# engine flags that cap the context below the model's own (vLLM, SGLang)
_CONTEXT_FLAGS = ("--max-model-len", "--context-length")


def model_context(cfg: RunConfig, model_path: str | os.PathLike[str]) -> tuple[int, str] | None:
    """(context length in tokens, where it comes from) for the model folder and the engine args, or None."""
    import json

    found: list[tuple[int, str]] = []
    conf = Path(model_path) / "config.json"
    try:
        data = json.loads(conf.read_text())
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict):
        for section in (data, data.get("text_config")):
            if not isinstance(section, dict):
                continue
            key = next((k for k in _CONTEXT_KEYS if isinstance(section.get(k), int) and section[k] > 0), None)
            if key:
                found.append((int(section[key]), f"{key} in {conf}"))
                break
    for where, args in [("engine.args", cfg.engine.args)] + [
            (f"variants[{i}].args", v.args) for i, v in enumerate(cfg.variants)]:
        for i, a in enumerate(args):
            flag, eq, val = a.partition("=")
            if flag in _CONTEXT_FLAGS:
                raw = val if eq else (args[i + 1] if i + 1 < len(args) else "")
                if raw.isdigit() and int(raw) > 0:
                    found.append((int(raw), f"{flag} in {where}"))
    return min(found) if found else None


def check_model_context(cfg: RunConfig, model_path: str | os.PathLike[str]) -> None:
    """Refuse a sweep whose lengths cannot fit the model's context (ConfigError naming the sweep field)."""
    ctx = model_context(cfg, model_path)
    if ctx is None:
        return
    limit, source = ctx
    s = cfg.sweep
    longest_out = max(s.output_lens)
    if longest_out >= limit:
        raise ConfigError("sweep.output_lens", f"{longest_out} output tokens do not fit the model's context "
                          f"of {limit} tokens ({source})")
    if s.input_lens and max(s.input_lens) + longest_out > limit:
        raise ConfigError("sweep.input_lens", f"{max(s.input_lens)} input + {longest_out} output tokens exceed "
                          f"the model's context of {limit} tokens ({source})")


def dump_config(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True), sort_keys=False)

"""The sweep section: the prompts, the axes, the load (closed or open loop), the repeats and stopping rules;
and the open loop's SLO and capacity search."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from specbench.config.sections import Strict

NATURAL = "natural"  # an output length: each prompt's reference answer length (records.NATURAL_OUTPUT in a cell key)
# the prompt sets that can carry reference answers: sharegpt's recorded replies, humaneval's canonical
# functions, a file's "reference" fields (checked per prompt when the sweep is built)
REFERENCE_SETS = ("sharegpt", "humaneval", "file")


class PromptSource(Strict):
    set: str = "seed"  # seed | mtbench | humaneval | sharegpt | file
    path: str | None = None  # set=file: a JSONL file of {"category", "prompt"} lines
    categories: list[str] | None = None  # None: all of the set's categories
    per_category: int | None = Field(None, ge=1)  # prompts taken from each category (None: all; sharegpt 10)


class AdaptiveConfig(Strict):
    """Repeat a cell until the 95% interval of its output throughput is narrow enough."""

    target_rel_half_width: float = Field(0.03, gt=0, lt=1)
    max_repeats: int = Field(10, ge=2)


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
    # the send-lag gate: a rate whose p99 send lag exceeds this (s) is not counted; None: 10% of the tightest
    # SLO threshold (docs/metrics.md, "send-lag gate"). Analysis only: not part of the sweep's fingerprint
    max_send_lag_s: float | None = Field(None, gt=0)

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
    def _kind_fields(self) -> LoadConfig:
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


class SubsetConfig(Strict):
    """A seeded stratified prompt subset at the slow levels (plan.subset): at every concurrency <= `up_to`,
    each category sends `per_category` of its prompts, the same ones for every variant, launch and repeat;
    the levels above send the whole set. The subset's sampling variance enters the mix interval
    (decide.sampling; docs/metrics.md, "Subset sampling variance")."""

    up_to: int = Field(ge=1)  # the highest concurrency measured on the subset
    per_category: int = Field(ge=1)  # prompts kept from each category


class SweepConfig(Strict):
    prompts: list[PromptSource] = Field(default_factory=lambda: [PromptSource()], min_length=1)
    # fixed lengths, and/or "natural": each prompt's reference answer length in target tokens (as vLLM's
    # ShareGPT sampling does); needs a set with reference answers (REFERENCE_SETS)
    output_lens: list[int | Literal["natural"]] = Field(min_length=1)
    concurrency: list[int] = Field(min_length=1)  # open loop: [load.max_in_flight], filled in
    load: LoadConfig = Field(default_factory=LoadConfig)
    input_lens: list[int] | None = None  # pad prompts with a shared document to ~N prompt tokens
    temperatures: list[float] = Field(default_factory=lambda: [0.0], min_length=1)
    waves: int = Field(1, ge=1)  # a window: whole passes of the category's prompts, >= waves x the largest C
    repeats: int = Field(1, ge=1)  # windows per cell in each launch
    # engine launches per variant, counterbalanced (A B B A ...: runner.scheduler.round_order):
    # launches are a level of variation of their own
    launches: int = Field(1, ge=1)
    adaptive: AdaptiveConfig | None = None
    subset: SubsetConfig | None = None  # fewer prompts at the slow levels (`specbench plan --budget` picks it)
    warmup_requests: int = Field(2, ge=0)
    seed: int = 0
    endpoint: Literal["chat", "completions"] = "chat"
    system_prompt: str | None = None
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    # false: every request sends ignore_eos (exact output lengths); true: none does, a request ends where the
    # model ends (docs/metrics.md, "Tokens past EOS")
    stop_at_eos: bool = False
    request_timeout_s: float = Field(600.0, gt=0)
    max_error_rate: float = Field(0.0, ge=0, le=1)  # a cell with more failed requests is invalid
    # "decided": after `launches`, one more launch at a time (baseline and the drafters concerned, only
    # their undecided points) until every point is decided, `max_launches` is reached or `budget_h` is
    # spent; intervals then spend alpha over the max_launches - launches + 1 looks (docs/metrics.md)
    until: Literal["fixed", "decided"] = "fixed"
    max_launches: int = Field(10, ge=2)
    budget_h: float | None = Field(None, gt=0)  # wall-time budget of the whole run (until: decided)

    @model_validator(mode="after")
    def _sequential(self) -> SweepConfig:
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
    def _positive(cls, v: list[Any] | None) -> list[Any] | None:
        for i, x in enumerate(v or []):
            if x != NATURAL and x < 1:
                raise ValueError(f"item {i} is {x}: must be >= 1")
        if v is not None and len(set(v)) != len(v):
            raise ValueError("has duplicate values")
        # "natural" first: it sorts as NATURAL_OUTPUT (0) does in cell keys
        return sorted(v, key=lambda x: -1 if x == NATURAL else x) if v is not None else None

    @field_validator("output_lens")
    @classmethod
    def _natural(cls, v: list[Any], info: ValidationInfo) -> list[Any]:
        if NATURAL in v:
            for src in info.data.get("prompts") or []:
                if src.set not in REFERENCE_SETS:
                    raise ValueError(f"natural needs prompts with reference answers; set {src.set} has none "
                                     f"(sets with them: {', '.join(REFERENCE_SETS)})")
        return v

    @property
    def fixed_output_lens(self) -> list[int]:
        """The fixed output lengths (without "natural")."""
        return [o for o in self.output_lens if isinstance(o, int)]

    @model_validator(mode="after")
    def _open_loop(self) -> SweepConfig:
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


SLO_METRICS = ("ttft_s", "tpot_s", "e2e_s")


class CapacityConfig(Strict):
    """Capacity under the SLO: with `search`, rates are added by bisection between the highest measured rate
    that meets an SLO and the lowest that fails it, until they are within `tolerance` (relative)."""

    search: bool = False
    tolerance: float = Field(0.05, gt=0, lt=1)
    max_steps: int = Field(6, ge=1, le=20)  # bisection windows per SLO and variant, at most


_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s)\s*")
MAX_BARE_SECONDS = 10.0  # slo_for_yaml writes a threshold above this with its unit ("60.0s")
# The most an SLO threshold plausibly is, per metric, in seconds: above it preflight says the threshold in
# seconds and the milliseconds it may have meant (vLLM's --goodput takes ms). A warning, not a refusal: a
# 2-minute e2e is a sane SLO, and only the metric tells a unit slip from a long answer (issue 51 item 7).
SLO_PLAUSIBLE_S = {"ttft_s": 60.0, "tpot_s": 1.0, "e2e_s": 600.0}


def _seconds(where: str, thr: Any, unit_in_key: bool) -> float:
    """An SLO threshold in seconds: `50ms`, `0.05s`, or a bare number of seconds under a `_s` key (a value
    unusual for its metric is said by `slo_unit_warnings`)."""
    if isinstance(thr, str):
        m = _DURATION.fullmatch(thr)
        if not m:
            raise ValueError(f"{where}: {thr!r} is not a duration (write e.g. 50ms or 0.5s)")
        value = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    elif isinstance(thr, (int, float)) and not isinstance(thr, bool):
        if not unit_in_key:
            raise ValueError(f"{where}: give the unit: {thr:g}ms or {thr:g}s")
        value = float(thr)
    else:
        raise ValueError(f"{where}: threshold must be a duration (50ms, 0.5s) or a number of seconds, not {thr!r}")
    if not value > 0:
        raise ValueError(f"{where}: threshold must be positive, not {thr!r}")
    return value


def check_slo(v: Any) -> dict[str, dict[str, float]] | None:
    """`{metric: {pNN: threshold}}` as seconds: metrics ttft_s, tpot_s, e2e_s (or ttft, tpot, e2e with a
    unit on every threshold: `tpot: {p90: 50ms}`); percentiles p50..p99 (p99.9 allowed)."""
    if v is None:
        return None
    if not isinstance(v, dict) or not v:
        raise ValueError("needs at least one of ttft_s, tpot_s, e2e_s")
    out: dict[str, dict[str, float]] = {}
    for metric, pcts in v.items():
        name = metric if metric in SLO_METRICS else f"{metric}_s"
        if name not in SLO_METRICS:
            raise ValueError(f"unknown metric {metric!r} (known: {', '.join(SLO_METRICS)})")
        if name in out:
            raise ValueError(f"{metric}: given twice (as {name.removesuffix('_s')} and {name})")
        if not isinstance(pcts, dict) or not pcts:
            raise ValueError(f"{metric}: give percentiles and thresholds, e.g. {{p90: 0.5}}")
        out[name] = {}
        for key, thr in pcts.items():
            try:
                q = float(str(key).removeprefix("p"))
            except ValueError:
                q = math.nan
            if not str(key).startswith("p") or not 50 <= q < 100:
                raise ValueError(f"{metric}.{key}: percentiles are p50 .. p99 (e.g. p90, p99.9)")
            out[name][str(key)] = _seconds(f"{metric}.{key}", thr, name == metric)
    return out


def slo_unit_warnings(slo: dict[str, dict[str, float]] | None) -> list[str]:
    """One line per threshold above its metric's SLO_PLAUSIBLE_S, naming the unit it was read in."""
    out = []
    for metric, pcts in (slo or {}).items():
        limit = SLO_PLAUSIBLE_S.get(metric)
        for key, t in pcts.items():
            if limit is not None and t > limit:
                per = " a token" if metric == "tpot_s" else ""
                out.append(f"slo.{metric}.{key}: {t:g} s{per} (read in seconds) is above the {limit:g} s usual for "
                           f"{metric.removesuffix('_s')}; if you meant milliseconds write {t:g}ms")
    return out


def slo_for_yaml(slo: dict[str, dict[str, float]] | None) -> dict[str, dict[str, float | str]] | None:
    """The SLO as a config file writes it back (run directories reload it): a threshold above
    MAX_BARE_SECONDS keeps its unit, so that reading it again does not take it for milliseconds."""
    if slo is None:
        return None
    return {m: {k: f"{t!r}s" if t > MAX_BARE_SECONDS else t for k, t in p.items()} for m, p in slo.items()}

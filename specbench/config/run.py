"""`RunConfig`, the whole file: its sections and the rules that span them (one baseline, caps, SLO needs an
open loop, tuned variants exist)."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import Field, field_serializer, field_validator, model_validator

from specbench.config.sections import (
    ClientConfig,
    EngineConfig,
    EstimatesConfig,
    ModelConfig,
    SchedulerConfig,
    Strict,
    VariantConfig,
    VerdictConfig,
)
from specbench.config.sweep import CapacityConfig, SweepConfig, check_slo, slo_for_yaml
from specbench.shared.registry import ENGINE_KINDS


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
    slo: dict[str, dict[str, float]] | None = None  # e.g. {ttft_s: {p90: 0.5}}, {tpot: {p90: 50ms}}: seconds
    capacity: CapacityConfig = Field(default_factory=CapacityConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    tune: TuneConfig | None = None  # read by `specbench tune` only; `specbench run` ignores it
    client: ClientConfig = Field(default_factory=ClientConfig)
    output_dir: str = "runs"

    @model_validator(mode="after")
    def _variants(self) -> RunConfig:
        names = [v.name for v in self.variants]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"variants: duplicate variant names: {', '.join(dupes)}")
        baselines = [v.name for v in self.variants if v.baseline]
        if len(baselines) != 1:
            found = ", ".join(baselines) if baselines else "none"
            raise ValueError(f"variants: exactly one variant must have baseline: true (found {found})")
        _check_caps(self)
        _check_external(self)
        if self.sweep.subset is not None and self.estimates.prompt_cv is None:
            raise ValueError("sweep.subset: needs estimates.prompt_cv (the subset's sampling variance is priced "
                             "from it: docs/metrics.md, \"Subset sampling variance\")")
        if self.sweep.subset is not None and self.sweep.load.open:
            raise ValueError("sweep.subset: needs a closed loop (it subsets the slow concurrency levels)")
        if self.slo and not self.sweep.load.open:
            raise ValueError("slo: needs sweep.load.kind open (an SLO is met at an offered rate)")
        est, timeout = self.estimates.startup_s, self.engine.startup_timeout_s
        if est is not None and timeout < est:
            raise ValueError(f"engine.startup_timeout_s: {timeout:g} s is shorter than estimates.startup_s {est:g} s: "
                             f"every launch would be stopped before it is ready; raise it above {est:g}")
        if self.capacity.search and not self.slo:
            raise ValueError("capacity.search: needs an slo to search the capacity under")
        for name in (self.tune.variants if self.tune else {}):
            if name not in names:
                raise ValueError(f"tune.variants.{name}: no such variant (known: {', '.join(names)})")
            if name == baselines[0]:
                raise ValueError(f"tune.variants.{name}: is the baseline; tune a drafter's variant")
        return self

    @field_validator("slo", mode="before")
    @classmethod
    def _slo(cls, v: Any) -> dict[str, dict[str, float]] | None:
        return check_slo(v)  # units (50ms, 2s) to seconds before the type check

    @field_serializer("slo")
    def _slo_out(self, v: dict[str, dict[str, float]] | None) -> dict[str, dict[str, float | str]] | None:
        return slo_for_yaml(v)

    @property
    def baseline(self) -> VariantConfig:
        return next(v for v in self.variants if v.baseline)

    def variant(self, name: str) -> VariantConfig:
        return next(v for v in self.variants if v.name == name)


def _check_caps(cfg: RunConfig) -> None:
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


def _check_external(cfg: RunConfig) -> None:
    """An endpoint specbench does not launch (engine.kind external) is measured as it runs: it cannot be
    relaunched (so no between-launch variance), and two variants at one URL are one server."""
    if not ENGINE_KINDS[cfg.engine.kind].endpoint:
        return
    if cfg.sweep.launches > 1:
        raise ValueError(f"sweep.launches: {cfg.sweep.launches} launches of an external endpoint would measure one "
                         "server that specbench never relaunches, and record its repeats as between-launch "
                         "variance; set launches: 1 (repeats and waves measure within it)")
    seen: dict[str, int] = {}
    for i, v in enumerate(cfg.variants):
        url = (v.url or cfg.engine.url or "").rstrip("/")
        if url in seen:
            j = seen[url]
            where = f"variants[{i}].url" if v.url else "engine.url"
            raise ValueError(f"{where}: variants {cfg.variants[j].name} and {v.name} are both served by {url}: "
                             "the server would be compared with itself; give each variant its own server's url")
        seen[url] = i


def dump_config(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json", exclude_none=True), sort_keys=False)

"""What `specbench tune` will measure, before anything runs: the settings (one variant per point of each
tuned variant's grid), the prompt split, and the ordinary RunConfigs of each round.

Pure apart from reading the prompt sets: config in, configs out. The search (search.py) runs these configs
through the matrix runner; nothing here knows an engine.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.config import RunConfig, VariantConfig
from specbench.plan.drafter import get_drafter
from specbench.plan.prompts import Prompt
from specbench.server.engines import ENGINES
from specbench.shared.errors import ConfigError, UsageError

NAME_MAX = 64  # VariantConfig.name's limit


@dataclass(frozen=True)
class Setting:
    """One point of a tuned variant's grid: the variant it comes from and the params it sets."""

    tuned: str  # the tuned variant's name in the config
    params: dict[str, Any]  # the grid's params only (the variant's other params stay as configured)
    name: str  # the variant name it is measured under

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items())


def setting_name(tuned: str, params: dict[str, Any]) -> str:
    """`ngram-num_tokens-4`: readable, a valid variant name; hashed when it would be too long."""
    safe = "-".join(f"{k}-{v}" for k, v in params.items())
    safe = "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in safe)
    name = f"{tuned}-{safe}"
    if len(name) > NAME_MAX:
        digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:10]
        name = f"{tuned[:NAME_MAX - 11]}-{digest}"
    return name


def settings(cfg: RunConfig) -> dict[str, list[Setting]]:
    """Every setting of every tuned variant, grid order; a value the drafter refuses is a ConfigError."""
    if cfg.tune is None:
        raise ConfigError("tune", "specbench tune needs a tune: section (tune.variants: {variant: {param: [values]}})")
    out: dict[str, list[Setting]] = {}
    by_name = {v.name: v for v in cfg.variants}
    for tuned, grid in cfg.tune.variants.items():
        base = by_name[tuned]
        drafter = get_drafter(base.drafter)
        keys = list(grid)
        out[tuned] = []
        for values in itertools.product(*(grid[k] for k in keys)):
            params = dict(zip(keys, values))
            where = f"tune.variants.{tuned}"
            try:
                drafter.parse_params({**base.params, **params})
            except ConfigError as exc:
                raise ConfigError(where, f"{params}: {exc}") from None
            except Exception as exc:  # the drafter's own validation (pydantic)
                raise ConfigError(where, f"{params}: {str(exc).splitlines()[0]}") from None
            out[tuned].append(Setting(tuned, params, setting_name(tuned, params)))
    return out


def variant_of(cfg: RunConfig, s: Setting) -> VariantConfig:
    base = next(v for v in cfg.variants if v.name == s.tuned)
    return base.model_copy(update={"name": s.name, "params": {**base.params, **s.params}, "baseline": False})


def settings_config(cfg: RunConfig) -> tuple[RunConfig, str]:
    """(the config with the baseline and every setting as its variants, a line saying so), for
    `specbench validate`: each setting's launch is checked as tune would launch it."""
    grid = settings(cfg)
    variants = [cfg.baseline] + [variant_of(cfg, s) for ss in grid.values() for s in ss]
    line = "tune: " + "; ".join(f"{v}: {len(ss)} settings" for v, ss in grid.items()) + \
        " (each checked below as a variant; `specbench tune --plan` prints the launches and time)"
    return cfg.model_copy(update={"variants": variants, "tune": None}), line


# -- the prompt split --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Split:
    search: list[Prompt]
    confirm: list[Prompt]


def split_prompts(prompts: list[Prompt], confirm_fraction: float, seed: int) -> Split:
    """Per category, a seeded shuffle; round(n x fraction) prompts (at least 1) are held out for the
    confirmation and the rest (at least 1) searched on. A category of one prompt cannot be split."""
    by_cat: dict[str, list[Prompt]] = {}
    for p in prompts:
        by_cat.setdefault(p.category, []).append(p)
    search: list[Prompt] = []
    confirm: list[Prompt] = []
    for cat, ps in by_cat.items():
        if len(ps) < 2:
            raise ConfigError("sweep.prompts", f"category {cat!r} has {len(ps)} prompt: tune holds prompts out "
                              "for the confirmation, so each category needs at least 2")
        order = list(ps)
        random.Random(f"{seed}:{cat}").shuffle(order)
        held = min(len(order) - 1, max(1, round(len(order) * confirm_fraction)))
        confirm += order[:held]
        search += order[held:]
    return Split(search=search, confirm=confirm)


def write_prompts(path: Path, prompts: list[Prompt]) -> None:
    path.write_text("".join(json.dumps({"category": p.category, "prompt": p.text}) + "\n" for p in prompts))


# -- the rounds ------------------------------------------------------------------------------------
def rounds(n_settings: int) -> int:
    """Search rounds of successive halving (halving rate 2) down to one setting: ceil(log2 n), at least 1."""
    return max(1, math.ceil(math.log2(n_settings))) if n_settings > 1 else 1


def survivors(n: int, round_no: int) -> int:
    """Settings per (tuned variant, concurrency) measured in round `round_no` (1-based)."""
    for _ in range(round_no - 1):
        n = math.ceil(n / 2)
    return n


@dataclass(frozen=True)
class RoundSpec:
    """One matrix run of the tune: which settings, at which concurrencies, how long."""

    label: str  # search-1, search-2, ..., confirm
    variants: list[VariantConfig]  # extra to the baseline
    concurrency: list[int]
    repeats: int
    launches: int
    prompts_file: Path


def round_config(cfg: RunConfig, spec: RoundSpec) -> RunConfig:
    """The ordinary RunConfig of one round: the baseline and the round's settings, the sweep on the
    round's prompt split; no tune section, no sequential rule (the search decides what runs next)."""
    sweep = cfg.sweep.model_copy(update={
        "prompts": [cfg.sweep.prompts[0].model_copy(update={"set": "file", "path": str(spec.prompts_file),
                                                            "categories": None, "per_category": None})],
        "concurrency": sorted(spec.concurrency), "repeats": spec.repeats, "launches": spec.launches,
        "adaptive": cfg.sweep.adaptive if spec.label == "confirm" else None, "until": "fixed"})
    data = cfg.model_dump(mode="json")
    data.update(name=f"{cfg.name}-tune-{spec.label}", tune=None,
                variants=[cfg.baseline.model_dump(mode="json")] + [v.model_dump(mode="json") for v in spec.variants],
                sweep=sweep.model_dump(mode="json"))
    return RunConfig.model_validate(data)


def search_spec(cfg: RunConfig, grid: dict[str, list[Setting]], alive: dict[tuple[str, int], list[str]],
                round_no: int, prompts_file: Path) -> RoundSpec | None:
    """Round `round_no`'s spec from the settings still alive per (tuned variant, concurrency); None when
    every group is down to one setting."""
    assert cfg.tune is not None
    open_groups = {k: names for k, names in alive.items() if len(names) > 1 or round_no == 1}
    if not open_groups:
        return None
    wanted = {n for names in open_groups.values() for n in names}
    variants = [variant_of(cfg, s) for ss in grid.values() for s in ss if s.name in wanted]
    return RoundSpec(label=f"search-{round_no}", variants=variants,
                     concurrency=sorted({c for _, c in open_groups}),
                     repeats=cfg.tune.search_repeats, launches=search_launches(round_no), prompts_file=prompts_file)


def search_launches(round_no: int) -> int:
    """Launches per setting in search round `round_no`: doubled each round (1, 2, 4, ...). Launches vary far
    more than repeats inside one launch, so twice as long a measurement is twice the launches, not twice
    the repeats (which would not shrink the launch variance that dominates)."""
    return 2 ** (round_no - 1)


# -- the printed plan ------------------------------------------------------------------------------
@dataclass(frozen=True)
class TunePlan:
    lines: list[str]
    launches: int
    seconds: float | None  # one node, one launch after another
    parallel_seconds: float | None  # --scheduler slurm: each round's variants side by side


def check_budget(plan: TunePlan, budget_h: float | None, scheduler: str) -> None:
    """Refuse, before any launch, a plan that needs more than `budget_h` hours (`--budget`)."""
    need = plan.parallel_seconds if scheduler == "slurm" else plan.seconds
    if budget_h is not None and need is not None and need > budget_h * 3600:
        raise UsageError(f"tune: the plan needs about {need / 3600:.2f} h, over --budget {budget_h:g} h: "
                         "shrink the grid or sweep, or raise the budget")


def _planned_counts(cfg: RunConfig, grid: dict[str, list[Setting]]) -> list[tuple[str, int, list[int], int, int]]:
    """(label, settings measured at most, concurrencies, repeats, launches) of every round, before any
    result: a round measures, per tuned variant, the union of each level's survivors (at most all)."""
    assert cfg.tune is not None
    levels = list(cfg.sweep.concurrency)
    out = []
    for r in range(1, max(rounds(len(ss)) for ss in grid.values()) + 1):
        n = sum(min(len(ss), len(levels) * survivors(len(ss), r)) for ss in grid.values()
                if r == 1 or survivors(len(ss), r) > 1)
        if n:
            out.append((f"search-{r}", n, levels, cfg.tune.search_repeats, search_launches(r)))
    dynamic = len(grid) if ENGINES.get(cfg.engine.kind).dynamic_schedule else 0
    finals = sum(min(len(ss), len(levels)) for ss in grid.values())
    out.append(("confirm", finals + dynamic, levels, cfg.sweep.repeats, cfg.sweep.launches))
    return out


def make_tune_plan(cfg: RunConfig, history: Any) -> TunePlan:
    """Launch count and estimated time of a tune, round by round, priced by planner.make_plan (startup
    and per-request speed from the hardware's history, else the config's estimates)."""
    from specbench.pricing.planner import dur, make_plan

    grid = settings(cfg)
    lines = [f"tune plan: {cfg.name}: " + "; ".join(f"{v}: {len(ss)} settings ({', '.join(s.label() for s in ss)})"
                                                   for v, ss in grid.items())]
    launches, total, parallel = 0, 0.0, 0.0
    known = True
    for label, n, levels, repeats, n_launch in _planned_counts(cfg, grid):
        placeholders = [variant_of(cfg, s) for ss in grid.values() for s in ss][:n]
        while len(placeholders) < n:  # the dynamic variants: priced like a setting
            placeholders.append(placeholders[-1].model_copy(update={"name": f"extra-{len(placeholders)}"}))
        sweep = cfg.sweep.model_copy(update={"concurrency": levels, "repeats": repeats, "launches": n_launch,
                                             "until": "fixed"})
        rc = cfg.model_copy(update={"variants": [cfg.baseline, *placeholders], "sweep": sweep, "tune": None})
        p = make_plan(rc, history)
        k = (n + 1) * n_launch
        launches += k
        if p.variant_s is None:
            known = False
        else:
            total += (n + 1) * p.variant_s
            parallel += p.variant_s
        lines.append(f"  {label}: {n} setting(s) + the baseline at C={','.join(map(str, levels))}, {repeats} "
                     f"repeat(s), {n_launch} launch(es) each: {k} launches, "
                     f"{dur(None if p.variant_s is None else (n + 1) * p.variant_s)}")
    lines.append(f"  total: at most {launches} launches, {dur(total if known else None)} one after another on one node"
                 f"; {dur(parallel if known else None)} side by side (--scheduler slurm)"
                 + ("" if known else " (set estimates.startup_s and estimates.per_request_tok_s, or calibrate)"))
    return TunePlan(lines, launches, total if known else None, parallel if known else None)

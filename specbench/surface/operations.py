"""`specbench surface` and the surface side of `specbench plan`: what the commands do, apart from parsing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from specbench.config import RunConfig
from specbench.decide import crossing
from specbench.metrics.forced_surface import Prediction, decided, has_interval
from specbench.plan.drafter import LaunchContext
from specbench.shared.errors import ConfigError, UsageError
from specbench.stores.variance_history import Calibration
from specbench.surface.derive import default_lengths, split_name, surface_config

if TYPE_CHECKING:
    from specbench.server.engines import Engine
    from specbench.surface.profile import HeadProfile


def force_refusals(cfg: RunConfig) -> dict[str, str]:
    """Why each speculative variant of the config (not forced already) cannot be forced: its engine cannot (a
    command server whose template does not take {forced_acceptance}) or refuses its drafter's shape (an SGLang
    tree); a variant that can be forced is absent. Asked of the engine's own launch, so the words are its."""
    from specbench.plan.drafter import get_drafter
    from specbench.server.launch import resolve_drafter

    out = {}
    for i, v in enumerate(cfg.variants):
        if v.baseline or v.forced_acceptance is not None or not get_drafter(v.drafter).speculative:
            continue
        engine = _engine(cfg, v.name)
        if (why := engine.force_refusal(v)) is not None:
            out[v.name] = why
            continue
        drafter, params = resolve_drafter(cfg, i)
        try:
            args = drafter.launch_args(params, LaunchContext(engine=engine.kind))
            engine.launch_spec(v.model_copy(update={"forced_acceptance": 1.0}), args, cfg.engine.port, f"variants[{i}]")
        except (ConfigError, UsageError) as exc:
            out[v.name] = str(exc)
    return out


def forceable(cfg: RunConfig) -> list[str]:
    """The config's speculative variants that a surface can force (`force_refusals` says why not the others)."""
    from specbench.plan.drafter import get_drafter

    refused = force_refusals(cfg)
    return [v.name for v in cfg.variants if not v.baseline and get_drafter(v.drafter).speculative
            and v.forced_acceptance is None and v.name not in refused]


def _engine(cfg: RunConfig, name: str) -> Engine:
    """The engine that serves variant `name` (its own `command` makes it the command engine)."""
    from specbench.server.launch import make_engine, variant_engine

    variant = next(v for v in cfg.variants if v.name == name)
    where = cfg.model.path or cfg.model.demo or ""  # not launched: the model only names it
    return variant_engine(make_engine(cfg, where, where), variant)


def variant_k(cfg: RunConfig, name: str) -> int | None:
    """Draft tokens per step of a variant, from the arguments its drafter gives its engine (read by the engine:
    vLLM's num_speculative_tokens, SGLang's steps, DFlash's block size - 1, n-gram's draft tokens - 1)."""
    from specbench.server.launch import resolve_drafter

    i = next(j for j, v in enumerate(cfg.variants) if v.name == name)
    drafter, params = resolve_drafter(cfg, i)
    engine = _engine(cfg, name)
    try:
        return engine.draft_tokens(drafter.launch_args(params, LaunchContext(engine=engine.kind)))
    except (UsageError, ValueError):
        return None


def derive(cfg: RunConfig, variants: list[str] | None, lengths: list[float] | None,
           profiles: dict[str, list[float]] | None = None) -> RunConfig:
    """The surface's matrix for `variants` (default: every speculative one) at `lengths` (default per
    variant: 1, 1.5, 2, 3, k + 1 capped at k + 1), and at each variant's `profiles` entry (a head's own
    per-position rates); a length above k + 1, or a profile not of k rates, is refused by the engine's check."""
    names = variants or forceable(cfg)
    if not names:
        raise UsageError(f"surface: {cfg.name} has no speculative variant to force")
    per = {n: (sorted(set(lengths)) if lengths else default_lengths(variant_k(cfg, n))) for n in names}
    return surface_config(cfg, names, per, profiles)


def head_profiles(cfg: RunConfig, variants: list[str] | None, run: Path) -> dict[str, HeadProfile]:
    """Per variant the surface forces (`variants`, default: every one it can), its head's own profile in the
    finished run `run` (the same variant name there); a variant without one is a UsageError."""
    from specbench.surface.profile import head_profile

    if not (run / "cells.csv").exists():
        raise UsageError(f"--profile-from: {run} has no cells.csv (not a finished specbench run?)")
    out = {}
    for name in variants or forceable(cfg):
        if (p := head_profile(run, name)) is None:
            raise UsageError(f"--profile-from: {run} has no valid closed-loop cell of {name} with a per-position "
                             "acceptance (acceptance_per_position); force it with --variant and another run")
        out[name] = p
    return out


def cost_text(derived: RunConfig, full: RunConfig, history: Calibration | None) -> str:
    """The surface's cost (its forced variants and its baseline) against each forced drafter's full matrix."""
    from specbench.pricing.planner import dur, make_plan

    sp, fp = make_plan(derived, history), make_plan(full, history)
    lines = []
    by_source: dict[str, list[str]] = {}
    for v in derived.variants:
        if (parsed := split_name(v.name)) is not None and v.forced_acceptance is not None:
            by_source.setdefault(parsed[0], []).append(v.name)
    base = sp.cost_of(derived.baseline.name)
    for src, names in by_source.items():
        costs = [sp.cost_of(n) for n in names]
        drafter_full = fp.cost_of(src) if src in fp.variants else None
        if base is None or any(c is None for c in costs) or drafter_full is None:
            lines.append(f"surface cost of {src}: unknown (set estimates, or calibrate this hardware)")
            continue
        mine = sum(c for c in costs if c is not None)
        share = base / len(by_source)  # the baseline is shared by the surface's drafters
        lines.append(f"surface cost of {src}: {len(names)} forced variants {dur(mine)} + baseline share {dur(share)} "
                     f"= {dur(mine + share)}, {100 * (mine + share) / drafter_full:.0f}% of its full matrix in "
                     f"{full.name} ({dur(drafter_full)}); with the baseline reused: "
                     f"{100 * mine / drafter_full:.0f}%")
    return "\n".join(lines)


@dataclass(frozen=True)
class HeadPrediction:
    """One head's predicted speedup per concurrency, what it decides there, and the levels left to measure."""

    name: str
    curve: dict[int, Prediction]  # per concurrency on the surface
    words: dict[int, str]  # per level of the sweep on the surface: `decided`'s word
    todo: list[int]  # undecided or off the surface, at most the head's max_concurrency (above it: never measured)


@dataclass(frozen=True)
class Acceptance:
    """What a run of the heads (e.g. at C=1) gives the prediction: its cells, its per-request acceptance
    (acceptance.csv; empty without one, and the prediction takes each cell's mean) and its config's name."""

    cells: pd.DataFrame
    acceptance: pd.DataFrame
    name: str


def predict_heads(cfg: RunConfig, surface: pd.DataFrame, run: Acceptance) -> list[HeadPrediction]:
    """The heads of `cfg` on the surface and in the acceptance run's cells, predicted from the run's acceptance
    (surface.model_predict.predicted_curve, the one prediction): the one rule by which `plan` prices the
    undecided levels and `plan --write` narrows a config to them."""
    from specbench.surface.model_predict import predicted_curve
    from specbench.surface.reference import reference_from_surface

    ref = reference_from_surface(surface)
    out = []
    for v in [x for x in cfg.variants if not x.baseline]:
        if v.name not in set(surface["variant"]) or v.name not in set(run.cells["variant"]):
            continue
        curve = predicted_curve(run.cells, run.acceptance, v.name, ref)
        words = {c: decided(curve[c], cfg.verdict.min_speedup) for c in cfg.sweep.concurrency if c in curve}
        todo = [c for c in cfg.sweep.concurrency if words.get(c, "undecided") == "undecided"
                and (v.max_concurrency is None or c <= v.max_concurrency)]
        out.append(HeadPrediction(v.name, curve, words, todo))
    return out


def read_acceptance(run: Path) -> Acceptance:
    """The acceptance run's cells, its acceptance.csv and its config's name."""
    from specbench.config import load_yaml, parse_config
    from specbench.records.rundir import RunDir
    from specbench.report.derived import normalize_cells

    rd = RunDir(run)
    run_cfg = parse_config(load_yaml(rd.config.read_text(), str(rd.config)), str(rd.config))
    acceptance = pd.read_csv(rd.acceptance) if rd.acceptance.exists() else pd.DataFrame()
    return Acceptance(normalize_cells(pd.read_csv(rd.cells)), acceptance, run_cfg.name)


def plan_text(cfg: RunConfig, surface_dir: Path, acceptance_run: Path | None, history: Calibration | None) -> str:
    """`specbench plan CONFIG --surface DIR [--acceptance RUN]`: the break-even acceptance per concurrency
    on record, and with a run of a head (e.g. a new head at C=1) its predicted speedup per concurrency, what
    the prediction decides, and the cost of measuring only the points it leaves undecided."""
    from specbench.pricing.planner import dur, make_plan
    from specbench.report.surface_section import break_even_text, group_text
    from specbench.surface.table import break_even_table, load_surface

    surface = load_surface(surface_dir)
    be = break_even_table(surface)
    lines = [f"surface on record: {surface_dir}"]
    for v in sorted(surface["variant"].unique()):
        parts = [f"C={int(r['concurrency'])} {group_text(r)}".strip() + ": " + " ".join(break_even_text(r))
                 for _, r in be[be["variant"] == v].iterrows()]
        lines.append(f"  {v}: break-even acceptance length " + "; ".join(parts))
    if acceptance_run is None:
        return "\n".join(lines)
    run = read_acceptance(acceptance_run)
    full = make_plan(cfg, history)
    for h in predict_heads(cfg, surface, run):
        curve, levels = h.curve, list(h.words)
        lines.append(f"  {h.name} (acceptance from {acceptance_run}, {run.name}): predicted "
                     + "; ".join(f"C={c}: {curve[c].speedup:.2f} [{curve[c].low:.2f}, {curve[c].high:.2f}] "
                                 f"{h.words[c]}" for c in levels))
        ends = all(has_interval(curve[c]) for c in levels)  # else the verdict says it is indicative
        where = crossing.break_even(levels, [curve[c].speedup for c in levels],
                                 [curve[c].low for c in levels] if ends else None,
                                 [curve[c].high for c in levels] if ends else None)
        lines.append(f"    predicted break-even concurrency: {where.verdict}")
        if not h.todo:
            lines.append(f"    every level decided by the prediction: nothing to measure for {h.name}")
            continue
        part = cfg.model_copy(update={"sweep": cfg.sweep.model_copy(update={"concurrency": h.todo})})
        cost, whole = make_plan(part, history).cost_of(h.name), full.cost_of(h.name)
        lines.append(f"    measure only C in {h.todo}: {dur(cost)} instead of {dur(whole)} for its full sweep"
                     + (f" ({100 * cost / whole:.0f}%)" if cost is not None and whole else ""))
    return "\n".join(lines)

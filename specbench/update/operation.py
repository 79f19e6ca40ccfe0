"""What `specbench update` measures and what it costs: one launch of the new head at RUN's highest level on
RUN's own prompts, many requests in parallel (the baseline's windows there taken from RUN where RUN launched the
same baseline on this hardware, update.baseline; else the baseline launched too), against the new head's full
matrix (RUN's design for the baseline and the head)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specbench.config import RunConfig
from specbench.shared.errors import UsageError
from specbench.stores.variance_history import Calibration


def acceptance_level(cfg: RunConfig, name: str, run_cfg: RunConfig) -> int:
    """The level the update measures the head's acceptance at: RUN's highest the head may run (the most
    requests in parallel, so the fewest seconds per request)."""
    cap = cfg.variant(name).max_concurrency
    levels = [c for c in run_cfg.sweep.concurrency if cap is None or c <= cap]
    if not levels:
        raise UsageError(f"update: {name}'s max_concurrency {cap} is below every level of {run_cfg.name}")
    return max(levels)


def _narrowed(cfg: RunConfig, run_cfg: RunConfig, name: str, sweep: dict[str, Any], suffix: str) -> RunConfig:
    """CONFIG with the baseline and `name` only, on RUN's sweep with `sweep`'s fields changed, validated."""
    if run_cfg.sweep.load.open:
        raise UsageError(f"update: {run_cfg.name} is an open loop (sweep.load.kind: open); the prediction is per "
                         "closed-loop concurrency")
    keep = [v for v in cfg.variants if v.baseline or v.name == name]
    data = cfg.model_copy(update={"name": f"{cfg.name}{suffix}", "variants": keep, "tune": None,
                                  "sweep": run_cfg.sweep.model_copy(update=sweep)}).model_dump()
    return RunConfig.model_validate(data)


def derived_config(cfg: RunConfig, run_cfg: RunConfig, name: str) -> RunConfig:
    """The update's own run: the baseline and the new head `name`, one launch each, one repeat, at RUN's
    highest level only, on RUN's prompts, lengths and request options (RUN's sweep: its traffic)."""
    c = acceptance_level(cfg, name, run_cfg)
    return _narrowed(cfg, run_cfg, name, {"concurrency": [c], "launches": 1, "repeats": 1, "until": "fixed"},
                     f"-update-{name}")


def full_config(cfg: RunConfig, run_cfg: RunConfig, name: str) -> RunConfig:
    """What deciding the new head without `update` measures: RUN's whole design for the baseline and the head."""
    return _narrowed(cfg, run_cfg, name, {}, f"-full-{name}")


def rest_config(cfg: RunConfig, run_cfg: RunConfig, name: str, levels: list[int]) -> RunConfig:
    """What measuring the levels the prediction leaves undecided costs: RUN's design at those levels only."""
    return _narrowed(cfg, run_cfg, name, {"concurrency": sorted(levels)}, f"-rest-{name}")


@dataclass(frozen=True)
class Cost:
    """The update's planned cost against the full matrix's: launches and seconds (None: not priced, no
    estimates and no history)."""

    launches: int
    seconds: float | None
    full_launches: int
    full_seconds: float | None

    @property
    def share(self) -> float | None:
        """The update's seconds over the full matrix's."""
        if self.seconds is None or not self.full_seconds:
            return None
        return self.seconds / self.full_seconds


def cost(derived: RunConfig, full: RunConfig, history: Calibration | None, borrowed: bool = False) -> Cost:
    """The planner's price (pricing.planner.make_plan) of the update's run and of the full matrix; `borrowed`:
    the update's run takes RUN's baseline windows (no launch, no seconds of its own)."""
    from specbench.pricing.planner import make_plan

    def launches(c: RunConfig) -> int:
        return len(c.variants) * c.sweep.launches

    mine = make_plan(derived, history)
    seconds = mine.total_s
    if borrowed and seconds is not None:
        base = mine.cost_of(derived.baseline.name)
        seconds = None if base is None else seconds - base
    return Cost(launches(derived) - borrowed * derived.sweep.launches, seconds,
                launches(full), make_plan(full, history).total_s)


def cost_text(c: Cost, name: str) -> str:
    """One line: what the update costs, and the share of the full matrix."""
    return f"update cost of {name}: {cost_detail(c)}"


def cost_detail(c: Cost) -> str:
    """Launches and time, against the full matrix's (cost_text without its subject)."""
    from specbench.pricing.planner import dur

    share = f", {100 * c.share:.0f}% of the full matrix" if c.share is not None else ""
    launches = f"{c.launches} launch{'es' if c.launches != 1 else ''}"
    return f"{launches}, {dur(c.seconds)} (the full matrix: {c.full_launches} launches, {dur(c.full_seconds)}{share})"


def measured_share(new_meta: dict[str, Any], run_meta: dict[str, Any], variants: tuple[str, str],
                   run_variants: tuple[str, str]) -> float | None:
    """The update's measured wall time (run.json's wall_s of its baseline and head; a baseline taken from RUN
    has 0) over RUN's for the same two (its baseline and the variant the head replaces): the cost paid, as a
    share of the full matrix's."""
    def wall(meta: dict[str, Any], names: tuple[str, str]) -> float | None:
        got = [meta.get("variants", {}).get(n, {}).get("wall_s") for n in names]
        return None if any(not isinstance(x, (int, float)) for x in got) else float(sum(got))

    mine, theirs = wall(new_meta, variants), wall(run_meta, run_variants)
    return None if mine is None or not theirs else mine / theirs

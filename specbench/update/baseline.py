"""Whether the update's run can take RUN's baseline instead of launching it again: one launch (the new head's)
where RUN launched the same baseline on this hardware (docs/guide.md, "Updating a head").

The update's sweep is RUN's at one level, launch 1, repeat 1: each of its baseline windows is a window RUN sent
request for request (same prompts in the same seeded order, same seeds and lengths). When RUN's baseline has
the fingerprint the update's baseline would have on RUN's own sweep (same model weights, engine and version,
launch arguments and environment, hardware: runner.reuse.variant_fingerprints), its records of those windows
are the baseline's, measured in RUN's session; the new head is then compared with them as `--reuse` compares a
reused variant (the report names the source run)."""

from __future__ import annotations

from pathlib import Path

from specbench.config import RunConfig
from specbench.demo_models import demo_model_path, is_built
from specbench.records.rundir import RunDir
from specbench.runner.prepare import prepare_plan
from specbench.runner.reuse import Borrow, planned_windows, variant_fingerprints
from specbench.shared.errors import SpecbenchError


def borrowed_baseline(run_dir: Path, run_cfg: RunConfig, derived: RunConfig) -> Borrow | str:
    """RUN's baseline windows for the update's run (a Borrow), or why they cannot be taken (one line)."""
    name = derived.baseline.name
    if run_cfg.baseline.name != name:
        return f"RUN's baseline is {run_cfg.baseline.name!r}, the update's {name!r}"
    meta = RunDir(run_dir).load_meta().get("variants", {}).get(name, {})
    if meta.get("status") not in ("done", "reused") or not meta.get("fingerprint"):
        return f"RUN's baseline {name} did not finish"
    demo = derived.model.demo
    folder = demo_model_path(demo) if demo else None
    if folder is not None and not is_built(folder):  # RUN ran elsewhere: nothing to build to learn that
        return f"the demo model {demo} is not built on this machine"
    try:
        mine, theirs = prepare_plan(_baseline_only(derived)), prepare_plan(_baseline_only(run_cfg))
    except (SpecbenchError, OSError) as exc:
        return f"its launch cannot be planned here ({exc})"
    fingerprint = variant_fingerprints(run_cfg.sweep, mine.engine, [mine.launch(name)], theirs.sweep)[name]
    if fingerprint != meta["fingerprint"]:
        return (f"RUN launched its baseline {name} otherwise (model weights, engine or its version, launch "
                "arguments, or hardware differ)")
    wanted = planned_windows(derived.sweep, mine.sweep, name)
    have = {w.window_id for w in RunDir(run_dir).window_records() if w.variant == name}
    if not wanted or not wanted <= have:
        return f"RUN lacks some of the baseline's windows at C={derived.sweep.concurrency[0]}"
    return Borrow(run_dir, name)


def _baseline_only(cfg: RunConfig) -> RunConfig:
    """The config with its baseline alone: its plan needs no draft model built."""
    return cfg.model_copy(update={"variants": [cfg.baseline]})



def other_hardware(run_dir: Path, run_cfg: RunConfig) -> str | None:
    """How the node that served RUN's baseline differs from this machine (decide.hardware's fields both record,
    and the dtype `--dtype auto-cpu` resolves to there and here), in one line; None where nothing recorded
    differs (or RUN records no environment). RUN's step cost holds on RUN's hardware only."""
    from specbench.decide import hardware
    from specbench.shared import environment
    from specbench.shared.cpu_dtype import cpu_dtype, uses_auto

    env = RunDir(run_dir).load_environment()
    theirs = hardware.variant_fingerprints(env).get(run_cfg.baseline.name)
    if theirs is None:
        return None
    here = {k: v for k, v in environment.node_fingerprint(None).items() if k not in ("host", "engine_version")}
    diff = hardware.differences(here, theirs)
    auto = uses_auto(run_cfg.engine.args) or any(uses_auto(v.args) for v in run_cfg.variants)
    if auto and (dtype := (env.get("cpu_dtype") or {}).get("dtype")) and dtype != cpu_dtype().dtype:
        diff["cpu dtype"] = (cpu_dtype().dtype, dtype)
    return hardware.describe(diff) if diff else None

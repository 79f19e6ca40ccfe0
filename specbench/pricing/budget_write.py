"""`specbench plan CONFIG --budget H --write OUT.yaml`: the budget's design as a config that includes CONFIG
and changes only the sweep (launches, repeats, subset, and the lengths and levels the user let it drop);
with a calibration, the command to run first is `specbench calibrate OUT --probe` (its probe is OUT's own:
stores.calibration.probe_config, as the search priced it). The file is read back with specbench's own loader
before it is kept."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from specbench.config import RunConfig, load_config
from specbench.pricing.budget import BudgetChoice
from specbench.shared.errors import UsageError


def _prompts(cfg: RunConfig) -> dict[str, Any]:
    """A relative prompt path resolves against the top file's folder: the loaded CONFIG's paths again."""
    if any(src.path for src in cfg.sweep.prompts):
        return {"prompts": [src.model_dump(mode="json", exclude_defaults=True) for src in cfg.sweep.prompts]}
    return {}


def _sweep(cfg: RunConfig, choice: BudgetChoice) -> dict[str, Any]:
    """The sweep fields the design changes."""
    d = choice.design
    sweep: dict[str, Any] = {"launches": d.launches, "repeats": d.repeats, "until": "fixed", "adaptive": None,
                             "subset": d.subset.model_dump() if d.subset is not None else None}
    if list(d.output_lens) != list(cfg.sweep.output_lens):
        sweep["output_lens"] = list(d.output_lens)
    if list(d.concurrency) != list(cfg.sweep.concurrency):
        sweep["concurrency"] = list(d.concurrency)
    return sweep


def overrides(config_path: Path, cfg: RunConfig, choice: BudgetChoice) -> dict[str, Any]:
    """The mapping OUT holds: CONFIG included, then the design's sweep."""
    return {"include": str(config_path.resolve()), "name": f"{cfg.name}-budget",
            "sweep": {**_sweep(cfg, choice), **_prompts(cfg)}}


def design_config(cfg: RunConfig, choice: BudgetChoice) -> RunConfig:
    """The loaded CONFIG with the design's sweep, validated: what OUT loads to, without a file."""
    data = cfg.model_dump()
    data["sweep"].update(_sweep(cfg, choice))
    return RunConfig.model_validate(data)


def _write(path: Path, notes: list[str], data: dict[str, Any]) -> RunConfig:
    text = "".join(f"# {line}\n" for line in notes) + yaml.safe_dump(data, sort_keys=False, default_flow_style=None)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    try:
        cfg = load_config(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return cfg


def write_budget(config_path: Path, cfg: RunConfig, choice: BudgetChoice, out: Path, command: str) -> str:
    """Write OUT and say what to run: its calibration probe first where the design has one."""
    if out.resolve() == config_path.resolve():
        raise UsageError(f"plan --write: {out} is CONFIG itself; write the design to another file (it includes "
                         "CONFIG)")
    notes = [f"written by: {command}", f"{choice.gpu_hours:.1f} GPU-hours, {choice.decided} of {choice.claims} "
             "primary claims decidable (specbench plan OUT --budget prices it again)"]
    _write(out, notes, overrides(config_path, cfg, choice))
    lines = [f"wrote {out}"]
    if choice.design.calibration:
        lines.append(f"  first:  specbench calibrate {out} --probe --launches {choice.design.calibration}")
    lines.append(f"  then:   specbench run {out}")
    return "\n".join(lines)

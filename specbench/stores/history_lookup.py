"""Which entries of the variance history a run pools: only its own setup's (`lookup`); entries of a near
setup or from before histories were keyed are named, with what differs, and never pooled."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.config import RunConfig
from specbench.stores.probe_check import screen
from specbench.stores.setupkey import differences, setup_of
from specbench.stores.variance_history import FILE, Calibration, history_dir, load_history, pooled, save, setup_path


def _runs(runs: list[str]) -> str:
    names = [Path(r).name or r for r in runs]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _entries(n: int) -> str:
    return f"{n} entr{'ies' if n != 1 else 'y'}"


@dataclass(frozen=True)
class Lookup:
    """What a history file holds for one setup: the entries it may pool (exact matches that the F test
    accepted when they were added) and the others, each with why it is not pooled; `notes` says so in
    one line per reason (near matches grouped by what differs)."""

    setup: dict[str, str]
    history: str
    candidates: list[Calibration]
    not_pooled: list[dict[str, str]]  # {"source_run", "reason"}
    notes: list[str]

    @property
    def pooled(self) -> Calibration | None:
        return pooled(self.candidates, self.history)

    def to_dict(self) -> dict[str, Any]:
        return {"setup": self.setup, "history": self.history, "candidates": [e.source_run for e in self.candidates],
                "not_pooled": self.not_pooled, "notes": self.notes}


def lookup(entries: list[Calibration], setup: dict[str, str], where: str = "") -> Lookup:
    """Split a history's entries by setup: only exact matches (every field of `setupkey.FIELDS` equal) are
    candidates; an entry of another setup on this hardware (a near match) and an entry without a setup
    (from before entries were keyed: unkeyed) are never pooled, and are named; so is a calibration probe
    that the setup's full-sweep entries refuse (`probe_check.screen`)."""
    candidates: list[Calibration] = []
    not_pooled: list[dict[str, str]] = []
    near: dict[str, list[str]] = {}
    unkeyed: list[str] = []
    for e in entries:
        if not e.setup:
            unkeyed.append(e.source_run)
            reason = "unkeyed: measured before history entries were keyed by setup"
        elif diff := differences(e.setup, setup):
            near.setdefault(", ".join(diff), []).append(e.source_run)
            reason = f"another setup on this hardware: {', '.join(diff)} differ"
        elif not e.pooled:
            reason = f"refused when added: {e.note}"
        else:
            candidates.append(e)
            continue
        not_pooled.append({"source_run": e.source_run, "reason": reason})
    candidates, refused = screen(candidates)
    not_pooled += [{"source_run": e.source_run, "reason": got.line()} for e, got in refused]
    notes = [f"variance history: {_entries(len(runs))} ({_runs(runs)}) not pooled: measured on this hardware with "
             f"another setup: {diff} differ" for diff, runs in near.items()]
    if unkeyed:
        notes.append(f"variance history: {_entries(len(unkeyed))} ({_runs(unkeyed)}) not pooled: unkeyed (measured "
                     "before entries were keyed by setup); `specbench calibrate` measures this setup")
    notes += [f"variance history: {Path(e.source_run).name or e.source_run} not pooled: {got.line()}"
              for e, got in refused]
    return Lookup(setup, where, candidates, not_pooled, notes)


def find(setup: dict[str, str], cache: Path | None = None) -> Lookup:
    path = setup_path(setup, cache)
    return lookup(load_history(path), setup, str(path))


def attach(run_dir: Path, setup: dict[str, str], cache: Path | None = None) -> Lookup:
    """This setup's entries of the hardware's history: their pooled figure (with the entries) is copied
    into the run directory (calibration.json, so the run stays self-contained and re-rendering it later
    gives the same intervals) when there is one."""
    found = find(setup, cache)
    cal = found.pooled
    if cal is not None:
        save(cal, run_dir / FILE)
    return found


def config_setup(cfg: RunConfig) -> dict[str, str]:
    """The setup a config's baseline would run (`setupkey.setup_of`), before any launch or model build."""
    from specbench.demo_models import demo_model_path
    from specbench.server.launch import make_engine, plan_launches
    from specbench.shared.environment import hardware_fingerprint

    path = str(demo_model_path(cfg.model.demo) if cfg.model.demo else Path(cfg.model.path or "").expanduser())
    engine = make_engine(cfg, path, cfg.model.served_name or path)
    base = next(vl for vl in plan_launches(cfg, engine) if vl.name == cfg.baseline.name)
    return setup_of(hardware_fingerprint(), engine, base, cfg.engine.nodes)


def for_config(cfg: RunConfig) -> Lookup:
    """This config's setup's entries of the variance history (`specbench plan` and `tune` pool them)."""
    return find(config_setup(cfg), history_dir(cfg.verdict.history_dir))
def history_for(cfg: RunConfig) -> Calibration | None:
    """The pooled variance history of this config's setup (`specbench plan`, `tune`, `surface`), each note
    on what is not pooled and why printed to stderr."""
    found = for_config(cfg)
    for note in found.notes:
        print(note, file=sys.stderr)
    return found.pooled




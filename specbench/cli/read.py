"""The commands that read: report, compare, history, validate, and the listings (models, drafters)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specbench.cli.console import say
from specbench.shared.errors import UsageError


def validate(a: argparse.Namespace) -> int:
    from specbench.cli.validate import validate

    return validate(a.config, print_commands=a.print_commands)


def report(a: argparse.Namespace) -> int:
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
            say(f"warning: {r['variant']} at C={int(r['concurrency'])}: measured {r['measured']:.3f}, predicted "
                 f"{r['predicted']:.3f} [{r['predicted_low']:.3f}, {r['predicted_high']:.3f}]: the intervals disagree")
    return 0


def _gate_message(regressed: list, indicative: list, underpowered: list, threshold: float, where: str) -> None:
    """The stderr line behind a non-zero gate exit code (1: established regressions, 3: indicative drops or
    an underpowered gate)."""
    from specbench.report.compare_markdown import underpowered_text

    if regressed:
        print(f"error: {len(regressed)} cell(s) regressed{where} beyond {threshold:.0%} (established): "
              + ", ".join(str(c) for c in regressed), file=sys.stderr)
    elif indicative:
        print(f"warning: {len(indicative)} cell(s) dropped{where} beyond {threshold:.0%}, indicative only (the "
              "intervals lack the variance between launches; set sweep.launches >= 2 or calibrate): "
              + ", ".join(str(c) for c in indicative), file=sys.stderr)
    elif underpowered:
        print(f"warning: underpowered: no regression established{where}, but "
              + underpowered_text(underpowered, threshold), file=sys.stderr)


def compare(a: argparse.Namespace) -> int:
    from specbench.report.compare import compare
    from specbench.report.compare_markdown import comparison_markdown

    cmp = compare(Path(a.run_a), Path(a.run_b), threshold=a.threshold,
                  allow_mixed_hardware=a.allow_mixed_hardware)
    print(comparison_markdown(cmp))
    _gate_message(cmp.regressed, cmp.indicative, cmp.underpowered, a.threshold, "")
    return cmp.exit_code


def history(a: argparse.Namespace) -> int:
    from specbench.report.history import history, plot, to_markdown

    h = history([Path(r) for r in a.run_dirs], variant=a.variant, threshold=a.threshold,
                allow_mixed_hardware=a.allow_mixed_hardware)
    out = Path(a.out) if a.out else h.runs[-1].path / "history"
    plots = plot(h, out)
    md = to_markdown(h, plots)
    (out / "history.md").write_text(md)
    print(md, end="")
    _gate_message(h.regressed, h.indicative, h.underpowered, a.threshold, " in the newest run")
    return h.exit_code


def models(a: argparse.Namespace) -> int:
    from specbench.demo_models import prepare

    print(prepare(a.name, force=a.force, minutes=a.minutes))
    return 0


def drafters(a: argparse.Namespace) -> int:
    from specbench.plan.drafter import DRAFTERS
    from specbench.server.engines import ENGINES

    for name in DRAFTERS.names():
        d = DRAFTERS.get(name)  # engines whose launches take a drafter's arguments (not a user's own command)
        engines = ", ".join(e for e in d.engines() if ENGINES.get(e).launched and not ENGINES.get(e).user_command)
        print(f"{name:16} engines: {engines or '-':16} acceptance: "
              + "; ".join(f"{k}: {v}" for k, v in d.acceptance.items()))
    return 0

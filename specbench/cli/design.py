"""The commands that plan and narrow a measurement: plan, surface, tune."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specbench.cli.measure import execute
from specbench.shared.errors import UsageError


def plan(a: argparse.Namespace) -> int:
    from specbench.config import load_config
    from specbench.pricing.planner import make_plan
    from specbench.report.plan_text import render
    from specbench.stores import history_lookup

    if getattr(a, "budget", None) is not None:
        return _plan_budget(a)
    if (a.target is not None or a.may_drop) if hasattr(a, "target") else False:
        raise UsageError("plan: --target and --may-drop go with --budget")
    if a.write and not (a.surface and a.acceptance):
        raise UsageError("plan: --write needs --surface and --acceptance (it keeps the levels their prediction "
                         "leaves undecided)")
    if a.acceptance and not a.surface:
        raise UsageError("plan: --acceptance needs --surface (the surface the acceptance is read against)")
    cfg = load_config(a.config)
    history = history_lookup.history_for(cfg)
    print(render(make_plan(cfg, history)))
    if a.surface:
        from specbench.surface.operations import plan_text

        print(plan_text(cfg, Path(a.surface), Path(a.acceptance) if a.acceptance else None, history))
    if a.write:
        import shlex

        from specbench.surface.narrow import Inputs, write_narrowed

        command = shlex.join(["specbench", "plan", a.config, "--surface", a.surface, "--acceptance", a.acceptance,
                              "--write", a.write])
        given = Inputs(Path(a.surface), Path(a.acceptance), command)
        print(write_narrowed(Path(a.config), cfg, given, Path(a.write), history))
    return 0


def _plan_budget(a: argparse.Namespace) -> int:
    """plan --budget: the search (pricing/budget.py), its text, and --write's config."""
    import shlex

    from specbench.config import load_config
    from specbench.pricing.budget import plan_budget
    from specbench.report.budget_text import render_budget
    from specbench.stores import history_lookup

    if a.surface or a.acceptance:
        raise UsageError("plan: --budget prices the config's own matrix; leave out --surface and --acceptance")
    if not a.budget > 0:
        raise UsageError(f"plan: --budget must be a positive number of GPU-hours, got {a.budget:g}")
    cfg = load_config(a.config)
    drop = [x.strip() for x in a.may_drop.split(",") if x.strip()]
    got = plan_budget(cfg, history_lookup.history_for(cfg), a.budget, a.target, drop)
    if isinstance(got, str):
        raise UsageError(got)
    print(render_budget(got))
    if a.write:
        if got.best is None:
            raise UsageError(f"plan --write: no design within {a.budget:g} GPU-hours to write")
        from specbench.pricing.budget_write import write_budget

        argv = ["specbench", "plan", a.config, "--budget", f"{a.budget:g}", "--write", a.write]
        argv += ["--target", f"{a.target:g}"] if a.target is not None else []
        argv += ["--may-drop", a.may_drop] if a.may_drop else []
        print(write_budget(Path(a.config), cfg, got.best, Path(a.write), shlex.join(argv)))
    return 0


def _lengths(text: str | None) -> list[float] | None:
    if not text:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--al: {text!r} is not a comma-separated list of acceptance lengths") from None


def surface(a: argparse.Namespace) -> int:
    from specbench.config import load_config
    from specbench.runner import RunOptions
    from specbench.surface.operations import cost_text, derive
    from specbench.surface.render import write_surface

    if a.resume:
        run_dir = Path(a.resume)
        if not (run_dir / "config.yaml").exists():
            raise UsageError(f"--resume: {run_dir} has no config.yaml (not a specbench run directory?)")
        derived, opts = load_config(run_dir / "config.yaml"), RunOptions(out=run_dir, resume=True)
    else:
        if not a.config:
            raise UsageError("surface: give a CONFIG file (or --resume RUN_DIR)")
        cfg = load_config(a.config)
        if not a.variant:  # every variant that can be forced: say which are left out, and why
            from specbench.surface.operations import force_refusals

            for name, why in force_refusals(cfg).items():
                print(f"surface: leaving out {name}: {why}", file=sys.stderr)
        profiles = None
        if a.profile_from:  # a head's own per-position profile, one derived variant per forced variant
            from specbench.config import forced_length
            from specbench.surface.operations import head_profiles

            found = head_profiles(cfg, a.variant, Path(a.profile_from))
            for name, prof in found.items():
                print(f"surface: {name}'s own profile from {a.profile_from} at C={prof.concurrency}: {prof.rates} "
                      f"(AL {forced_length(prof.rates):.4g}), {prof.how}", file=sys.stderr)
            profiles = {name: prof.rates for name, prof in found.items()}
        derived = derive(cfg, a.variant, _lengths(a.al), profiles)
        opts = RunOptions(out=Path(a.out) if a.out else None, force=a.force)
    if a.dry_run:
        from specbench.pricing.planner import make_plan
        from specbench.report.plan_text import render
        from specbench.stores import history_lookup

        history = history_lookup.history_for(derived)
        print(render(make_plan(derived, history)))
        print(cost_text(derived, load_config(a.against or a.config), history))
        return 0
    opts.reuse = Path(a.reuse) if a.reuse else None
    code = execute(derived, opts)
    if opts.out is not None and (opts.out / "cells.csv").exists():
        from specbench.report import render as render_report

        for p in write_surface(opts.out):
            print(p)
        render_report(opts.out)  # the report again, now with the break-even acceptance
    return code


def tune(a: argparse.Namespace) -> int:
    from datetime import datetime

    from specbench.config import load_config
    from specbench.stores import history_lookup
    from specbench.tune.output import summary
    from specbench.tune.rounds import check_budget, make_tune_plan
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
    plan = make_tune_plan(cfg, history_lookup.history_for(cfg))
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


def update(a: argparse.Namespace) -> int:
    """`specbench update CONFIG --from RUN --variant NAME`: one launch measures the new head's acceptance at
    RUN's highest level; every level of RUN is decided from the prediction where it can be (docs/guide.md,
    "Updating a head")."""
    from specbench.config import load_config
    from specbench.records.rundir import RunDir
    from specbench.runner.reuse import Borrow
    from specbench.shared.errors import UsageError
    from specbench.stores import history_lookup
    from specbench.update.baseline import borrowed_baseline, other_hardware
    from specbench.update.match import match_variant
    from specbench.update.operation import (
        cost,
        cost_detail,
        cost_text,
        derived_config,
        full_config,
        measured_share,
        rest_config,
    )
    from specbench.update.words import read_config, update_words, word_lines, write_update

    run_dir = Path(a.from_run)
    cfg, run_cfg = load_config(a.config), read_config(run_dir)
    ref_variant = match_variant(cfg, a.variant, run_cfg)
    if (other := other_hardware(run_dir, run_cfg)) is not None:
        raise UsageError(f"update: {run_dir} was measured on other hardware than this machine ({other}): its step "
                         "cost does not hold here; run the update where RUN ran, or measure the head's matrix here")
    derived = derived_config(cfg, run_cfg, a.variant)
    borrow = borrowed_baseline(run_dir, run_cfg, derived)
    print(f"update: {a.variant} replaces {ref_variant} of {run_dir} (same drafter configuration, new weights); "
          f"one launch at C={derived.sweep.concurrency[0]} on its prompts measures the new acceptance")
    print(f"update: the baseline's windows at C={derived.sweep.concurrency[0]} taken from {run_dir} (same launch, "
          "same hardware)" if isinstance(borrow, Borrow) else f"update: the baseline launched again: {borrow}")
    print(cost_text(cost(derived, full_config(cfg, run_cfg, a.variant), history_lookup.history_for(derived),
                         isinstance(borrow, Borrow)), a.variant))
    if a.dry_run:
        return 0
    if a.measured:
        new_dir, code = Path(a.measured), 0
    else:
        from specbench.report.terminal import print_summary
        from specbench.runner import RunOptions, run_matrix

        result = run_matrix(derived, RunOptions(out=Path(a.out) if a.out else None, force=a.force,
                                                borrow=borrow if isinstance(borrow, Borrow) else None))
        print_summary(result.run_dir)
        new_dir = result.run_dir
        code = 1 if any(s in ("failed", "interrupted") for s in result.status.values()) else 0
    words = update_words(run_dir, new_dir, a.variant, ref_variant)
    path = write_update(new_dir, words)
    from specbench.report import render as render_report

    render_report(new_dir)  # the report again, now with the update's words
    print(f"update: {path}")
    for line in word_lines(words):
        print(line)
    paid = measured_share(RunDir(new_dir).load_meta(), RunDir(run_dir).load_meta(),
                          (derived.baseline.name, a.variant), (run_cfg.baseline.name, ref_variant))
    if paid is not None:
        print(f"update: measured wall time {100 * paid:.0f}% of {run_dir}'s baseline and {ref_variant}")
    todo = [int(c) for c, s in zip(words["concurrency"], words["source"]) if s == "to measure"]
    if todo:
        rest = cost(rest_config(cfg, run_cfg, a.variant, todo), full_config(cfg, run_cfg, a.variant),
                    history_lookup.history_for(derived))
        print(f"update: C in {todo} left to measure: the prediction does not decide them; measuring them as "
              f"{run_dir} did: {cost_detail(rest)}")
    return code

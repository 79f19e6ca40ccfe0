"""`specbench plan CONFIG --budget H`'s text: the design the budget search picked (pricing/budget.py), per
level what it can decide in words, and what the next GPU-hour would buy."""

from __future__ import annotations

import math

from specbench.pricing.budget import BudgetChoice, BudgetDesign, BudgetPlan
from specbench.pricing.planner import dur
from specbench.report.assumptions import launch_condition


def design_words(d: BudgetDesign) -> str:
    """A design in one line: launches, repeats, calibration, subset, what it measures."""
    n, r = d.launches, d.repeats
    out = f"{n} launch{'es' * (n != 1)} x {r} repeat{'s' * (r != 1)} per variant"
    if d.calibration:
        out += f", after `specbench calibrate --probe` with {d.calibration} baseline launches at one point"
    if d.subset is not None:
        out += (f", {d.subset.per_category} prompts per category (seeded, the same for every variant) at "
                f"C <= {d.subset.up_to}")
    return out + f"; output lengths {list(d.output_lens)}, C in {list(d.concurrency)}"


def _level_line(c: int, adopt: float, slower: float, subset: bool, claims: int) -> str:
    if not math.isfinite(adopt):
        return f"    C={c}: no interval (one launch and no variance history): indicative only"
    on = " (on the subset)" if subset else ""
    return (f"    C={c}{on}: adopts a drafter from {adopt:.2f}x, calls it slower below {slower:.2f}x "
            f"({claims} claim{'s' * (claims != 1)})")


def untested_words(d: BudgetDesign) -> str | None:
    """What a run of the design cannot test and its report will state as conditions of its error rate
    (report/assumptions.py); None when its launches test them."""
    if d.launches >= 2:
        return None
    return ("  untested by this design, stated in its report as a condition of the error rate: "
            + launch_condition("the run's launches, the drafters' too,", one_window=d.repeats == 1)
            + ' (docs/metrics.md, "What the error rate assumes")')


def _next_hour(p: BudgetPlan, best: BudgetChoice) -> str:
    more = p.next_hour
    if more is None or more.design == best.design:
        return f"  the next GPU-hour ({p.budget_h + 1:g}) would buy nothing: the same design stays the best"
    now = {lv.concurrency: lv.adopt_from for lv in best.levels}
    gains = [f"C={lv.concurrency} {now[lv.concurrency]:.3f}x -> {lv.adopt_from:.3f}x" for lv in more.levels
             if lv.concurrency in now and math.isfinite(lv.adopt_from) and lv.adopt_from < now[lv.concurrency] - 5e-4]
    what = ", ".join(gains) if gains else "no lower adoptable speedup"
    return (f"  the next GPU-hour ({p.budget_h + 1:g} GPU-hours): {design_words(more.design)}; "
            f"smallest adoptable speedup {what}; {more.decided} claims decided")


def render_budget(p: BudgetPlan) -> str:
    head = (f"plan --budget {p.budget_h:g} GPU-hours: {p.name}: {p.considered} designs priced, {p.within} within "
            f"the budget" + (f", may drop {', '.join(sorted(p.may_drop))}" if p.may_drop else ""))
    best = p.best
    if best is None:
        return head + "\n  no design fits: the cheapest needs more GPU-hours (raise --budget, or allow --may-drop)"
    target = (f"a drafter at --target {p.target:g} would be adopted" if p.target is not None
              else "it has an interval")
    lines = [head,
             f"  best: {design_words(best.design)}",
             f"  cost: {best.gpu_hours:.1f} GPU-hours, {dur(best.seconds)} one after another on one node"
             + (f" (the calibration {dur(best.calibration_s)} of it)" if best.calibration_s else ""),
             f"  decides {best.decided} of {best.claims} primary claims (a claim counts where {target}); "
             f"the family's level: {best.family}",
             f"  variance: {p.components_source}" + (f"; prompt CV {100 * p.prompt_cv:.0f}% between prompts "
                                                      "(estimates.prompt_cv, assumed, not measured)"
                                                      if best.design.subset is not None and p.prompt_cv else ""),
             "  in words, per level (the smallest speedup it can adopt at min_speedup "
             f"{p.min_speedup:g}, the largest it can call slower):"]
    if (untested := untested_words(best.design)) is not None:
        lines.insert(-1, untested)
    lines += [_level_line(lv.concurrency, lv.adopt_from, lv.slower_below, lv.subset, lv.claims)
              for lv in best.levels]
    lines.append(_next_hour(p, best))
    return "\n".join(lines)

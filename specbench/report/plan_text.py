"""`specbench plan`'s text: a CostPlan (pricing/planner.py) in the team's units: hours, node- and GPU-hours,
and what each design can decide, in words."""

from __future__ import annotations

import math

from specbench.decide.change import POWER, required_drop
from specbench.decide.decision import (
    Design,
)
from specbench.pricing.planner import (
    COMPARE_THRESHOLD,
    SEQUENTIAL_MAX,
    SEQUENTIAL_START,
    SEQUENTIAL_VS_FIXED,
    CostPlan,
    Source,
    decidable,
    dur,
    half_width_of,
)


def _node_hours(seconds: float | None, nodes: int) -> str:
    """A variant on `nodes` nodes (engine.nodes) holds them all for its whole run."""
    return "unknown" if seconds is None else f"{seconds / 3600 * nodes:.1f}"


def _gpu_hours(seconds: float | None, gpus: Source, nodes: int = 1) -> str:
    if gpus.value is None:
        return f"GPU-hours unknown ({gpus.source})"
    if seconds is None:
        return "GPU-hours unknown"
    each = f"{gpus.value * nodes:g} GPUs: {gpus.value:g} a node x {nodes} nodes" if nodes > 1 else \
        f"{gpus.value:g} GPUs a node"
    return f"{seconds / 3600 * gpus.value * nodes:.1f} GPU-hours ({each}: {gpus.source})"


def _in_words(design: Design, half_width: float, min_speedup: float) -> str:
    """What a design can decide, in speedups rather than ln units."""
    adopt, slower = decidable(half_width, min_speedup)
    n, r = design.launches, design.repeats
    runs = f"{n} launch{'es' * (n != 1)} x {r} repeat{'s' * (r != 1)}"
    return (f"in words: with {runs}, nothing below {adopt:.2f}x can be adopted (the interval's low end must "
            f"clear min_speedup {min_speedup:g}), and nothing above {slower:.2f}x can be called slower")


def render(p: CostPlan) -> str:
    d, n = p.design, len(p.variants)
    lines = [f"plan: {p.name}: {n} variants x {p.points} points, {d.launches} launch(es) x {d.repeats} repeat(s) "
             "per variant",
             f"  engine startup: {dur(p.startup.value)} per launch ({p.startup.source})",
             f"  measuring one repeat of the sweep: {dur(p.measuring_s)} per variant ({p.rate_source})"]
    for v in p.variants:
        if v in p.capped:
            cap, points, _ = p.capped[v]
            lines.append(f"  {v}: {dur(p.cost_of(v))} ({points} points: max_concurrency {cap}, the points above "
                         "it are not measured)")
        else:
            lines.append(f"  {v}: {dur(p.cost_of(v))}")
    total = p.total_s
    longest = max((cost for v in p.variants if (cost := p.cost_of(v)) is not None), default=None)
    where = "one node" if p.nodes == 1 else f"one set of {p.nodes} nodes"
    lines.append(f"  total: {dur(total)} one after another on {where}; {dur(longest)} side by side "
                 f"(--scheduler slurm, {n * p.nodes} nodes); {_node_hours(total, p.nodes)} "
                 f"node-hours, {_gpu_hours(total, p.gpus, p.nodes)}")
    if p.components is not None:
        c = p.components
        lines.append(f"  variance: between launches CV {100 * math.sqrt(c.launch.var):.1f}%, between repeats CV "
                     f"{100 * math.sqrt(c.repeat.var):.1f}% ({p.components_source})")
    else:
        lines.append(f"  variance: {p.components_source}")
    if p.half_width is not None:
        lo, hi = math.exp(-p.half_width), math.exp(p.half_width)
        target = math.log(p.min_speedup) / 2
        lines.append(f"  expected 95% speedup interval at every point: estimate x [{lo:.3f}, {hi:.3f}] "
                     f"(high/low {hi / lo:.3f}; half-width {p.half_width:.4f} on ln speedup, to decide at most "
                     f"ln({p.min_speedup:g}) / 2 = {target:.4f})")
        lines.append(f"  {_in_words(d, p.half_width, p.min_speedup)}")
    elif p.components is None:
        lines.append("  expected interval: unknown without variance components")
    elif p.indicative:
        lines.append("  expected interval: none with launch variance (1 launch per variant and no history): the "
                     "verdict will be indicative only; set sweep.launches >= 2 or run `specbench calibrate`")
        if (half2 := half_width_of(p.components, Design(2, d.repeats), None)[0]) is not None:
            lines.append(f"  {_in_words(Design(2, d.repeats), half2, p.min_speedup)} (sweep.launches: 2)")
    if p.sequential is not None and p.measuring_s is not None:
        first, most = p.sequential
        per_launch = (p.startup.value or 0.0) + d.repeats * p.measuring_s
        lines.append(f"  sequential (until: decided): {first} launches of every variant first "
                     f"({dur(first * per_launch)} "
                     f"a variant), then rounds only for undecided points, at most {most} launches "
                     f"({dur(most * per_launch)} a variant if every point stayed undecided), or less within budget_h; "
                     f"each look draws its intervals at 2.5% / {most - first + 1} per side, wider than the 95% above")
    if p.optimal is not None:
        o = p.optimal
        lines.append(f"  cost-optimal to resolve min_speedup {p.min_speedup:g}: {o.design.launches} launches x "
                     f"{o.design.repeats} repeat(s) per variant, {dur(o.cost)} per variant, "
                     f"{_node_hours(n * o.cost, p.nodes)} node-hours, {_gpu_hours(n * o.cost, p.gpus, p.nodes)} "
                     f"(expected half-width "
                     f"{o.half_width:.4f} on ln speedup)")
        lines.append(f"  {_in_words(o.design, o.half_width, p.min_speedup)}")
    elif p.components is not None and p.measuring_s is not None and p.startup.value is not None:
        lines.append(f"  cost-optimal design: none within 30 launches resolves min_speedup {p.min_speedup:g}")
    if p.components is not None and not p.open_loop:
        lines.append("  recommended: " + ("keep until: decided" if p.sequential is not None else
                                          f"until: decided (sweep.launches: {SEQUENTIAL_START}, repeats: 1, "
                                          f"max_launches: {SEQUENTIAL_MAX})")
                     + f" rather than a fixed design: {SEQUENTIAL_VS_FIXED}")
    if p.components is not None:
        cells = p.points * max(1, n - 1)
        need = f"{POWER:.0%} power against a {required_drop(COMPARE_THRESHOLD):.2%} drop in each of {cells} cells"
        lines.append(f"  compare gate (threshold {COMPARE_THRESHOLD:.0%}): " + (
            f"{p.compare_launches} launches x {d.repeats} repeat(s) per variant in both runs give {need}, so that "
            "`specbench compare` can say no regression (exit 0)" if p.compare_launches is not None else
            f"no design within 30 launches x {d.repeats} repeat(s) gives {need}: `specbench compare` will exit 3 "
            "(underpowered) when it finds no regression"))
    return "\n".join(lines)

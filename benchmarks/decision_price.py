"""What a decision costs at a team's price (issue 50's goals), simulated through specbench's own functions.

    python -m benchmarks.decision_price [--trials 1000] [--seed 0] [--budget 48] [--update-trials 40]

K2.6: the design is the one `specbench plan configs/kimi-k2.6-tp8.yaml --budget B` picks
(`pricing.budget.plan_budget`, from the shipped config's estimates). Each trial runs that design: the
calibration first (the design's baseline launches x 2 windows at `calibrate --probe`'s one point, at launch CV
3% and repeat CV 2%, its history estimated, pooled and checked as a run does: `variance_history.estimate`, `pooled`,
`history_checks.check_run`), then one run of every variant at the design's launches and repeats. EAGLE-3 is
at the public K2.6 curve (1.29 / 1.39 / 1.14 / 0.98x at C = 1 / 16 / 64 / 128, linear in log C between, so
1.265x at C = 32), DDTree (C = 1 only) at 1.0. Each prompt's speedup varies around its category's by
`estimates.prompt_cv` (10%); the curve is the whole prompt set's, and a level measured on the subset
(`plan.subset.stratified_subset`, the product's own draw) sees its prompts' mean: the same prompts at every
subset level and length. The cells, their mix columns with the subset's sampling variance
(`metrics.mix.add_mix_columns`), the family's level (`metrics.claims.primary_level`) and each word
(`decide.primary.family_outcome`) are the report's. A: the share of runs whose table adopts EAGLE-3 at both
C = 1 and C = 16. E: with both drafters exactly at the margin (min_speedup 1.05 at every level), the share of
runs with some adopt; again with the calibration's SDs halved (a history quieter than the run).

M is `benchmarks.verdict_family.demo_decides` with `probe` (README's documented path: `specbench calibrate --probe`,
11 baseline launches at one point, then the demo's one launch a variant; n-gram at a true 1.30x, its word at C = 1).
U is `specbench update`'s planned cost (update.operation) on K2.6 at that design, over the new head's full matrix
there, on the node RUN ran on (the baseline's windows taken from RUN, update.baseline; the cost with the baseline
launched again is printed above the line). S is `benchmarks.update_fidelity` (its own trials, --update-trials, at
the same seed): of the levels `specbench update` decides (update.level.level_words from the new head's one launch
alone at the highest level and RUN's step cost), the share where its word is the new head's full matrix's (3
launches of the baseline and the head at every level), two new heads (AL 2.4 and 2.8) of K2.6's EAGLE-3 (AL 2.6)
pooled.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.verdict_family import _cells_frame, demo_decides
from specbench.config import RunConfig, load_config
from specbench.decide.decision import Outcome
from specbench.decide.intervals import LaunchVariance
from specbench.decide.primary import family_outcome
from specbench.decide.sampling import SubsetSampling
from specbench.metrics.cells import interval_unit, mark_history_intervals
from specbench.metrics.claims import primary_level
from specbench.metrics.mix import add_mix_columns
from specbench.metrics.speedup import MeasuredCell, speedup_columns
from specbench.plan.prompts import Prompt
from specbench.plan.subset import stratified_subset
from specbench.pricing.budget import BudgetDesign, BudgetPlan, plan_budget
from specbench.pricing.budget_write import design_config
from specbench.stores import history_checks, variance_history
from specbench.stores.calibration import PROBE_REPEATS
from specbench.update.operation import cost, derived_config, full_config

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "kimi-k2.6-tp8.yaml"
LAUNCH_CV, REPEAT_CV = 0.03, 0.02
PUBLIC = {1: 1.29, 16: 1.39, 64: 1.14, 128: 0.98}  # EAGLE-3 on K2.6, TP8 over PCIe
ADOPT_AT = (1, 16)
UPDATE_TRIALS = 40  # S's trials at most (benchmarks.update_fidelity: about 1.5 s each)
Windows = dict[tuple[int, int], float]


def public_curve(c: int) -> float:
    """The public curve at C, linear in log C between its points (held flat outside them)."""
    xs = sorted(PUBLIC)
    if c <= xs[0]:
        return PUBLIC[xs[0]]
    for lo, hi in zip(xs, xs[1:]):
        if c <= hi:
            t = (math.log(c) - math.log(lo)) / (math.log(hi) - math.log(lo))
            return PUBLIC[lo] + t * (PUBLIC[hi] - PUBLIC[lo])
    return PUBLIC[xs[-1]]


@dataclass(frozen=True)
class Shape:
    """The simulated sweep: categories (and their prompt counts), lengths, levels, who measures which."""

    categories: dict[str, int]
    lens: tuple[int | str, ...]
    levels: tuple[int, ...]
    caps: dict[str, int]  # drafter -> its max_concurrency
    baseline: str


def shape_of(cfg: RunConfig, d: BudgetDesign, counts: dict[str, int]) -> Shape:
    top = max(cfg.sweep.concurrency)
    return Shape(counts, d.output_lens, d.concurrency,
                 {v.name: v.max_concurrency or top for v in cfg.variants if not v.baseline}, cfg.baseline.name)


def _windows(rng: np.random.Generator, level: float, launches: int, repeats: int, cells: int,
             effects: np.ndarray | None = None, launch_cv: float = LAUNCH_CV,
             repeat_cv: float = REPEAT_CV) -> list[Windows]:
    """One variant's windows at `cells` cells: a launch effect shared by every cell of the launch, repeats
    within it; `effects` (per cell) multiply the cell's level (a drafter's speedup there)."""
    common = rng.standard_normal(launches)
    out = []
    for i in range(cells):
        e = 1.0 if effects is None else float(effects[i])
        rep = 1 + repeat_cv * rng.standard_normal((launches, repeats))
        out.append({(la + 1, r + 1): float(100.0 * level * e * (1 + launch_cv * common[la]) * rep[la, r])
                    for la in range(launches) for r in range(repeats)})
    return out


def _points(s: Shape) -> list[tuple[str, int | str, int]]:
    return [(cat, o, c) for c in s.levels for cat in s.categories for o in s.lens]


def _calibration(rng: np.random.Generator, d: BudgetDesign, s: Shape, i: int, scale: float) -> object | None:
    """The calibration's pooled history (None without one): `calibrate --probe`'s one point, the baseline's
    launches x PROBE_REPEATS windows."""
    if d.calibration < 2:
        return None
    aa = _cells_frame({"base": _windows(rng, 1.0, d.calibration, PROBE_REPEATS, 1, launch_cv=scale * LAUNCH_CV,
                                        repeat_cv=scale * REPEAT_CV)})
    entry = variance_history.estimate(aa, "base", hardware={}, engine="", model="", source_run=f"cal{i}")
    return variance_history.pooled([entry], "simulated") if entry is not None else None


def simulate(rng: np.random.Generator, d: BudgetDesign, s: Shape, truth: Callable[[str, int], float],
             subset: SubsetSampling | None, prompt_cv: float, i: int, scale: float = 1.0,
             ) -> dict[tuple[str, int], Outcome]:
    """One simulated run of the design: its words per (drafter, level)."""
    cal = _calibration(rng, d, s, i, scale)
    pts = _points(s)
    prompts = {c: [Prompt(f"{c}{j}", c, "") for j in range(n)] for c, n in s.categories.items()}
    runs: dict[str, list[Windows]] = {s.baseline: _windows(rng, 1.0, d.launches, d.repeats, len(pts))}
    for name, cap in s.caps.items():
        # each prompt's speedup around its category's (centred: the curve is the whole set's)
        z = {c: rng.standard_normal(n) for c, n in s.categories.items()}
        z = {c: prompt_cv * (v - v.mean()) for c, v in z.items()}
        kept = stratified_subset(prompts, d.subset.per_category, 0) if subset and d.subset else prompts
        sub_effect = {c: math.exp(float(np.mean([z[c][int(p.id[len(c):])] for p in kept[c]]))) for c in z}
        effects = np.array([truth(name, lvl) * (sub_effect[cat] if subset and lvl <= subset.up_to else 1.0)
                            for cat, _, lvl in pts])
        runs[name] = _windows(rng, 1.0, d.launches, d.repeats, len(pts), effects)
        runs[name] = [w if lvl <= cap else {} for w, (_, _, lvl) in zip(runs[name], pts)]
    lv: LaunchVariance | None = None
    if cal is not None:
        frame = _cells_frame({k: [w for w in v if w] for k, v in runs.items()})
        lv = history_checks.check_run(frame, list(runs), cal).variance("sim")  # type: ignore[arg-type]
    cells = []
    for name, ws in runs.items():
        for (cat, o, lvl), w in zip(pts, ws):
            if not w:
                continue
            n = len({la for la, _ in w})
            row = {"variant": name, "is_baseline": name == s.baseline, "valid": True,
                   "point_id": f"{cat}|{o}|c{lvl}", "category": cat, "input_len": math.nan, "output_len": o,
                   "concurrency": lvl, "temperature": 0.0, "rate": math.nan, "launches": n, "repeats": len(w),
                   "interval_unit": interval_unit(n, lv), "output_throughput_tok_s": float(np.mean(list(w.values()))),
                   "speedup": 1.0}
            if name != s.baseline:
                base = runs[s.baseline][pts.index((cat, o, lvl))]
                row.update(speedup_columns(w, base, lv))
                mark_history_intervals(row)
            cells.append(MeasuredCell(row=row, reqs=[], window_tp=w, n_launches=n))
    add_mix_columns(cells, {c.row["point_id"]: c for c in cells if c.row["is_baseline"]}, lv, subset)
    hist = None if lv is None else {"rel_var": lv.rel_var, "df": lv.df, "repeat_rel_var": lv.repeat_rel_var,
                                    "repeat_df": lv.repeat_df}
    frame = pd.DataFrame([c.row for c in cells])
    level = primary_level(frame, list(s.caps), s.baseline, hist)
    out = {}
    for c in cells:
        r = c.row
        if not r["is_baseline"] and (r["variant"], r["concurrency"]) not in out:
            out[(r["variant"], r["concurrency"])] = family_outcome(
                r["mix_speedup_ci_low"], r["mix_speedup_ci_high"], r["mix_speedup_ci_df"], level,
                1.05)
    return out


def _setup(cfg: RunConfig, budget: float) -> tuple[BudgetPlan, Shape, SubsetSampling | None]:
    from collections import Counter

    from specbench.plan.prompts import load_prompts

    plan = plan_budget(cfg, None, budget)
    if isinstance(plan, str) or plan.best is None:
        raise SystemExit(f"no design within {budget} GPU-hours: {plan if isinstance(plan, str) else ''}")
    d = plan.best.design
    try:
        counts = dict(Counter(p.category for p in load_prompts(cfg.sweep.prompts)))
    except Exception:  # the prompt wheels missing here: the config's per_category
        counts = {f"{src.set}": src.per_category or 32 for src in cfg.sweep.prompts}
    sub = None
    if d.subset is not None:
        sub = SubsetSampling(d.subset.up_to, cfg.estimates.prompt_cv,
                             {c: min(n, d.subset.per_category) for c, n in counts.items()}, counts)
    return plan, shape_of(cfg, d, counts), sub


def k26_price(trials: int, seed: int, budget: float) -> tuple[float, float, float, float, BudgetPlan]:
    """(B, A, E, E with the history's SDs halved, the plan) for the shipped K2.6 config."""
    cfg = load_config(CONFIG)
    plan, s, sub = _setup(cfg, budget)
    assert plan.best is not None
    d, cv = plan.best.design, cfg.estimates.prompt_cv or 0.0
    rng = np.random.default_rng(seed)
    top = max(s.caps, key=lambda v: s.caps[v])  # the uncapped drafter: EAGLE-3
    adopt = margin = halved = 0
    for i in range(trials):
        words = simulate(rng, d, s, lambda v, c: public_curve(c) if v == top else 1.0, sub, cv, i)
        adopt += all(words.get((top, c)) is Outcome.ADOPT for c in ADOPT_AT)
        words = simulate(rng, d, s, lambda v, c: 1.05, sub, cv, i)
        margin += any(w is Outcome.ADOPT for w in words.values())
        words = simulate(rng, d, s, lambda v, c: 1.05, sub, cv, i, scale=0.5)
        halved += any(w is Outcome.ADOPT for w in words.values())
    return plan.best.gpu_hours, adopt / trials, margin / trials, halved / trials, plan


def update_share(cfg: RunConfig, plan: BudgetPlan, borrowed: bool = True) -> float | None:
    """U: `specbench update`'s planned cost (update.operation.cost: one launch of the new head at RUN's highest
    level, the baseline's windows there taken from RUN: the update runs on the node RUN ran on,
    update.baseline; `borrowed` False: the baseline launched again) over the new head's full matrix, RUN being
    K2.6 at the plan's --budget design."""
    assert plan.best is not None
    run = design_config(cfg, plan.best)
    drafter = next(v.name for v in run.variants if not v.baseline and v.max_concurrency is None)
    return cost(derived_config(run, run, drafter), full_config(run, run, drafter), None, borrowed).share


def update_fidelity(trials: int, seed: int) -> tuple[float | None, str]:
    """S (None where the update decided no point) and benchmarks.update_fidelity's last line."""
    from benchmarks.update_fidelity import fidelity, last_line

    f = fidelity(trials, seed)
    s = f.pooled().s
    return (s if math.isfinite(s) else None), last_line(f)


def update_price(u: float | None, s: float | None) -> tuple[str, str]:
    """(U, S) as printed, each n/a where it is not computed (U: no estimates to price; S: no decided point)."""
    return tuple("n/a" if x is None else f"{100 * x:.1f}" for x in (u, s))  # type: ignore[return-value]


def price_line(b: float, a: float, e: float, m: float, u: str, s: str) -> str:
    """The issue's last line, exactly."""
    return (f"price: K2.6 at {b:.1f} GPU-hours adopts C=1 and C=16 in {100 * a:.1f}% of runs at the public curve, "
            f"family-wise error at the margin {100 * e:.1f}%, demo decided after calibrate in {100 * m:.1f}% of "
            f"simulated demos, a drafter update costs {u}% of its full matrix with the full matrix's words on "
            f"{s}% of decided points")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.decision_price", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=float, default=48.0, help="GPU-hours for K2.6's design (default 48)")
    p.add_argument("--update-trials", type=int, default=None,
                   help=f"S's trials (default: --trials, at most {UPDATE_TRIALS})")
    a = p.parse_args(argv)
    b, adopt, e, e_half, plan = k26_price(a.trials, a.seed, a.budget)
    assert plan.best is not None
    d = plan.best.design
    m = demo_decides(a.trials, a.seed + 1, probe=True)
    relaunched = update_share(load_config(CONFIG), plan, borrowed=False)
    s_share, fidelity_line = update_fidelity(a.update_trials or min(a.trials, UPDATE_TRIALS), a.seed)
    u, s = update_price(update_share(load_config(CONFIG), plan), s_share)
    print(f"K2.6 design (plan --budget {a.budget:g}): {d.launches} launch(es) x {d.repeats} repeat(s), "
          f"calibration {d.calibration} launches, subset {d.subset.model_dump() if d.subset else None}, "
          f"{plan.best.gpu_hours:.1f} GPU-hours; {a.trials} trials (seed {a.seed})")
    print(f"family-wise error at the margin {100 * e:.1f}%, with the history's SDs halved {100 * e_half:.1f}%")
    if relaunched is not None:
        print(f"a drafter update on another node (the baseline launched again): {100 * relaunched:.1f}% of its "
              "full matrix")
    print(fidelity_line)
    print(price_line(b, adopt, e, m, u, s))
    return 0


if __name__ == "__main__":
    sys.exit(main())

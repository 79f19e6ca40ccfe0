"""What a decision costs, and how often it is wrong: sequential measurement (`sweep.until: decided`) against
the best fixed design `specbench plan` recommends, both with the same variance history, on the cell
structure of a real matrix, through specbench's own functions.

    python -m benchmarks.decision_cost [--matrices 120] [--quick] [--seed 0] [--write docs/metrics.md]

The matrix is configs/demo-cpu-full.yaml's, as specbench plans it (plan.build_sweep, plan.variant_points):
8 variants (the baseline and 7 drafters, three of them capped at C = 1), 5 categories x 2 output lengths x
3 concurrency levels, every output length its own point (30 points, 10 for a capped drafter), each window
costing (requests / C) x output_len / per-request speed (planner.point_seconds at the window's real request
count, plan.windows.point_requests: whole passes of the category's prompts; the config's estimates), each launch
the config's startup (31 s). Only the variance is simulated: per matrix a launch CV in [1%, 4%] and a
repeat CV in [0.5%, 2%]; a window's log throughput is log(truth) + a launch effect (shared by the launch's
points) + a repeat effect.

The history: `--history-entries` calibrations (3 launches x 2 repeats of the baseline on every point),
each estimated by variance_history.estimate and pooled by variance_history.pooled, as `specbench calibrate` leaves
them. The fixed design is the one make_plan (`specbench plan`) calls cost-optimal with that history
(metrics.decision.optimal_design); its one look draws the 95% intervals. Where plan recommends no design
(none within 30 launches resolves m) the matrix is reported apart, with the sequential rule's figures
there, and is left out of the comparison (no substitute design). The sequential design starts with 2
launches x 1 repeat and runs sequential.next_round (the runner's rule: always-valid intervals, undecided
points, the baseline then each drafter concerned) up to `--max-launches`. Both read every look's cells
through the product: history_checks.check_run (the speed test and the F tests of every variant's own
estimates against the history),
speedup.speedup_ci (launch+history or launch intervals), sequential.always_valid, and the report's
outcomes (report.decisions.point_outcomes, decision.classify) with m = verdict.min_speedup.

Truths: `profile` (speedups from 0.6 to 1.5 across drafters, concurrency, output lengths and categories,
the realistic matrix: cost, points decided, coverage), and the boundaries, every drafter point at
m (P(adopt), P(same)), at 1/m (P(same)), at 1 (A/A: P(slower), P(adopt)). Conditions: a matched history;
a misspecified one (its SDs halved, doubled); drift (log throughput rising by half a launch SD per full
round of launches, in the product's launch order); heavy tails (launch and repeat effects t with 3 df,
same SD); a launch x point interaction (half the launch variance drawn per point). Error rates are per
drafter point, their Monte Carlo error the standard error over matrices (points of one matrix share
launches). The last line reads

    decision cost: <P>% of the best fixed design's GPU-hours, <D>% of points decided (fixed: <F>%), worst
    boundary error <E>% (misspecified history: <M>%), coverage <C>

(on one line): P, D, F and C on the profile with a matched history, E the worst boundary error over the
conditions with a matched history (matched, drift, heavy tails, interaction), M over the misspecified
ones; the line before it gives both designs' worst error under the misspecified history (the reason
`specbench plan` recommends the sequential rule: its stated error rates hold there, the fixed design's do
not). Goal P <= 70, D >= F, E <= 2.5, M <= 5, C >= 0.93 (exit code 1 otherwise).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.config import RunConfig, SweepConfig, load_config
from specbench.decide import stats
from specbench.decide.decision import Design, Outcome
from specbench.decide.intervals import variance_levels
from specbench.decide.stopping import always_valid, next_round
from specbench.metrics.common import safe_ratio
from specbench.metrics.speedup import speedup_ci
from specbench.plan.prompts import load_prompts
from specbench.plan.windows import build_sweep, point_requests, variant_points
from specbench.pricing import planner
from specbench.report.decisions import point_outcomes
from specbench.runner.scheduler import launch_order, round_order
from specbench.stores import history_checks, variance_history
from specbench.stores.variance_history import Calibration

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "demo-cpu-full.yaml"
LAUNCH_CV, REPEAT_CV = (0.01, 0.04), (0.005, 0.02)
SEQ_START = 2
CAL_LAUNCHES, CAL_REPEATS = 3, 2
GOAL = {"P": 70.0, "E": 2.5, "M": 5.0, "C": 0.93}
MARK_START = "<!-- decision-cost:start -->"
MARK_END = "<!-- decision-cost:end -->"

Windows = dict[tuple[int, int], float]


@dataclass(frozen=True)
class Condition:
    name: str
    history_sd: float = 1.0  # the history's SDs over the true ones
    drift: float = 0.0  # launch SDs of drift per full round of launches
    tails: bool = False  # t(3) effects instead of normal ones
    interaction: float = 0.0  # share of the launch variance drawn per point

    @property
    def misspecified(self) -> bool:
        return self.history_sd != 1.0


CONDITIONS = (Condition("matched"), Condition("history SD halved", history_sd=0.5),
              Condition("history SD doubled", history_sd=2.0), Condition("drift", drift=0.5),
              Condition("heavy tails", tails=True), Condition("launch x point interaction", interaction=0.5))
TRUTHS = ("profile", "m", "1/m", "1")


@dataclass(frozen=True)
class Matrix:
    """The config's matrix as specbench plans it: variants in launch order, each one's point ids, and
    what one window of each point costs."""

    cfg: RunConfig
    baseline: str
    variants: list[str]
    points: dict[str, list[str]]  # variant -> its point ids
    keys: dict[str, tuple[str, int, int]]  # point id -> (category, output_len, concurrency)
    seconds: dict[str, float]  # point id -> one window

    @classmethod
    def of(cls, cfg: RunConfig) -> Matrix:
        sweep = build_sweep(cfg.sweep, load_prompts(cfg.sweep.prompts))
        points = {v.name: [p.key(v.name).point_id for p in variant_points(cfg.variants, sweep, v.name)]
                  for v in cfg.variants}
        keys = {p.key("").point_id: (p.category, p.output_len, p.concurrency) for p in sweep.points}
        requests = {p.key("").point_id: point_requests(cfg.sweep, sweep, p) for p in sweep.points}
        seconds = {pid: planner.point_seconds(cfg, None, o, c, requests[pid]) or 0.0
                   for pid, (_, o, c) in keys.items()}
        return cls(cfg, cfg.baseline.name, [v.name for v in cfg.variants], points, keys, seconds)

    def launch_s(self, points: frozenset[str] | list[str], repeats: int) -> float:
        return (self.cfg.estimates.startup_s or 0.0) + repeats * sum(self.seconds[p] for p in points)

    def truth(self, kind: str) -> dict[tuple[str, str], float]:
        m = self.cfg.verdict.min_speedup
        fixed = {"m": m, "1/m": 1 / m, "1": 1.0}
        return {(v, p): fixed[kind] if kind in fixed else _profile(i, *self.keys[p])
                for i, v in enumerate(self.variants[1:]) for p in self.points[v]}


def _profile(drafter: int, category: str, output_len: int, concurrency: int) -> float:
    """A realistic spread of true speedups: each drafter's gain at C = 1 falling with concurrency, a
    little higher at the longer output, varying by category (0.6 to 1.5)."""
    at_c1 = (1.45, 1.25, 0.7, 1.35, 0.95, 1.15, 1.05)[drafter % 7]
    fall = (0.12, 0.08, -0.05, 0.1, 0.0, 0.06, 0.05)[drafter % 7]
    cat = 1.0 + 0.03 * ((sum(map(ord, category)) % 5) - 2)
    return at_c1 * cat * (1.02 if output_len > 64 else 1.0) * (1 - fall * math.log2(concurrency) / 2)


class World:
    """One simulated node: the variance components, the condition, the clock (for drift)."""

    def __init__(self, rng: np.random.Generator, cond: Condition, s_l: float, s_r: float, round_s: float):
        self.rng, self.cond, self.s_l, self.s_r = rng, cond, s_l, s_r
        self.rate = cond.drift * s_l / round_s  # drift per second of the run
        self.clock = 0.0

    def _noise(self, sd: float, size: int | None = None) -> np.ndarray:
        if self.cond.tails:
            return sd / math.sqrt(3) * self.rng.standard_t(3, size)
        return self.rng.normal(0.0, sd, size)

    def launch(self, truths: list[float], repeats: int, seconds: float) -> np.ndarray:
        """(repeats, points) window throughputs of one launch; the clock advances by its cost."""
        share = self.cond.interaction
        effect = (self._noise(self.s_l * math.sqrt(1 - share)) + self._noise(self.s_l * math.sqrt(share), len(truths))
                  + self.rate * self.clock)
        self.clock += seconds
        log = np.log(truths) + effect + self._noise(self.s_r, (repeats, len(truths)))
        return 100.0 * np.exp(log)


class Run:
    """The windows one design measured: variant -> point id -> (launch, repeat) -> throughput."""

    def __init__(self, mx: Matrix, world: World, truth: dict[tuple[str, str], float]):
        self.mx, self.world, self.truth = mx, world, truth
        self.windows: dict[str, dict[str, Windows]] = {v: {p: {} for p in mx.points[v]} for v in mx.variants}
        self.seconds = 0.0
        self._ci: dict[tuple[str, str, int, int, bool], tuple[float, stats.TInterval]] = {}
        self._levels: dict[tuple[str, str, int], dict] = {}

    def launch(self, variant: str, launch: int, points: frozenset[str] | list[str], repeats: int) -> None:
        pts = [p for p in self.mx.points[variant] if p in points]
        cost = self.mx.launch_s(pts, repeats)
        tps = self.world.launch([self.truth.get((variant, p), 1.0) for p in pts], repeats, cost)
        self.seconds += cost
        for j, p in enumerate(pts):
            for r in range(repeats):
                self.windows[variant][p][(launch, r + 1)] = float(tps[r, j])

    def cells(self, history: Calibration | None, sweep: SweepConfig) -> pd.DataFrame:
        """The cells a look reads (the columns the verdict and the sequential rule use), as derive_cells
        makes them: the history's checks (history_checks.check_run), the speedup intervals, always-valid intervals."""
        mx, base = self.mx, self.windows[self.mx.baseline]
        own = _levels_frame(self.windows, self._levels) if history is not None else pd.DataFrame()
        lv = history_checks.check_run(own, mx.variants, history).variance("simulated history")
        rows = []
        for v in mx.variants[1:]:
            for p in mx.points[v]:
                w = self.windows[v][p]
                key = (v, p, len(w), len(base[p]), lv is None)  # unchanged windows: the same interval
                if key not in self._ci:
                    s = safe_ratio(stats.mean(list(w.values())), stats.mean(list(base[p].values())))
                    self._ci[key] = s, speedup_ci(w, base[p], lv, s)
                s, ci = self._ci[key]
                rows.append({"variant": v, "point_id": p, "is_baseline": False, "valid": True,
                             "launches": len({la for la, _ in w}), "speedup": s,
                             "speedup_ci_low": math.nan if ci.low is None else ci.low,
                             "speedup_ci_high": math.nan if ci.high is None else ci.high,
                             "speedup_ci_df": math.nan if ci.df is None else ci.df})
        return always_valid(pd.DataFrame(rows), sweep)



def _levels_frame(windows: dict[str, dict[str, Windows]], cache: dict[tuple[str, str, int], dict] | None = None,
                  ) -> pd.DataFrame:
    """The cells as the history's checks read them (history_checks.check_run, estimate: launch_cv and repeat_cv
    by variance_levels, the output throughput by point), computed without the history."""
    rows = []
    for v, by_point in windows.items():
        for p, w in by_point.items():
            key = (v, p, len(w))
            if cache is None or key not in cache:
                row = {"variant": v, "point_id": p, "valid": True, "launches": len({la for la, _ in w}),
                       "repeats": len(w), "output_throughput_tok_s": stats.mean(list(w.values())),
                       **variance_levels(w, [])}
                if cache is None:
                    rows.append(row)
                    continue
                cache[key] = row
            rows.append(cache[key])
    return pd.DataFrame(rows)


def simulated_history(mx: Matrix, world: World, entries: int) -> Calibration | None:
    """`entries` calibrations of the baseline (CAL_LAUNCHES x CAL_REPEATS), on a node whose SDs are the
    condition's history_sd times the true ones, estimated and pooled by specbench."""
    h = World(world.rng, replace(world.cond, drift=0.0), world.s_l * world.cond.history_sd,
              world.s_r * world.cond.history_sd, 1.0)
    out = []
    for i in range(entries):
        run = Run(mx, h, {})
        for la in range(1, CAL_LAUNCHES + 1):
            run.launch(mx.baseline, la, mx.points[mx.baseline], CAL_REPEATS)
        frame = _levels_frame({mx.baseline: run.windows[mx.baseline]})
        est = variance_history.estimate(frame, mx.baseline, hardware={}, engine="simulated",
                                   model=variance_history.model_key(mx.cfg), source_run=f"cal{i}")
        if est is not None:  # what run_estimate adds: the baseline's speeds (the speed test), repeats per launch
            out.append(replace(est, speeds=history_checks.speeds(frame, mx.baseline), repeats=CAL_REPEATS))
    return variance_history.pooled(out, "simulated")


@dataclass
class Score:
    """Outcome counts over drafter points, and per matrix (for the Monte Carlo error)."""

    seconds: float = 0.0
    points: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {o.value: 0 for o in Outcome})
    covered: int = 0
    per_matrix: list[dict[str, float]] = field(default_factory=list)

    def add(self, run: Run, cells: pd.DataFrame, m: float) -> None:
        self.seconds += run.seconds
        mine = {o.value: 0 for o in Outcome}
        n = 0
        for v in run.mx.variants[1:]:
            outs = point_outcomes(cells, v, m)
            sub = cells.loc[outs.index]
            for out, lo, hi, p in zip(outs, sub["speedup_ci_low"], sub["speedup_ci_high"], sub["point_id"]):
                mine[out.value] += 1
                n += 1
                self.covered += bool(lo <= run.truth[(v, p)] <= hi)
        self.points += n
        for k, c in mine.items():
            self.counts[k] += c
        self.per_matrix.append({k: c / n for k, c in mine.items()})

    def rate(self, outcome: Outcome) -> tuple[float, float]:
        """(percent of points, its Monte Carlo standard error in points of percent)."""
        xs = np.array([d[outcome.value] for d in self.per_matrix])
        se = float(xs.std(ddof=1) / math.sqrt(xs.size)) if xs.size > 1 else math.nan
        return 100 * self.counts[outcome.value] / max(1, self.points), 100 * se

    @property
    def decided(self) -> float:
        return 100 * (1 - self.counts[Outcome.UNDECIDED.value] / max(1, self.points))

    @property
    def coverage(self) -> float:
        return self.covered / max(1, self.points)


def fixed_design(mx: Matrix, history: Calibration | None) -> Design | None:
    """The cost-optimal launches x repeats `specbench plan` recommends with this history; None when it
    recommends none (no design within 30 launches resolves m): such a matrix is reported apart, never
    priced with a substitute design."""
    plan = planner.make_plan(mx.cfg, history)
    return plan.optimal.design if plan.optimal is not None else None


def run_fixed(mx: Matrix, world: World, truth: dict[tuple[str, str], float], history: Calibration | None,
              score: Score, design: Design) -> Design:
    sweep = mx.cfg.sweep.model_copy(update={"launches": design.launches, "repeats": design.repeats, "until": "fixed"})
    run = Run(mx, world, truth)
    for unit in launch_order(mx.variants, design.launches):
        run.launch(unit.variant, unit.launch, mx.points[unit.variant], design.repeats)
    score.add(run, run.cells(history, sweep), mx.cfg.verdict.min_speedup)
    return design


def run_sequential(mx: Matrix, world: World, truth: dict[tuple[str, str], float], history: Calibration | None,
                   score: Score, max_launches: int) -> int:
    sweep = mx.cfg.sweep.model_copy(update={"launches": SEQ_START, "repeats": 1, "until": "decided",
                                            "max_launches": max_launches})
    run = Run(mx, world, truth)
    for unit in launch_order(mx.variants, SEQ_START):
        run.launch(unit.variant, unit.launch, mx.points[unit.variant], 1)
    n, status = SEQ_START, {v: "done" for v in mx.variants}
    while (todo := next_round(run.cells(history, sweep), sweep, mx.cfg.verdict.min_speedup, mx.baseline, n,
                              status).todo):
        n += 1
        points = dict(todo)
        for v in round_order(list(points), n):  # the runner's order of a round
            run.launch(v, n, points[v], 1)
    score.add(run, run.cells(history, sweep), mx.cfg.verdict.min_speedup)
    return n


@dataclass
class Cell:
    """One (condition, truth) entry: both designs' scores."""

    fixed: Score = field(default_factory=Score)
    sequential: Score = field(default_factory=Score)  # on the matrices where plan recommends a fixed design
    designs: list[Design] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    alone: Score = field(default_factory=Score)  # sequential, where plan recommends no fixed design
    no_design: int = 0  # matrices where plan recommends no fixed design


def simulate(mx: Matrix, cond: Condition, truth_kind: str, opts: argparse.Namespace, seed: int) -> Cell:
    rng = np.random.default_rng(seed)
    truth = mx.truth(truth_kind)
    full_round = sum(mx.launch_s(mx.points[v], 1) for v in mx.variants)
    cell = Cell()
    for _ in range(opts.matrices):
        s_l, s_r = rng.uniform(*LAUNCH_CV), rng.uniform(*REPEAT_CV)
        world = World(rng, cond, s_l, s_r, full_round)
        history = simulated_history(mx, world, opts.history_entries)
        design = fixed_design(mx, history)
        if design is None:  # nothing to compare against: the sequential rule's figures there, apart
            cell.no_design += 1
            world.clock = 0.0
            run_sequential(mx, world, truth, history, cell.alone, opts.max_launches)
            continue
        world.clock = 0.0
        cell.designs.append(run_fixed(mx, world, truth, history, cell.fixed, design))
        world.clock = 0.0
        cell.rounds.append(run_sequential(mx, world, truth, history, cell.sequential, opts.max_launches))
    return cell


def boundary_errors(results: dict[tuple[str, str], Cell], design: str) -> Iterator[tuple[str, str, float, float]]:
    """(condition, error name, percent, Monte Carlo SE) of every boundary error rate."""
    checks = (("m", Outcome.ADOPT, "P(adopt | m)"), ("m", Outcome.NO_DIFFERENCE, "P(same | m)"),
              ("1/m", Outcome.NO_DIFFERENCE, "P(same | 1/m)"), ("1", Outcome.SLOWER, "P(slower | 1)"),
              ("1", Outcome.ADOPT, "P(adopt | 1)"))
    for cond in CONDITIONS:
        for truth, outcome, name in checks:
            if (cond.name, truth) in results:
                sc = getattr(results[(cond.name, truth)], design)
                yield (cond.name, name, *sc.rate(outcome))


def worst(results: dict[tuple[str, str], Cell], misspecified: bool,
          design: str = "sequential") -> tuple[float, float, str]:
    names = {c.name for c in CONDITIONS if c.misspecified == misspecified}
    rows = [(p, se, f"{name} ({cond})") for cond, name, p, se in boundary_errors(results, design)
            if cond in names]
    return max(rows) if rows else (math.nan, math.nan, "")


SCENARIOS = [("matched", "profile")] + [(c.name, t) for c in CONDITIONS for t in TRUTHS[1:]]


def tables(results: dict[tuple[str, str], Cell], opts: argparse.Namespace) -> str:
    prof = results[("matched", "profile")]
    fx, sq = prof.fixed, prof.sequential
    designs = sorted({(d.launches, d.repeats) for d in prof.designs})
    counts = {d: sum((x.launches, x.repeats) == d for x in prof.designs) for d in designs}
    lines = [f"Profile, matched history ({opts.matrices} matrices; the {len(prof.designs)} where `specbench plan` "
             "recommends a fixed design):", "",
             "| design | cost vs fixed | points decided | adopt | same | slower | coverage |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, sc in (("fixed (`specbench plan`'s cost-optimal)", fx),
                      (f"sequential (2 launches, then until decided, max {opts.max_launches})", sq)):
        r = {o: sc.rate(o)[0] for o in Outcome}
        cost = f"{100 * sc.seconds / fx.seconds:.0f}%" if fx.seconds else "-"
        lines.append(f"| {label} | {cost} | {sc.decided:.1f}% | "
                     f"{r[Outcome.ADOPT]:.1f}% | {r[Outcome.NO_DIFFERENCE]:.1f}% | {r[Outcome.SLOWER]:.1f}% | "
                     f"{sc.coverage:.3f} |")
    lines += ["", "Fixed designs recommended (launches x repeats: matrices): "
              + ", ".join(f"{n} x {r}: {counts[(n, r)]}" for n, r in designs)
              + (f"; sequential launches used: median {np.median(prof.rounds):g}, max {max(prof.rounds)}."
                 if prof.rounds else "."), "",
              f"Where `specbench plan` recommends no fixed design (none within 30 launches resolves m): "
              f"{prof.no_design} of {opts.matrices} matrices, reported apart (no substitute design)"
              + (f": there the sequential rule decides {prof.alone.decided:.1f}% of the points, coverage "
                 f"{prof.alone.coverage:.3f}, {prof.alone.seconds / 3600 / prof.no_design:.2f} h a matrix."
                 if prof.no_design else "."), "",
              "Boundary error rates per drafter point, percent (in brackets the Monte Carlo SE over matrices), "
              "sequential / fixed; coverage of the reported intervals over those points:",
              "", "| condition | P(adopt \\| m) | P(same \\| m) | P(same \\| 1/m) | P(slower \\| 1) | P(adopt \\| 1) "
              "| coverage |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    seq = list(boundary_errors(results, "sequential"))
    fix = list(boundary_errors(results, "fixed"))
    for cond in CONDITIONS:
        cells = [f"{p:.2f} ({se:.2f}) / {fp:.2f}" for (c, _, p, se), (_, _, fp, _) in zip(seq, fix) if c == cond.name]
        if not cells:
            continue
        runs = [results[(cond.name, t)] for t in TRUTHS[1:] if (cond.name, t) in results]
        cov = [sum(getattr(r, k).covered for r in runs) / sum(getattr(r, k).points for r in runs)
               for k in ("sequential", "fixed")]
        lines.append(f"| {cond.name} | " + " | ".join(cells) + f" | {cov[0]:.3f} / {cov[1]:.3f} |")
    lines += ["", f"{opts.matrices} matrices per entry; launch CV {100 * LAUNCH_CV[0]:g}-{100 * LAUNCH_CV[1]:g}%, "
              f"repeat CV {100 * REPEAT_CV[0]:g}-{100 * REPEAT_CV[1]:g}%; history: {opts.history_entries} "
              f"calibrations of {CAL_LAUNCHES} launches x {CAL_REPEATS} repeats; m = {opts.min_speedup:g}; "
              f"seed {opts.seed}."]
    return "\n".join(lines)


def _one(job: tuple[RunConfig, Condition, str, argparse.Namespace, int]) -> Cell:
    cfg, cond, truth, opts, seed = job
    return simulate(Matrix.of(cfg), cond, truth, opts, seed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.decision_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--matrices", type=int, default=120, help="simulated matrices per condition and truth")
    ap.add_argument("--quick", action="store_true", help="a few matrices, the matched history only (a test)")
    ap.add_argument("--history-entries", type=int, default=2)
    ap.add_argument("--max-launches", type=int, default=10)
    ap.add_argument("--config", type=Path, default=CONFIG)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (the scenarios run in parallel)")
    ap.add_argument("--write", type=Path, help="replace the tables between the markers in this file")
    opts = ap.parse_args(argv)
    if opts.quick:
        opts.matrices = min(opts.matrices, 3)
    cfg = load_config(opts.config)
    opts.min_speedup = cfg.verdict.min_speedup
    names = {CONDITIONS[0].name, CONDITIONS[1].name} if opts.quick else {c.name for c in CONDITIONS}
    by_name = {c.name: c for c in CONDITIONS}
    scen = [(c, t) for c, t in SCENARIOS if c in names]
    jobs = [(cfg, by_name[c], t, opts, opts.seed * 1000 + i) for i, (c, t) in enumerate(scen)]
    if opts.jobs > 1:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(opts.jobs) as pool:
            cells = pool.map(_one, jobs, chunksize=1)
    else:
        cells = [_one(j) for j in jobs]
    results = dict(zip(scen, cells))
    text = tables(results, opts)
    print(text)
    if opts.write:
        doc = opts.write.read_text()
        a, b = doc.index(MARK_START) + len(MARK_START), doc.index(MARK_END)
        opts.write.write_text(doc[:a] + "\n" + text + "\n" + doc[b:])
    prof = results[("matched", "profile")]
    p = 100 * prof.sequential.seconds / prof.fixed.seconds if prof.fixed.seconds else math.nan
    d, f = prof.sequential.decided, prof.fixed.decided
    e, e_se, e_where = worst(results, misspecified=False)
    mm, _, m_where = worst(results, misspecified=True)
    fm, _, f_where = worst(results, misspecified=True, design="fixed")
    c = prof.sequential.coverage
    print(f"worst boundary error: {e_where}, Monte Carlo SE {e_se:.2f}; misspecified: {m_where}")
    print(f"misspecified history, worst boundary error: sequential {mm:.1f}% ({m_where}), fixed {fm:.1f}% "
          f"({f_where}); plan recommends no fixed design in {prof.no_design} of {opts.matrices} matrices")
    print(f"decision cost: {p:.0f}% of the best fixed design's GPU-hours, {d:.0f}% of points decided "
          f"(fixed: {f:.0f}%), worst boundary error {e:.1f}% (misspecified history: {mm:.1f}%), coverage {c:.3f}")
    ok = p <= GOAL["P"] and d >= f and e <= GOAL["E"] and mm <= GOAL["M"] and c >= GOAL["C"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

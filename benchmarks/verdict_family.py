"""The primary verdict's family-wise error rate, by simulation through specbench's own functions.

    python -m benchmarks.verdict_family [--trials 2000] [--seed 0]

Seven drafters, every one exactly at the margin: a true speedup of m = verdict.min_speedup (1.05) at every
point, so every "adopt" is an error. Each variant (the baseline too) is launched 3 times; a launch's effect
(launch CV 5%) is shared by every point of the launch, windows vary by REPEAT_CV inside it. The sweep has
3 categories x 2 output lengths (the mix: 6 points, equal weights) at 4 concurrencies, so the primary family
holds 7 x 4 = 28 claims. Each trial builds every point's speedup with `metrics.speedup.speedup_columns`, the
mix interval with `decide.primary.mix_interval` and each word with `decide.primary.primary_outcome` at the family's
size, as the report does (report/decisions.py). Printed: P(any adopt) over the family, and without the
family's correction (each claim at 2.5%: what the table would say at the per-claim level); the coverage
of the 95% mix intervals (before the family's widening) of the true mix speedup.

The secondary claims (the per-category lines): each drafter's 24 points (3 categories x 2 lengths x 4
concurrencies), each point's 95% interval from `speedup_columns`, decided by `decide.secondary.
secondary_outcomes` (Holm within the drafter, as report/verdict.py does). Printed: P(some point of one
drafter says adopt) with Holm and with each point at 2.5%, and P(some point of any of the 7 drafters says
adopt) with Holm (the family is the drafter: over 7 drafters the union bound is 7 x 2.5%).

Last field: the demo (configs/demo-cpu.yaml: 2 drafters x 3 concurrencies, 2 categories x 2 lengths, one
launch x 1 repeat per variant) after one `specbench calibrate` (3 launches x 2 repeats of the baseline at
every point) at the launch CV the calibration measured on vLLM-CPU (DEMO_LAUNCH_CV: 4.2%, docs/surface.md,
AMD EPYC), its n-gram variant at C=1 with a true speedup of 1.30 at every point (README's demo table). The
history is estimated (`variance_history.estimate`, `pooled`) and checked (`history_checks.check_run`) as a
run does. "yes" when the product's rule gives a decided word (adopt, same or slower) in at least half of
the simulated demos; the share is printed.

The blind spots (`blind_spots`, `Blind`): README's path (`calibrate --probe`, then the demo) at the margin with
each condition the report states as untested (report/assumptions.py) broken in the simulated truth: the history's
SDs half the run's, the drafters' launch CV twice the baseline's, the baseline from another session (its shift's SD
the launch CV). Printed: P(any adopt) at the family's level for each.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.decide.decision import Outcome
from specbench.decide.family import FamilyLevel
from specbench.decide.intervals import LaunchVariance, variance_levels
from specbench.decide.primary import family_outcome, primary_outcome
from specbench.decide.secondary import secondary_family, secondary_outcomes
from specbench.metrics.breakeven import break_even_table
from specbench.metrics.cells import interval_unit, mark_history_intervals
from specbench.metrics.claims import primary_level, secondary_level
from specbench.metrics.mix import add_mix_columns
from specbench.metrics.speedup import MeasuredCell, speedup_columns
from specbench.stores import history_checks, variance_history
from specbench.stores.calibration import PROBE_LAUNCHES, PROBE_REPEATS

M = 1.05  # the default verdict.min_speedup
DRAFTERS, LAUNCHES, LAUNCH_CV, REPEAT_CV = 7, 3, 0.05, 0.01
POINTS = [(cat, out) for cat in ("code", "chat", "rewrite") for out in (64, 256)]
CONCURRENCY = (1, 4, 16, 64)
DEMO_LAUNCH_CV, DEMO_SPEEDUP, DEMO_CLAIMS = 0.042, 1.30, 2 * 3  # 2 drafters x 3 concurrencies
DEMO_POINTS, DEMO_CONCURRENCY, CAL_LAUNCHES, CAL_REPEATS = 4, 3, 3, 2
MISSPECIFIED_SHARE = 0.5
DEMO_POINTS_LIST, DEMO_LEVELS = [(cat, out) for cat in ("code", "chat") for out in (64, 256)], (1, 4, 16)

Windows = dict[tuple[int, int], float]


def _variant(rng: np.random.Generator, speedup: float, launches: int, repeats: int, cells: int,
             launch_cv: float, shared: float = 1.0, repeat_cv: float = REPEAT_CV) -> list[Windows]:
    """One variant's windows at `cells` cells: a launch's effect, a fraction `shared` of its variance common to
    every cell of the launch (the rest each cell's own), windows varying by REPEAT_CV inside it."""
    common = rng.standard_normal(launches)
    out = []
    for _ in range(cells):
        effect = 1 + launch_cv * (math.sqrt(shared) * common + math.sqrt(1 - shared) * rng.standard_normal(launches))
        rep = 1 + repeat_cv * rng.standard_normal((launches, repeats))
        out.append({(la + 1, r + 1): float(100.0 * speedup * effect[la] * rep[la, r])
                    for la in range(launches) for r in range(repeats)})
    return out


def _table(by_variant: dict[str, list[Windows]], points: list[tuple[str, int]], concurrency: tuple[int, ...],
           cal: LaunchVariance | None) -> Table:
    """A run's primary table as the product derives it: cells (`speedup_columns`), their mix columns
    (`metrics.mix.add_mix_columns`: weights, intervals, launch sharing) and the family's level
    (`metrics.claims.primary_level`, as report/decisions.py asks it). Cell i is point i % P at concurrency
    i // P; "base" is the baseline."""
    cells = []
    base = by_variant["base"]
    for name, ws in by_variant.items():
        for i, w in enumerate(ws):
            (cat, out), conc = points[i % len(points)], concurrency[i // len(points)]
            n = len({la for la, _ in w})
            row = {"variant": name, "is_baseline": name == "base", "valid": True, "point_id": f"{cat}|{out}|c{conc}",
                   "category": cat, "input_len": math.nan, "output_len": out, "concurrency": conc, "temperature": 0.0,
                   "rate": math.nan, "launches": n, "repeats": len(w), "interval_unit": interval_unit(n, cal),
                   "output_throughput_tok_s": float(np.mean(list(w.values()))), "speedup": 1.0}
            if name != "base":
                row.update(speedup_columns(w, base[i], cal))
                mark_history_intervals(row)
            cells.append(MeasuredCell(row=row, reqs=[], window_tp=w, n_launches=n))
    add_mix_columns(cells, {c.row["point_id"]: c for c in cells if c.row["is_baseline"]}, cal)
    history = None if cal is None else {"rel_var": cal.rel_var, "df": cal.df, "repeat_rel_var": cal.repeat_rel_var,
                                        "repeat_df": cal.repeat_df}
    drafters = [v for v in by_variant if v != "base"]
    frame = pd.DataFrame([c.row for c in cells])
    level = primary_level(frame, drafters, "base", history)
    claims = {(c.row["variant"], c.row["concurrency"]): (c.row["mix_speedup_ci_low"], c.row["mix_speedup_ci_high"],
                                                         c.row["mix_speedup_ci_df"]) for c in cells
              if not c.row["is_baseline"]}
    return Table(level, claims, frame, history)


@dataclass
class Table:
    """A simulated run's primary table: its level and claims, its cells and the history they used."""

    level: FamilyLevel
    claims: dict[tuple[str, int], Interval]
    cells: pd.DataFrame
    history: dict[str, float] | None

    def secondary_adopts(self, drafter: str) -> bool:
        """Whether some point of the drafter's secondary family says adopt, as report/verdict.py decides it."""
        mine = self.cells[self.cells["variant"] == drafter]
        level = secondary_level(self.cells, drafter, "base", self.history)
        return any(o is Outcome.ADOPT for o in secondary_family(mine, M, level=level).values())

    def never_pays(self) -> tuple[bool, bool]:
        """Whether some row of break_even.csv says "never pays": at the drafters' family levels (as finalize
        writes it) and with the per-point 95% intervals."""
        drafters = [v for v in self.cells["variant"].unique() if v != "base"]
        levels = {v: secondary_level(self.cells, v, "base", self.history) for v in drafters}
        fam = break_even_table(self.cells, "base", levels=levels)
        per_point = break_even_table(self.cells, "base")
        return bool((fam["status"] == "never_pays").any()), bool((per_point["status"] == "never_pays").any())


@dataclass
class Family:
    any_adopt: float  # P(some claim of the family says adopt) at the family's level (decide.family)
    any_adopt_bonferroni: float  # the same with each claim at 2.5% / claims (Bonferroni)
    any_adopt_per_claim: float  # the same with each claim at 2.5%
    coverage: float  # of the 95% mix intervals
    secondary_drafter: float  # P(some point of one drafter's secondary family says adopt), as the report decides
    secondary_drafter_holm: float  # the same by Holm
    secondary_drafter_per_point: float  # the same with each point at 2.5%
    secondary_any: float  # P(some point of any drafter says adopt), within each drafter's family
    methods: str  # the levels' methods seen, with how often


Interval = tuple[float, float, float]


def _point_intervals(v: list[Windows], b: list[Windows], cal: LaunchVariance | None) -> list[dict[str, float]]:
    return [speedup_columns(vw, bw, cal) for vw, bw in zip(v, b)]


def _interval(c: dict[str, float]) -> Interval:
    nan = math.nan
    return c.get("speedup_ci_low", nan), c.get("speedup_ci_high", nan), c.get("speedup_ci_df", nan)


def family(trials: int, seed: int, shared: float = 1.0) -> Family:
    """The primary and secondary families with every drafter at the margin; `shared`: the fraction of a launch's
    effect common to its points (1: the model's; less: the model misspecified)."""
    rng = np.random.default_rng(seed)
    n_cells, claims = len(POINTS) * len(CONCURRENCY), DRAFTERS * len(CONCURRENCY)
    adopt = adopt_bonf = adopt_per_claim = covered = drawn = 0
    sec_drafter = sec_holm = sec_per_point = sec_any = 0
    methods: dict[str, int] = {}
    for _ in range(trials):
        variants = {"base": _variant(rng, 1.0, LAUNCHES, 1, n_cells, LAUNCH_CV, shared)}
        variants |= {f"d{i}": _variant(rng, M, LAUNCHES, 1, n_cells, LAUNCH_CV, shared) for i in range(DRAFTERS)}
        tab = _table(variants, POINTS, CONCURRENCY, None)
        level, table = tab.level, tab.claims
        key = level.method.split(" (")[0] + (f" {level.method.split('rho ')[1][:4]}" if "rho " in level.method else "")
        methods[key] = methods.get(key, 0) + 1
        any_f = any_b = any_c = any_s = False
        for (_, _), (lo, hi, df) in table.items():
            if math.isfinite(lo):
                drawn += 1
                covered += lo <= M <= hi
            any_f |= family_outcome(lo, hi, df, level, M) is Outcome.ADOPT
            any_b |= primary_outcome(lo, hi, df, claims, M) is Outcome.ADOPT
            any_c |= primary_outcome(lo, hi, df, 1, M) is Outcome.ADOPT
        for name, v in variants.items():
            if name == "base":
                continue
            intervals = [_interval(c) for c in _point_intervals(v, variants["base"], None)]
            holm = any(o is Outcome.ADOPT for o in secondary_outcomes(intervals, M))
            fam = tab.secondary_adopts(name)
            sec_drafter += fam
            sec_holm += holm
            sec_per_point += any(o is Outcome.ADOPT for iv in intervals for o in secondary_outcomes([iv], M))
            any_s |= fam
        adopt += any_f
        adopt_bonf += any_b
        adopt_per_claim += any_c
        sec_any += any_s
    seen = ", ".join(f"{k} in {100 * n / trials:.0f}%" for k, n in sorted(methods.items(), key=lambda x: -x[1]))
    return Family(adopt / trials, adopt_bonf / trials, adopt_per_claim / trials,
                  covered / drawn if drawn else math.nan, sec_drafter / (trials * DRAFTERS),
                  sec_holm / (trials * DRAFTERS), sec_per_point / (trials * DRAFTERS), sec_any / trials, seen)


def _cells_frame(by_variant: dict[str, list[Windows]]) -> pd.DataFrame:
    """Cells as the history's estimate and checks read them (variance_levels per cell)."""
    return pd.DataFrame([{"variant": name, "point_id": f"p{i}", "valid": True, "launches": len({la for la, _ in w}),
                          "repeats": len(w), "output_throughput_tok_s": float(np.mean(list(w.values()))),
                          **variance_levels(w, [])} for name, ws in by_variant.items() for i, w in enumerate(ws)])


@dataclass(frozen=True)
class Blind:
    """What a one-launch demo cannot test (report/assumptions.py), as the simulated truth breaks it: the
    history's SDs `history_scale` times the run's, the drafters' launch CV `drafter_scale` times the baseline's,
    and the baseline taken from another session whose shift has SD `session_cv` (each session its own)."""

    history_scale: float = 1.0
    drafter_scale: float = 1.0
    session_cv: float = 0.0


def _demo_table(rng: np.random.Generator, i: int, speedups: tuple[float, float], blind: Blind = Blind(),
                probe: bool = False) -> Table:
    """One simulated demo after one calibration: the calibration (3 launches x 2 repeats of the baseline over
    the sweep; with `probe`, `calibrate --probe`'s PROBE_LAUNCHES x PROBE_REPEATS at one point) at
    `blind.history_scale` times the run's SDs, its history estimated and checked as a run does, then one launch x 1
    repeat of the baseline and two drafters (true speedups `speedups` at every point), their table."""
    cells = DEMO_POINTS * DEMO_CONCURRENCY
    launches, repeats, cal_cells = (PROBE_LAUNCHES, PROBE_REPEATS, 1) if probe else (CAL_LAUNCHES, CAL_REPEATS, cells)
    scale = blind.history_scale
    aa = _cells_frame({"base": _variant(rng, 1.0, launches, repeats, cal_cells, scale * DEMO_LAUNCH_CV,
                                        repeat_cv=scale * REPEAT_CV)})
    entry = variance_history.estimate(aa, "base", hardware={}, engine="", model="", source_run=f"cal{i}")
    cal = variance_history.pooled([entry], "simulated") if entry is not None else None
    shift = 1 + blind.session_cv * rng.standard_normal(2)  # the baseline's session, then this run's
    run = {"base": _variant(rng, float(shift[0]), 1, 1, cells, DEMO_LAUNCH_CV)}
    run |= {name: _variant(rng, s * float(shift[1]), 1, 1, cells, blind.drafter_scale * DEMO_LAUNCH_CV)
            for name, s in zip(("ngram", "draft"), speedups)}
    lv = history_checks.check_run(_cells_frame(run), list(run), cal).variance("sim")
    return _table(run, DEMO_POINTS_LIST, DEMO_LEVELS, lv)


def demo_decides(trials: int, seed: int, probe: bool = False) -> float:
    """The share of simulated demos (one calibration, then one launch x 1 repeat) whose n-gram word at C=1 is
    decided (n-gram at DEMO_SPEEDUP everywhere, the other drafter at 1.0); `probe`: the calibration is
    `calibrate --probe` (README's documented path), else a full-sweep `calibrate` of 3 launches."""
    rng = np.random.default_rng(seed)
    decided = 0
    for i in range(trials):
        tab = _demo_table(rng, i, (DEMO_SPEEDUP, 1.0), probe=probe)
        decided += family_outcome(*tab.claims[("ngram", 1)], tab.level, M) is not Outcome.UNDECIDED
    return decided / trials


def demo_margin(trials: int, seed: int, blind: Blind = Blind(), probe: bool = False) -> tuple[float, float]:
    """P(some word of the demo's table says adopt) with both drafters at the margin: at the family's level and
    under Bonferroni (each claim at 2.5% / 6); `probe` as `demo_decides`, `blind` as `_demo_table`."""
    rng = np.random.default_rng(seed)
    fam = bonf = 0
    for i in range(trials):
        tab = _demo_table(rng, i, (M, M), blind, probe)
        fam += any(family_outcome(*iv, tab.level, M) is Outcome.ADOPT for iv in tab.claims.values())
        bonf += any(primary_outcome(*iv, DEMO_CLAIMS, M) is Outcome.ADOPT for iv in tab.claims.values())
    return fam / trials, bonf / trials


BLIND_SPOTS = {"the history's SDs halved": Blind(history_scale=0.5),
               "the drafters' launch CV twice the baseline's": Blind(drafter_scale=2.0),
               f"the baseline from another session (session CV {100 * DEMO_LAUNCH_CV:g}%, the launch CV)":
                   Blind(session_cv=DEMO_LAUNCH_CV)}


def blind_spots(trials: int, seed: int) -> dict[str, float]:
    """README's path (`calibrate --probe`, then the demo) at the margin when each condition the report states as
    untested (report/assumptions.py) fails: P(some word adopts) at the family's level, per scenario."""
    return {name: demo_margin(trials, seed + k, blind, probe=True)[0] for k, (name, blind) in
            enumerate(BLIND_SPOTS.items())}


def break_even_words(trials: int, seed: int) -> dict[str, tuple[float, float]]:
    """P(some row of break_even.csv says "never pays") with both drafters of the demo's shape exactly at 1.0,
    at the family's levels and per point: with 3 launches per variant, and one launch after a calibration."""
    rng = np.random.default_rng(seed)
    out = {}
    cells = DEMO_POINTS * DEMO_CONCURRENCY
    for design in ("3 launches", "one launch and a calibration"):
        fam = per = 0
        for i in range(trials):
            if design == "3 launches":
                run = {name: _variant(rng, 1.0, 3, 1, cells, DEMO_LAUNCH_CV) for name in ("base", "ngram", "draft")}
                tab = _table(run, DEMO_POINTS_LIST, DEMO_LEVELS, None)
            else:
                tab = _demo_table(rng, i, (1.0, 1.0))
            f, p = tab.never_pays()
            fam += f
            per += p
        out[design] = (fam / trials, per / trials)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.verdict_family", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    f = family(a.trials, a.seed)
    mis = family(a.trials, a.seed + 2, shared=MISSPECIFIED_SHARE)
    share = demo_decides(a.trials, a.seed + 1)
    d_fam, d_bonf = demo_margin(a.trials, a.seed + 3)
    h_fam, h_bonf = demo_margin(a.trials, a.seed + 4, Blind(history_scale=0.5))
    probe_share = demo_decides(a.trials, a.seed + 6, probe=True)
    p_fam, p_bonf = demo_margin(a.trials, a.seed + 7, probe=True)
    n = len(CONCURRENCY)
    n_points = len(POINTS) * n
    se = math.sqrt(max(f.any_adopt * (1 - f.any_adopt), 1e-12) / a.trials)
    print(f"{DRAFTERS} drafters at the margin (true speedup {M:g}), {LAUNCHES} launches per variant, launch CV "
          f"{100 * LAUNCH_CV:g}%, repeat CV {100 * REPEAT_CV:g}%, mix of {len(POINTS)} points at {n} concurrencies, "
          f"{a.trials} trials (seed {a.seed})")
    print(f"P(any adopt): {100 * f.any_adopt:.1f}% (+-{100 * se:.1f}) at the family's level ({f.methods}), "
          f"{100 * f.any_adopt_bonferroni:.1f}% under Bonferroni (each claim at 2.5% / {DRAFTERS * n}), "
          f"{100 * f.any_adopt_per_claim:.1f}% with each claim at 2.5%")
    print(f"misspecified (a launch's effect only {100 * MISSPECIFIED_SHARE:g}% shared by its points): P(any adopt) "
          f"{100 * mis.any_adopt:.1f}% at the family's level ({mis.methods}), {100 * mis.any_adopt_bonferroni:.1f}% "
          "under Bonferroni")
    print(f"secondary family: P(any secondary adopt | all at the margin) {100 * f.secondary_drafter:.1f}% per "
          f"drafter at its family's level (over its {n_points} points, as the report decides), "
          f"{100 * f.secondary_drafter_holm:.1f}% by Holm, {100 * f.secondary_drafter_per_point:.1f}% with each point "
          f"at 2.5%; {100 * f.secondary_any:.1f}% over the {DRAFTERS} drafters (within each drafter's family)")
    for design, (fam, per) in break_even_words(a.trials, a.seed + 5).items():
        print(f"break-even words, both drafters of the demo's shape at 1.0 ({design}): some row says \"never pays\" "
              f"in {100 * fam:.1f}% of runs at the drafters' family levels, {100 * per:.1f}% per point")
    print(f"demo at the margin (2 drafters x {DEMO_CONCURRENCY} concurrencies, one launch, calibrated): P(any adopt) "
          f"{100 * d_fam:.1f}% at the family's level, {100 * d_bonf:.1f}% under Bonferroni; with the history's SDs "
          f"halved {100 * h_fam:.1f}% and {100 * h_bonf:.1f}%")
    print(f"demo after one calibration (launch CV {100 * DEMO_LAUNCH_CV:g}%, df {CAL_LAUNCHES - 1}), n-gram at C=1, "
          f"true speedup {DEMO_SPEEDUP:g}: a decided word in {100 * share:.1f}% of {a.trials} simulated demos")
    print(f"demo after `calibrate --probe` ({PROBE_LAUNCHES} launches x {PROBE_REPEATS} repeats at one point, df "
          f"{PROBE_LAUNCHES - 1}): P(any adopt) at the margin {100 * p_fam:.1f}% at the family's level, "
          f"{100 * p_bonf:.1f}% under Bonferroni; n-gram at {DEMO_SPEEDUP:g} decided at C=1 in "
          f"{100 * probe_share:.1f}%")
    for name, err in blind_spots(a.trials, a.seed + 8).items():
        print(f"demo after `calibrate --probe` at the margin, {name} (untested, stated in the report): P(any adopt) "
              f"{100 * err:.1f}% at the family's level")
    print(f"verdict family: P(any adopt | all at the margin) {100 * f.any_adopt:.1f}% over {DRAFTERS} drafters x "
          f"{n} claims, coverage of the mix interval {f.coverage:.3f}, demo decides after calibrate: "
          f"{'yes' if share >= 0.5 else 'no'}, after calibrate --probe: {'yes' if probe_share >= 0.5 else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.decide.decision import Outcome
from specbench.decide.intervals import LaunchVariance, variance_levels
from specbench.decide.primary import mix_interval, primary_outcome
from specbench.decide.secondary import secondary_outcomes
from specbench.metrics.speedup import speedup_columns
from specbench.stores import history_checks, variance_history

M = 1.05  # the default verdict.min_speedup
DRAFTERS, LAUNCHES, LAUNCH_CV, REPEAT_CV = 7, 3, 0.05, 0.01
POINTS = [(cat, out) for cat in ("code", "chat", "rewrite") for out in (64, 256)]
CONCURRENCY = (1, 4, 16, 64)
DEMO_LAUNCH_CV, DEMO_SPEEDUP, DEMO_CLAIMS = 0.042, 1.30, 2 * 3  # 2 drafters x 3 concurrencies
DEMO_POINTS, DEMO_CONCURRENCY, CAL_LAUNCHES, CAL_REPEATS = 4, 3, 3, 2

Windows = dict[tuple[int, int], float]


def _variant(rng: np.random.Generator, speedup: float, launches: int, repeats: int, cells: int,
             launch_cv: float) -> list[Windows]:
    """One variant's windows at `cells` cells: launch effects shared by every cell of a launch."""
    effect = 1 + launch_cv * rng.standard_normal(launches)
    out = []
    for _ in range(cells):
        rep = 1 + REPEAT_CV * rng.standard_normal((launches, repeats))
        out.append({(la + 1, r + 1): float(100.0 * speedup * effect[la] * rep[la, r])
                    for la in range(launches) for r in range(repeats)})
    return out


@dataclass
class Family:
    any_adopt: float  # P(some claim of the family says adopt), the family's correction applied
    any_adopt_per_claim: float  # the same with each claim at 2.5%
    coverage: float  # of the 95% mix intervals
    secondary_drafter: float  # P(some point of one drafter's secondary family says adopt), Holm
    secondary_drafter_per_point: float  # the same with each point at 2.5%
    secondary_any: float  # P(some point of any drafter says adopt), Holm within each drafter


Interval = tuple[float, float, float]


def _point_intervals(v: list[Windows], b: list[Windows], cal: LaunchVariance | None) -> list[dict[str, float]]:
    return [speedup_columns(vw, bw, cal) for vw, bw in zip(v, b)]


def _claim(v: list[Windows], b: list[Windows], cal: LaunchVariance | None,
           cols: list[dict[str, float]] | None = None) -> Interval:
    cols = cols if cols is not None else _point_intervals(v, b, cal)
    mix = mix_interval([(c["speedup"], vw, bw) for c, vw, bw in zip(cols, v, b)], cal)
    return mix.low, mix.high, mix.df


def _interval(c: dict[str, float]) -> Interval:
    nan = math.nan
    return c.get("speedup_ci_low", nan), c.get("speedup_ci_high", nan), c.get("speedup_ci_df", nan)


def family(trials: int, seed: int) -> Family:
    rng = np.random.default_rng(seed)
    n_cells, claims = len(POINTS) * len(CONCURRENCY), DRAFTERS * len(CONCURRENCY)
    adopt = adopt_per_claim = covered = drawn = 0
    sec_drafter = sec_per_point = sec_any = 0
    for _ in range(trials):
        base = _variant(rng, 1.0, LAUNCHES, 1, n_cells, LAUNCH_CV)
        any_f = any_c = any_s = False
        for _ in range(DRAFTERS):
            v = _variant(rng, M, LAUNCHES, 1, n_cells, LAUNCH_CV)
            cols = _point_intervals(v, base, None)
            intervals = [_interval(c) for c in cols]
            holm = any(o is Outcome.ADOPT for o in secondary_outcomes(intervals, M))
            sec_drafter += holm
            sec_per_point += any(o is Outcome.ADOPT for iv in intervals for o in secondary_outcomes([iv], M))
            any_s |= holm
            for c in range(len(CONCURRENCY)):
                at = slice(c * len(POINTS), (c + 1) * len(POINTS))
                lo, hi, df = _claim(v[at], base[at], None, cols[at])
                if math.isfinite(lo):
                    drawn += 1
                    covered += lo <= M <= hi
                any_f |= primary_outcome(lo, hi, df, claims, M) is Outcome.ADOPT
                any_c |= primary_outcome(lo, hi, df, 1, M) is Outcome.ADOPT
        adopt += any_f
        adopt_per_claim += any_c
        sec_any += any_s
    return Family(adopt / trials, adopt_per_claim / trials, covered / drawn if drawn else math.nan,
                  sec_drafter / (trials * DRAFTERS), sec_per_point / (trials * DRAFTERS), sec_any / trials)


def _cells_frame(by_variant: dict[str, list[Windows]]) -> pd.DataFrame:
    """Cells as the history's estimate and checks read them (variance_levels per cell)."""
    return pd.DataFrame([{"variant": name, "point_id": f"p{i}", "valid": True, "launches": len({la for la, _ in w}),
                          "repeats": len(w), "output_throughput_tok_s": float(np.mean(list(w.values()))),
                          **variance_levels(w, [])} for name, ws in by_variant.items() for i, w in enumerate(ws)])


def demo_decides(trials: int, seed: int) -> float:
    """The share of simulated demos (one calibration, then one launch x 1 repeat) whose n-gram word at C=1 is
    decided."""
    rng = np.random.default_rng(seed)
    cells = DEMO_POINTS * DEMO_CONCURRENCY
    decided = 0
    for i in range(trials):
        aa = _cells_frame({"base": _variant(rng, 1.0, CAL_LAUNCHES, CAL_REPEATS, cells, DEMO_LAUNCH_CV)})
        entry = variance_history.estimate(aa, "base", hardware={}, engine="", model="", source_run=f"cal{i}")
        cal = variance_history.pooled([entry], "simulated") if entry is not None else None
        b = _variant(rng, 1.0, 1, 1, DEMO_POINTS, DEMO_LAUNCH_CV)
        v = _variant(rng, DEMO_SPEEDUP, 1, 1, DEMO_POINTS, DEMO_LAUNCH_CV)
        lv = history_checks.check_run(_cells_frame({"base": b, "ngram": v}), ["base", "ngram"], cal).variance("sim")
        lo, hi, df = _claim(v, b, lv)
        decided += primary_outcome(lo, hi, df, DEMO_CLAIMS, M) is not Outcome.UNDECIDED
    return decided / trials


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.verdict_family", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    f = family(a.trials, a.seed)
    share = demo_decides(a.trials, a.seed + 1)
    n = len(CONCURRENCY)
    n_points = len(POINTS) * n
    se = math.sqrt(max(f.any_adopt * (1 - f.any_adopt), 1e-12) / a.trials)
    print(f"{DRAFTERS} drafters at the margin (true speedup {M:g}), {LAUNCHES} launches per variant, launch CV "
          f"{100 * LAUNCH_CV:g}%, repeat CV {100 * REPEAT_CV:g}%, mix of {len(POINTS)} points at {n} concurrencies, "
          f"{a.trials} trials (seed {a.seed})")
    print(f"P(any adopt): {100 * f.any_adopt:.1f}% (+-{100 * se:.1f}) with the family's correction "
          f"(each claim at 2.5% / {DRAFTERS * n}), {100 * f.any_adopt_per_claim:.1f}% with each claim at 2.5%")
    print(f"secondary family: P(any secondary adopt | all at the margin) {100 * f.secondary_drafter:.1f}% per "
          f"drafter (Holm over its {n_points} points), {100 * f.secondary_drafter_per_point:.1f}% per drafter with "
          f"each point at 2.5%; {100 * f.secondary_any:.1f}% over the {DRAFTERS} drafters (Holm within each)")
    print(f"demo after one calibration (launch CV {100 * DEMO_LAUNCH_CV:g}%, df {CAL_LAUNCHES - 1}), n-gram at C=1, "
          f"true speedup {DEMO_SPEEDUP:g}: a decided word in {100 * share:.1f}% of {a.trials} simulated demos")
    print(f"verdict family: P(any adopt | all at the margin) {100 * f.any_adopt:.1f}% over {DRAFTERS} drafters x "
          f"{n} claims, coverage of the mix interval {f.coverage:.3f}, demo decides after calibrate: "
          f"{'yes' if share >= 0.5 else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

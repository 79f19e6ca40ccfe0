"""A variance history from another setup, simulated through specbench's own functions.

    python -m benchmarks.history_check [--trials 4000] [--seed 0]

A calibration (3 launches x 3 repeats of the baseline, the A/A `specbench calibrate` runs) measures a
setup whose between-launch CV is `HISTORY_CV`; a run with 1 launch x 3 repeats per variant then measures a
setup whose true launch CV is `TRUE_CV` (misspecified: 5%; matched: the same 1.5%), at a true speedup of
exactly m = verdict.min_speedup (the boundary: every "adopt" is an error). Repeat CV 1% in both. Each trial:

- the history entry: `metrics.variance_levels` on the calibration's windows (Kalibera-Jones), its baseline
  speed per point (the speed test's reference);
- the run's cells (one point) checked against it by `history_checks.check_run` (the speed test of the
  baseline, the F tests of every variant's repeat component); the history's components then enter the
  interval as estimated, on their df (t at the Welch-Satterthwaite df of the pooled variance);
- the speedup interval by `stats.ratio_ci` with `intervals.launch_components`, as `metrics.cells` builds it,
  and the outcome by `decision.classify`.

"before" is the history's point estimate on its df without any check of a one-launch run, through the same
functions: "now" differs from it only by the checks. (The rule between them added the history's 95%
chi-square upper bound for a one-launch run: 5.1% and 2.0% at the boundary, 70.7% power; docs/metrics.md.)
A refused history leaves the run without launch variance: indicative, never
"adopt". Prints P(adopt | true = m) for each, and P(adopt | true = 1.3) in the matched case (power).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.decide import stats
from specbench.decide.decision import ALPHA, Outcome, classify
from specbench.decide.intervals import launch_components, variance_levels
from specbench.metrics.common import interval_or_nan
from specbench.stores import history_checks, variance_history

HISTORY_CV = 0.015
TRUE_CV = 0.05
REPEAT_CV = 0.01
CAL_LAUNCHES, REPEATS = 3, 3
M = 1.05  # the default verdict.min_speedup
POINT = "code|in-|out64|c1|t0"
SPEED = 100.0  # the baseline's tok/s


def _windows(rng: np.random.Generator, launches: int, repeats: int, cv: float, mean: float) -> np.ndarray:
    """launches x repeats window throughputs: a launch effect times a repeat effect (both normal)."""
    launch = mean * (1 + cv * rng.standard_normal(launches))
    return launch[:, None] * (1 + REPEAT_CV * rng.standard_normal((launches, repeats)))


def history_entry(rng: np.random.Generator) -> variance_history.Calibration:
    aa = _windows(rng, CAL_LAUNCHES, REPEATS, HISTORY_CV, SPEED)
    lv = variance_levels({(la + 1, r + 1): float(aa[la, r]) for la in range(CAL_LAUNCHES) for r in range(REPEATS)}, [])
    return variance_history.Calibration(
        rel_var=lv["launch_cv"] ** 2, df=CAL_LAUNCHES - 1.0, launches=CAL_LAUNCHES, cells=1, hardware={}, engine="",
        model="", created="", source_run="calibration", repeat_rel_var=lv["repeat_cv"] ** 2,
        repeat_df=float(CAL_LAUNCHES * (REPEATS - 1)), speeds={POINT: float(aa.mean())}, repeats=REPEATS)


def _cell(variant: str, w: np.ndarray) -> dict[str, object]:
    lv = variance_levels({(1, r + 1): float(x) for r, x in enumerate(w)}, [])
    return {"variant": variant, "valid": True, "launches": 1, "repeats": len(w), "launch_cv": math.nan,
            "repeat_cv": lv["repeat_cv"], "point_id": POINT, "output_throughput_tok_s": float(w.mean())}


@dataclass
class Rates:
    adopt_before: float
    adopt_now: float
    refused: float


def simulate(trials: int, seed: int, true_cv: float, speedup: float = M) -> Rates:
    rng = np.random.default_rng(seed)
    before = now = refused = 0
    for _ in range(trials):
        entry = history_entry(rng)
        cal = variance_history.pooled([entry], "simulated")
        assert cal is not None
        b = _windows(rng, 1, REPEATS, true_cv, SPEED)[0]
        v = _windows(rng, 1, REPEATS, true_cv, SPEED * speedup)[0]
        cells = pd.DataFrame([_cell("base", b), _cell("drafter", v)])
        use = history_checks.check_run(cells, ["base", "drafter"], cal)
        for lv, counter in ((cal.variance("before"), "before"), (use.variance("now"), "now")):
            if lv is None:
                refused += 1
                continue
            ci = stats.ratio_ci(v, b, confidence=1 - 2 * ALPHA, extra_log=launch_components(lv, n_variants=2))
            low, high = interval_or_nan(ci.bounds)  # as metrics.cells reads it
            if classify(low, high, M) == Outcome.ADOPT:
                before += counter == "before"
                now += counter == "now"
    return Rates(before / trials, now / trials, refused / trials)


def _mc(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / n)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.history_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=4000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    mis = simulate(a.trials, a.seed, TRUE_CV)
    same = simulate(a.trials, a.seed + 1, HISTORY_CV)
    power = simulate(a.trials, a.seed + 2, HISTORY_CV, speedup=1.3)
    n = a.trials
    print(f"history launch CV {100 * HISTORY_CV:g}% (calibration {CAL_LAUNCHES} x {REPEATS}), run 1 x {REPEATS}, "
          f"repeat CV {100 * REPEAT_CV:g}%, m = {M:g}, {n} trials per row (seed {a.seed})")
    print("| run's true launch CV | P(adopt given true = m) before | now | history refused |")
    print("| --- | ---: | ---: | ---: |")
    for cv, r in ((TRUE_CV, mis), (HISTORY_CV, same)):
        print(f"| {100 * cv:g}% | {100 * r.adopt_before:.1f}% (+-{100 * _mc(r.adopt_before, n):.1f}) | "
              f"{100 * r.adopt_now:.1f}% (+-{100 * _mc(r.adopt_now, n):.1f}) | {100 * r.refused:.1f}% |")
    print(f"power, matched history, true speedup 1.3: P(adopt) {100 * power.adopt_before:.1f}% before, "
          f"{100 * power.adopt_now:.1f}% now")
    print(f"history check: P(adopt | true = m) {100 * mis.adopt_now:.1f}% with a history from another setup "
          f"(before: {100 * mis.adopt_before:.1f}%), {100 * same.adopt_now:.1f}% with a matched one; nominal 2.5%")
    return 0


if __name__ == "__main__":
    sys.exit(main())

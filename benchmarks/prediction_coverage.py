"""The coverage of the model's prediction interval, by simulation through specbench's own functions.

    python -m benchmarks.prediction_coverage [--trials 500] [--seed 0] [--at 4,16]
                                             [--al-a 1.22] [--al-b 1.15] [--acceptance-sd 0.08]
                                             [--baseline-cv 0.025] [--drafter-cv 0.09] [--launches 3]

A known truth, shaped like the measured run in docs/examples/prediction-heads-cpu: one category, output
length O = 64, windows of 16 requests (the same 16 prompts in every launch and at every concurrency, as a
temperature-0 run sends them) at C = 1, 4 and 16. A request takes prefill + (O - 1) / a steps: the baseline's
step and its prefill share at each C as measured (LEVELS), the drafter's step r(C) times the baseline's and its
prefill PREFILL_RATIO times the baseline's. Two heads of one drafter configuration (same r and prefill) differ
only in acceptance: each prompt's decode acceptance a = (O - 1) / (target steps - 1) is 1 + (AL - 1) x a
lognormal factor of mean 1 that the prompt shares between the heads (an easy prompt is easy for both);
--acceptance-sd is head A's SD over requests, head B's is scaled by (AL_B - 1) / (AL_A - 1). The acceptance
does not move with C. A window's throughput is 16 x O over its makespan on C slots (metrics.makespan); each
launch of each variant (baseline, A, B; independent engines) multiplies every time of that launch by a
lognormal effect of mean 1 and the variant's between-launch CV. The true speedup at C is E[throughput of B's
window] / the baseline's, over windows of prompts drawn afresh from the population (TRUTH_WINDOWS of them).

Per trial, as a run computes them: each cell's speedup and 95% interval (metrics.speedup.speedup_columns,
units: launches), acceptance length and its interval (metrics.acceptance.cell_acceptance), the decomposition
(metrics.decomposition.decomposition_table over the simulated requests: r, AL, the baseline's prefill share);
then head B predicted from its C=1 acceptance and head A's step cost, head A's own window tail taken out
(surface.reference.reference_from_run with the simulated acceptance.csv rows, prompt ids included,
surface.model_predict.predict_from_model: what `python -m benchmarks.prediction RUN RUN --as B=A` does, without
the prediction ledger's past errors). Counted at each C of --at: (1) the predicted 95% interval holds the TRUE
speedup, (2) it holds the MEASURED speedup of B (the product's `covered`: what benchmarks.prediction's
`interval coverage` counts), (3) median |predicted / truth - 1|, and its signed median. A last check runs one
trial with no noise and every request at the mean acceptance, where the model is exact: the reference's model
is solved in the window simulation's own units (metrics.makespan.untailed, over the per-request acceptance
(O - 1) / (steps - 1)), so the chain reproduces the truth to the root-finder's tolerance. Last line (pooled
over the concurrencies of --at):

    prediction coverage: true <x>%, measured <y>% over <N> trials (nominal 95%)
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from specbench.metrics.acceptance import cell_acceptance
from specbench.metrics.decomposition import decomposition_table
from specbench.metrics.makespan import makespan
from specbench.metrics.requests import to_measured_requests
from specbench.metrics.speedup import speedup_columns
from specbench.surface.model_predict import predict_from_model
from specbench.surface.reference import reference_from_run

OUT, WINDOW, CATEGORY = 64, 16, "chat"
# C -> (baseline step s, step-cost ratio r, baseline prefill share): docs/examples/prediction-heads-cpu's
# decomposition.csv (rounded; baseline_step_time_s, step_cost_ratio, baseline_prefill_share)
LEVELS = {1: (0.042, 1.40, 0.035), 4: (0.045, 1.50, 0.075), 16: (0.057, 2.20, 0.21)}
PREFILL_RATIO = 1.3  # the drafter's prefill over the baseline's (the run's TTFT: 1.4 at C=1, 1.3 at C=16)
TRUTH_WINDOWS = 20_000
BASE, HEAD_A, HEAD_B = "autoregressive", "head_a", "head_b"

Windows = dict[tuple[int, int], float]


@dataclass(frozen=True)
class Setup:
    """What a trial simulates (the command's arguments)."""

    al_a: float = 1.22
    al_b: float = 1.15
    acceptance_sd: float = 0.08
    baseline_cv: float = 0.025
    drafter_cv: float = 0.09
    launches: int = 3
    output_len: int = OUT
    at: tuple[int, ...] = (4, 16)
    levels: dict[int, tuple[float, float, float]] = field(default_factory=lambda: dict(LEVELS))  # C -> s, r, share
    window: int = WINDOW  # requests per window (the same prompts at every C)

    def log_sd(self) -> float:
        """The SD of the prompts' log acceptance factor (head A's SD over requests, in log terms)."""
        return math.sqrt(math.log1p((self.acceptance_sd / (self.al_a - 1)) ** 2)) if self.acceptance_sd > 0 else 0.0

    def acceptance(self, al: float, z: np.ndarray) -> np.ndarray:
        """Per-request decode acceptance of a head of mean `al`, for prompts of standard normal scores z."""
        s = self.log_sd()
        return 1 + (al - 1) * np.exp(s * z - s * s / 2)

    def times(self, c: int, acceptance: np.ndarray | None) -> tuple[float, np.ndarray]:
        """(prefill s, request e2e s) at concurrency c; acceptance None: the baseline (one token a step)."""
        step, r, share = self.levels[c]
        prefill = share / (1 - share) * (self.output_len - 1) * step
        if acceptance is None:
            return prefill, np.full(self.window, prefill + (self.output_len - 1) * step)
        return PREFILL_RATIO * prefill, PREFILL_RATIO * prefill + (self.output_len - 1) / acceptance * r * step


def true_speedup(setup: Setup, al: float, c: int, seed: int, windows: int = TRUTH_WINDOWS) -> float:
    """E[window throughput of the head] / the baseline's, windows of prompts drawn from the population."""
    rng = np.random.default_rng(seed)
    base = makespan(setup.times(c, None)[1].tolist(), c)
    return float(np.mean([base / makespan(setup.times(c, setup.acceptance(al, rng.standard_normal(setup.window)))[1]
                                          .tolist(), c) for _ in range(windows)]))


def launch_effects(rng: np.random.Generator, n: int, cv: float) -> np.ndarray:
    s = math.sqrt(math.log1p(cv * cv))
    return rng.lognormal(-s * s / 2, s, n)


def _point(c: int, o: int) -> str:
    return f"{CATEGORY}|in-|out{o}|c{c}|t0"


def measure(setup: Setup, acc: dict[str, np.ndarray | None], effect: dict[str, np.ndarray],
            levels: tuple[int, ...] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The variants of `acc` (name -> per-prompt acceptance, None: the baseline BASE) measured at `levels`
    (default all of setup.levels), one launch per launch effect of `effect`: (cells, acceptance rows, requests,
    windows) as a run computes them. A head without BASE among `acc` has no speedup (NaN columns)."""
    o = setup.output_len
    requests, windows, cells, acc_rows = [], [], [], []
    tp: dict[tuple[str, int], Windows] = {}
    for c in levels or tuple(setup.levels):
        point = _point(c, o)
        for v, a in acc.items():
            prefill, e2e = setup.times(c, a)
            steps = np.full(setup.window, float(o)) if a is None else 1 + (o - 1) / a
            cid, rows, launches = f"{v}|{point}", [], len(effect[v])
            for la in range(1, launches + 1):
                wid, e = f"{cid}|l{la}", float(effect[v][la - 1])
                tp.setdefault((v, c), {})[(la, 1)] = setup.window * o / makespan((e * e2e).tolist(), c)
                windows.append({"window_id": wid, "cell_id": cid, "variant": v, "launch": la, "repeat": 1})
                for i in range(setup.window):
                    rows.append({"cell_id": cid, "window_id": wid, "variant": v, "launch": la, "repeat": 1,
                                 "index": i, "prompt_id": f"p{i}", "error": None, "output_tokens": float(o),
                                 "e2e_s": e * float(e2e[i]), "ttft_s": e * prefill,
                                 "spec": None if a is None else {"verify_steps": float(steps[i])}})
                    if a is not None:
                        acc_rows.append({"variant": v, "point_id": point, "window_id": wid, "prompt_id": f"p{i}",
                                         "output_tokens": float(o), "verify_steps": float(steps[i])})
            requests += rows
            cell = {"variant": v, "category": CATEGORY, "input_len": math.nan, "output_len": o, "concurrency": c,
                    "temperature": 0.0, "rate": math.nan, "point_id": point, "valid": True,
                    "output_throughput_tok_s": float(np.mean(list(tp[(v, c)].values())))}
            cell.update(cell_acceptance(to_measured_requests(pd.DataFrame(rows)), pd.DataFrame(), a is None, launches))
            cell.update({"speedup": 1.0} if a is None else speedup_columns(tp[(v, c)], tp[(BASE, c)], None)
                        if BASE in acc else dict.fromkeys(("speedup", "speedup_ci_low", "speedup_ci_high"), math.nan))
            cells.append(cell)
    return pd.DataFrame(cells), pd.DataFrame(acc_rows), pd.DataFrame(requests), pd.DataFrame(windows)


def simulate_run(setup: Setup, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One simulated run of the baseline and both heads: (cells, acceptance rows, decomposition) built by the
    product's functions from the simulated requests."""
    z = rng.standard_normal(setup.window)
    acc = {BASE: None, HEAD_A: setup.acceptance(setup.al_a, z), HEAD_B: setup.acceptance(setup.al_b, z)}
    cv = {BASE: setup.baseline_cv, HEAD_A: setup.drafter_cv, HEAD_B: setup.drafter_cv}
    effect = {v: launch_effects(rng, setup.launches, cv[v]) for v in acc}
    cells, acceptance, req_df, win_df = measure(setup, acc, effect)
    return cells, acceptance, decomposition_table(req_df, win_df, cells, BASE)


def predict(setup: Setup, rng: np.random.Generator, seed: int) -> pd.DataFrame:
    """Head B predicted from its C=1 acceptance and head A's step cost, over one simulated run: the rows of
    predict_from_model at the concurrencies of --at."""
    cells, acceptance, decomp = simulate_run(setup, rng)
    ref = reference_from_run(decomp, cells, acceptance)
    pred = predict_from_model(cells, acceptance, decomp, ref, {HEAD_B: HEAD_A}, seed=seed)
    return pred[pred["concurrency"].isin(setup.at)]


@dataclass
class Tally:
    """Per concurrency: truth, and per trial the predicted interval and the measured speedup."""

    truth: float
    predicted: list[tuple[float, float, float]]
    measured: list[float]
    covered_measured: list[bool]

    def coverage_true(self) -> float:
        return float(np.mean([lo <= self.truth <= hi for _, lo, hi in self.predicted]))

    def coverage_measured(self) -> float:
        return float(np.mean(self.covered_measured))

    def median_error(self) -> float:
        return float(np.median([abs(p / self.truth - 1) for p, _, _ in self.predicted]))

    def median_bias(self) -> float:
        """Median predicted / truth - 1 (signed: below 0, the prediction is low)."""
        return float(np.median([p / self.truth - 1 for p, _, _ in self.predicted]))

    def median_width(self) -> float:
        """Median half-width of the interval as a factor (x/÷): sqrt(high / low)."""
        return float(np.median([math.sqrt(hi / lo) for _, lo, hi in self.predicted]))


def run(setup: Setup, trials: int, seed: int) -> dict[int, Tally]:
    tallies = {c: Tally(true_speedup(setup, setup.al_b, c, seed + 10_000 + c), [], [], []) for c in setup.at}
    rng = np.random.default_rng(seed)
    for i in range(trials):
        for _, r in predict(setup, rng, seed + i).iterrows():
            t = tallies[int(r["concurrency"])]
            t.predicted.append((float(r["predicted"]), float(r["predicted_low"]), float(r["predicted_high"])))
            t.measured.append(float(r["measured"]))
            t.covered_measured.append(bool(r["covered"]))
    return tallies


def exact_error(setup: Setup) -> float:
    """The largest |predicted / truth - 1| over --at with no launch noise and no spread of acceptance: the
    chain (cells, decomposition, reference, prediction) against the truth where the model is exact."""
    quiet = replace(setup, acceptance_sd=0.0, baseline_cv=0.0, drafter_cv=0.0)
    pred = predict(quiet, np.random.default_rng(0), 0)
    return max(abs(float(r["predicted"]) / true_speedup(quiet, quiet.al_b, int(r["concurrency"]), 0) - 1)
               for _, r in pred.iterrows())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.prediction_coverage", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--at", default="4,16", help="concurrencies predicted, comma-separated (of 4, 16)")
    p.add_argument("--al-a", type=float, default=Setup.al_a, help="head A's (the reference's) mean acceptance")
    p.add_argument("--al-b", type=float, default=Setup.al_b, help="head B's (the predicted head's) mean acceptance")
    p.add_argument("--acceptance-sd", type=float, default=Setup.acceptance_sd, help="head A's SD over requests")
    p.add_argument("--baseline-cv", type=float, default=Setup.baseline_cv, help="the baseline's between-launch CV")
    p.add_argument("--drafter-cv", type=float, default=Setup.drafter_cv, help="each head's between-launch CV")
    p.add_argument("--launches", type=int, default=Setup.launches, help="launches per variant")
    p.add_argument("--output-len", type=int, default=OUT)
    a = p.parse_args(argv)
    at = tuple(int(x) for x in a.at.split(","))
    if not set(at) <= set(LEVELS) - {1} or a.launches < 2 or min(a.al_a, a.al_b) <= 1 or a.trials < 1:
        p.error(f"--at must be among {sorted(set(LEVELS) - {1})}, --launches >= 2, --al-a/--al-b > 1, --trials >= 1")
    setup = Setup(a.al_a, a.al_b, a.acceptance_sd, a.baseline_cv, a.drafter_cv, a.launches, a.output_len, at)
    tallies = run(setup, a.trials, a.seed)
    print(f"head B (AL {setup.al_b:g}) predicted from head A's step cost (AL {setup.al_a:g}), acceptance SD "
          f"{setup.acceptance_sd:g} over {WINDOW} prompts, {setup.launches} launches per variant, launch CV "
          f"baseline {100 * setup.baseline_cv:g}%, drafters {100 * setup.drafter_cv:g}%, O = {setup.output_len}, "
          f"{a.trials} trials (seed {a.seed})")
    print("| C | true speedup | covers truth | covers measured | median abs error vs truth | median error (signed) "
          "| median interval (x/÷) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c, t in tallies.items():
        print(f"| {c} | {t.truth:.3f} | {100 * t.coverage_true():.1f}% | {100 * t.coverage_measured():.1f}% | "
              f"{100 * t.median_error():.1f}% | {100 * t.median_bias():+.1f}% | {t.median_width():.3f} |")
    n = sum(len(t.predicted) for t in tallies.values())
    se = math.sqrt(0.95 * 0.05 / n) if n else math.nan
    print(f"Monte Carlo SE of a pooled coverage near 95%: {100 * se:.1f} points; no noise, mean acceptance: "
          f"largest error vs truth {100 * exact_error(setup):.4f}%")
    true_cov = np.mean([x for t in tallies.values() for x in
                        (lo <= t.truth <= hi for _, lo, hi in t.predicted)]) if n else math.nan
    meas_cov = np.mean([x for t in tallies.values() for x in t.covered_measured]) if n else math.nan
    print(f"prediction coverage: true {100 * true_cov:.1f}%, measured {100 * meas_cov:.1f}% over {a.trials} trials "
          f"(nominal 95%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

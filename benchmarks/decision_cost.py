"""What a decisive verdict costs: the fixed design (3 launches x 3 repeats) against sequential measurement
(`sweep.until: decided`) on a simulated K2.6-like matrix.

    python -m benchmarks.decision_cost [--matrices 300] [--history-df 8] [--seed 0] [--write docs/metrics.md]

The matrix (docs/cluster.md's K2.6 figures): a baseline and two drafters; 5 categories x 6
concurrency levels = 30 points per drafter, each costing 128 s per repeat (the three output lengths at
~26 tok/s); a launch costs a 10-minute load. True speedups fall with concurrency from 1.6 to 0.7, with
points at exactly 1.0 and at 1.05 (A: 1.6 1.3 1.05 1.0 0.85 0.7, B: 1.4 1.2 1.1 1.0 0.9 0.75). Each
matrix draws a launch CV in [2%, 5%] and a repeat CV in [1%, 3%]; a launch effect is shared by every
point of that launch, repeats add their own. A/A matrices (every true speedup 1.0) measure false adopts.

Fixed: every variant launched 3 times with 3 repeats; each point's 95% Welch interval over its launch
means (stats.ratio_ci, as specbench without a history).
Sequential: 2 launches x 1 repeat (Kalibera & Jones' r* = 1 here: a launch varies more than a repeat
and its load costs less than a sweep), then, while points are undecided and fewer than 8 launches ran,
one more launch of the baseline (the undecided points of any drafter) and of each drafter concerned (its
undecided points only). Every look draws each interval at one-sided alpha 0.025 / K, K = 7 looks
(decision.look_alpha), with the launch-mean variance pooled with the hardware's variance history
(stats.pooled_ratio_ci; the history is simulated with --history-df df on the true variances, as
calibrations or earlier runs of this node type would have left it; its cost is not counted). The
reported interval of a point is the last look's. Outcomes by decision.classify with m = 1.05.

Reported: GPU-hours (startups + measuring) relative to the fixed design, points decided, false adopts
on A/A matrices, coverage of the reported intervals (true speedup inside). The last line reads
`decision cost: <P>% of the fixed design's GPU-hours, <D>% of points decided (fixed: <F>%), false adopt
<A>%, coverage <C>`; goal P <= 40 with D >= F, A <= 5, C >= 0.93 (exit code 1 otherwise).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specbench import stats
from specbench.metrics.decision import MeasuredInterval, Outcome, classify, look_alpha, units_to_decide

STARTUP_S = 600.0
POINT_S = 128.0  # one point (category x concurrency, its three output lengths), one repeat
CATEGORIES = 5
PROFILES = {"A": (1.6, 1.3, 1.05, 1.0, 0.85, 0.7), "B": (1.4, 1.2, 1.1, 1.0, 0.9, 0.75)}
M = 1.05
FIXED = (3, 3)  # launches x repeats
START, MAX_LAUNCHES, SEQ_REPEATS = 2, 8, 1
MARK_START = "<!-- decision-cost:start -->"
MARK_END = "<!-- decision-cost:end -->"


@dataclass
class Result:
    seconds: float = 0.0
    points: int = 0
    decided: int = 0
    adopts: int = 0
    slower: int = 0
    covered: int = 0


def truths(aa: bool) -> np.ndarray:
    """(drafters, points) true speedups: each profile repeated over the categories."""
    rows = [np.tile(np.ones(6) if aa else np.array(p), CATEGORIES) for p in PROFILES.values()]
    return np.array(rows)


class Launcher:
    """Launch means on the log scale: log truth + a launch effect shared by the launch's points + the
    mean of r repeat effects per point."""

    def __init__(self, rng: np.random.Generator, s_launch: float, s_repeat: float):
        self.rng, self.sl, self.sr = rng, s_launch, s_repeat

    def launch(self, log_truth: np.ndarray, repeats: int) -> np.ndarray:
        effect = self.rng.normal(0, self.sl)
        return log_truth + effect + self.rng.normal(0, self.sr, (repeats, log_truth.size)).mean(axis=0)


def fixed(rng: np.random.Generator, truth: np.ndarray, lau: Launcher, res: Result) -> None:
    n, r = FIXED
    base = np.array([lau.launch(np.zeros(truth.shape[1]), r) for _ in range(n)])
    res.seconds += (1 + len(truth)) * n * (STARTUP_S + r * truth.shape[1] * POINT_S)
    for row in truth:
        drafter = np.array([lau.launch(np.log(row), r) for _ in range(n)])
        for p in range(row.size):
            ci = stats.ratio_ci(np.exp(drafter[:, p]), np.exp(base[:, p]))
            _score(ci, row[p], res)


def sequential(rng: np.random.Generator, truth: np.ndarray, lau: Launcher, prior: tuple[float, float],
               res: Result, naive: bool = False) -> None:
    """`naive`: every look at the plain 95% interval (peeking without spending alpha), for comparison."""
    n_d, n_p = truth.shape
    k = MAX_LAUNCHES - START + 1
    alpha = 0.025 if naive else look_alpha(k)
    confidence = 1 - 2 * alpha
    base: list[list[float]] = [[] for _ in range(n_p)]
    draft: list[list[list[float]]] = [[[] for _ in range(n_p)] for _ in range(n_d)]
    open_pts = [set(range(n_p)) for _ in range(n_d)]
    last: dict[tuple[int, int], stats.TInterval] = {}
    for n in range(1, MAX_LAUNCHES + 1):
        union = sorted(set().union(*open_pts))
        if not union:
            break
        # the baseline, then each drafter with open points (A B order)
        vals = lau.launch(np.zeros(n_p), SEQ_REPEATS)
        res.seconds += STARTUP_S + SEQ_REPEATS * len(union) * POINT_S
        for p in union:
            base[p].append(float(vals[p]))
        for d in range(n_d):
            if not open_pts[d]:
                continue
            vals = lau.launch(np.log(truth[d]), SEQ_REPEATS)
            res.seconds += STARTUP_S + SEQ_REPEATS * len(open_pts[d]) * POINT_S
            for p in open_pts[d]:
                draft[d][p].append(float(vals[p]))
        if n < START:
            continue
        for d in range(n_d):  # the look: every point's interval on all its data so far
            for p in range(n_p):
                if p in open_pts[d] or base[p] and len(base[p]) > len(draft[d][p]):
                    ci = stats.pooled_ratio_ci(np.exp(draft[d][p]), np.exp(base[p]), prior, confidence)
                    last[(d, p)] = ci
                    decided = classify(_f(ci.low), _f(ci.high), M) is not Outcome.UNDECIDED
                    if decided or _futile(ci, len(draft[d][p]), alpha):
                        open_pts[d].discard(p)
                    elif p not in open_pts[d] and n < MAX_LAUNCHES:
                        open_pts[d].add(p)  # the baseline's new launches moved it back: measure it again
    for (d, p), ci in last.items():
        _score(ci, truth[d, p], res)


def _futile(ci: stats.TInterval, launches: int, alpha: float) -> bool:
    """Undecided, and not decidable within MAX_LAUNCHES if its estimate and variance held."""
    if ci.low is None or ci.high is None or ci.df is None:
        return False
    more = units_to_decide(MeasuredInterval(ci.low, ci.high, ci.df, launches), M, cap=MAX_LAUNCHES, alpha=alpha)
    return more.units is None


def _f(x: float | None) -> float:
    return math.nan if x is None else x


def _score(ci: stats.TInterval, true: float, res: Result) -> None:
    lo, hi = _f(ci.low), _f(ci.high)
    outcome = classify(lo, hi, M)
    res.points += 1
    res.decided += outcome is not Outcome.UNDECIDED
    res.adopts += outcome is Outcome.ADOPT
    res.slower += outcome is Outcome.SLOWER
    res.covered += lo <= true <= hi


def history_prior(rng: np.random.Generator, s_launch: float, s_repeat: float, df: float) -> tuple[float, float]:
    """The history's launch-mean variance (s_L^2 + s_R^2 / r) as df earlier launches would estimate it."""
    est_l = s_launch**2 * rng.chisquare(df) / df
    est_r = s_repeat**2 * rng.chisquare(4 * df) / (4 * df)
    return est_l + est_r / SEQ_REPEATS, df


def run(matrices: int, history_df: float, seed: int) -> dict[str, Result]:
    rng = np.random.default_rng(seed)
    out = {k: Result() for k in ("fixed", "sequential", "naive", "fixed A/A", "sequential A/A", "naive A/A")}
    for i in range(matrices):
        aa = i % 2 == 1
        s_l, s_r = rng.uniform(0.02, 0.05), rng.uniform(0.01, 0.03)
        lau = Launcher(rng, s_l, s_r)
        truth = truths(aa)
        tag = " A/A" if aa else ""
        fixed(rng, truth, lau, out["fixed" + tag])
        prior = history_prior(rng, s_l, s_r, history_df)
        state = rng.bit_generator.state  # the naive rule sees the very same launches
        sequential(rng, truth, lau, prior, out["sequential" + tag])
        rng.bit_generator.state = state
        sequential(rng, truth, lau, prior, out["naive" + tag], naive=True)
    return out


def table(out: dict[str, Result], history_df: float) -> str:
    fx = out["fixed"].seconds + out["fixed A/A"].seconds
    lines = ["| design | GPU-hours vs fixed | points decided | adopt on A/A | adopt or slower on A/A | coverage |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    names = {"fixed": "fixed, 3 launches x 3 repeats", "sequential": "sequential (until: decided), alpha spent",
             "naive": "sequential, 95% at every look (no spending)"}
    for name, label in names.items():
        r, a = out[name], out[name + " A/A"]
        cost = 100 * (r.seconds + a.seconds) / fx
        lines.append(f"| {label} | {cost:.0f}% | {100 * r.decided / r.points:.1f}% | "
                     f"{100 * a.adopts / a.points:.2f}% | "
                     f"{100 * (a.adopts + a.slower) / a.points:.2f}% | "
                     f"{(r.covered + a.covered) / (r.points + a.points):.3f} |")
    lines.append(f"\nHistory df {history_df:g}; launch CV 2-5%, repeat CV 1-3%; m = {M}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--matrices", type=int, default=300, help="simulated matrices (half of them A/A)")
    ap.add_argument("--history-df", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path, help="replace the table between the markers in this file")
    a = ap.parse_args(argv)
    out = run(a.matrices, a.history_df, a.seed)
    text = table(out, a.history_df)
    print(text)
    if a.write:
        doc = a.write.read_text()
        i, j = doc.index(MARK_START) + len(MARK_START), doc.index(MARK_END)
        a.write.write_text(doc[:i] + "\n" + text + "\n" + doc[j:])
    fx = out["fixed"].seconds + out["fixed A/A"].seconds
    sq = out["sequential"].seconds + out["sequential A/A"].seconds
    p = 100 * sq / fx
    d = 100 * out["sequential"].decided / out["sequential"].points
    f = 100 * out["fixed"].decided / out["fixed"].points
    aa = out["sequential A/A"]
    adopt = 100 * aa.adopts / aa.points
    both = out["sequential"], out["sequential A/A"]
    cov = sum(r.covered for r in both) / sum(r.points for r in both)
    print(f"decision cost: {p:.0f}% of the fixed design's GPU-hours, {d:.0f}% of points decided (fixed: {f:.0f}%), "
          f"false adopt {adopt:.1f}%, coverage {cov:.3f}")
    return 0 if p <= 40 and d >= f and adopt <= 5 and cov >= 0.93 else 1


if __name__ == "__main__":
    sys.exit(main())

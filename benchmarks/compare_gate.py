"""How often `specbench compare` exits 1 on two runs of an unchanged drafter, and how often it catches a
real regression, by simulation through the product's own code.

    python -m benchmarks.compare_gate [--pairs 300] [--seed 0] [--write docs/metrics.md]

Each simulated run is a matrix of 30 drafter points (2 categories x 3 output lengths x 5 concurrencies)
plus the baseline's. Every variant's launch has a launch effect, lognormal with the given CV and shared by
all points of that launch (as a relaunched engine moves every cell); every window adds a repeat effect (1%
CV). The cells' speedup columns come from specbench's own `metrics.cells.speedup_columns`,
`interval_unit` and `mark_history_intervals` on those window throughputs; the two runs' cells tables go
through `compare.compare_cells` and `compare.exit_code`, the functions `specbench compare` runs. The
"+ history" design gives both runs the same variance history (one estimate on one machine, its df
stated), drawn from the true components as a calibration would estimate them.

Goal: identical runs exit 1 in at most 5% of pairs, for every design and CV (exit code 1 otherwise).
The last line sums it up.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.decide.intervals import LaunchVariance
from specbench.metrics.cells import interval_unit, mark_history_intervals
from specbench.metrics.speedup import speedup_columns
from specbench.report.compare import EXIT_INDICATIVE, EXIT_REGRESSED, compare_cells, exit_code

BASE, DRAFTER = "base", "ngram"
POINTS = [(cat, out, c) for cat in ("code", "chat") for out in (64, 256, 1024) for c in (1, 2, 4, 8, 16)]
REPEAT_CV = 0.01
CVS = (0.02, 0.03, 0.05)
THRESHOLD = 0.05
GOAL = 0.05
MARK_START, MARK_END = "<!-- compare-gate:start -->", "<!-- compare-gate:end -->"


@dataclass(frozen=True)
class Design:
    launches: int
    repeats: int
    history_df: float = 0.0  # a variance history's launch df (0: none)

    def label(self) -> str:
        return f"{self.launches} x {self.repeats}" + (f" + history (df {self.history_df:g})" if self.history_df else "")


def _true_speedup(c: int) -> float:
    return 1.5 - 0.1 * math.log2(c)


def history(rng: np.random.Generator, design: Design, cv: float) -> LaunchVariance | None:
    """A variance history as a calibration estimates it: each component's true variance times chi2(df)/df."""
    if not design.history_df:
        return None
    repeat_df = 2 * design.history_df
    return LaunchVariance(cv * cv * rng.chisquare(design.history_df) / design.history_df, design.history_df,
                          "simulated", REPEAT_CV ** 2 * rng.chisquare(repeat_df) / repeat_df, repeat_df)


def run_cells(rng: np.random.Generator, design: Design, cv: float, scale: dict[int, float],
              cal: LaunchVariance | None) -> pd.DataFrame:
    """One run's drafter cells. `scale`: per point index, the factor on the drafter's true speedup."""
    effects = {v: rng.normal(0.0, cv, design.launches) for v in (BASE, DRAFTER)}
    rows = []
    for i, (cat, out, c) in enumerate(POINTS):
        base_tp = 20.0 * c ** 0.8
        truth = {BASE: base_tp, DRAFTER: base_tp * _true_speedup(c) * scale.get(i, 1.0)}
        windows = {v: {(la + 1, r + 1): truth[v] * math.exp(effects[v][la] + rng.normal(0.0, REPEAT_CV))
                       for la in range(design.launches) for r in range(design.repeats)} for v in truth}
        row = {"variant": DRAFTER, "point_id": f"{cat}|in-|out{out}|c{c}|t0", "concurrency": c, "valid": True,
               "launches": design.launches, "repeats": design.launches * design.repeats,
               "interval_unit": interval_unit(design.launches, cal), "acceptance_length": math.nan}
        row.update(speedup_columns(windows[DRAFTER], windows[BASE], cal))
        mark_history_intervals(row)
        rows.append(row)
    return pd.DataFrame(rows)


def exit_rates(rng: np.random.Generator, design: Design, cv: float, scale: dict[int, float],
               pairs: int) -> tuple[float, float]:
    """(share of pairs exiting 1, share exiting 3) for run A at the truth and run B with `scale` applied."""
    codes = []
    for _ in range(pairs):
        cal = history(rng, design, cv)  # one machine: both runs read the same history
        a, b = run_cells(rng, design, cv, {}, cal), run_cells(rng, design, cv, scale, cal)
        codes.append(exit_code(compare_cells(a, b, {BASE}, THRESHOLD)))
    return codes.count(EXIT_REGRESSED) / pairs, codes.count(EXIT_INDICATIVE) / pairs


@dataclass(frozen=True)
class Results:
    null: dict[tuple[Design, float], tuple[float, float]]
    power_all: dict[float, float]
    power_one: dict[float, float]
    pairs: int

    @property
    def worst(self) -> float:
        return max(r[0] for r in self.null.values())


NULL_DESIGNS = (Design(1, 3), Design(1, 3, history_df=4), Design(2, 3), Design(3, 3))
POWER_DESIGN = Design(3, 3)


def simulate(pairs: int, seed: int = 0, cvs: tuple[float, ...] = CVS,
             designs: tuple[Design, ...] = NULL_DESIGNS) -> Results:
    rng = np.random.default_rng(seed)
    null = {(d, cv): exit_rates(rng, d, cv, {}, pairs) for d in designs for cv in cvs}
    every = {i: 0.9 for i in range(len(POINTS))}
    power_all = {cv: exit_rates(rng, POWER_DESIGN, cv, every, pairs)[0] for cv in cvs}
    power_one = {cv: exit_rates(rng, POWER_DESIGN, cv, {0: 0.9}, pairs)[0] for cv in cvs}
    return Results(null, power_all, power_one, pairs)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def markdown(res: Results) -> str:
    cvs = sorted({cv for _, cv in res.null})
    head = "| design (launches x repeats per variant) | " + " | ".join(f"CV {100 * cv:g}%" for cv in cvs) + " |"
    lines = [f"Identical runs (A/A), {res.pairs} pairs per entry, {len(POINTS)} drafter cells per run, threshold "
             f"{THRESHOLD:.0%}: share of pairs exiting 1 (established regression) / 3 (indicative drop only). "
             f"Goal: exit 1 in at most {GOAL:.0%}.", "", head, "| --- |" + " ---: |" * len(cvs)]
    designs = list(dict.fromkeys(d for d, _ in res.null))
    for d in designs:
        lines.append(f"| {d.label()} | " + " | ".join(f"{_pct(res.null[(d, cv)][0])} / {_pct(res.null[(d, cv)][1])}"
                                                     for cv in cvs) + " |")
    lines += ["", f"Power, {POWER_DESIGN.label()}: share of pairs exiting 1 when run B's drafter is truly 10% "
              "slower.", "", "| regression | " + " | ".join(f"CV {100 * cv:g}%" for cv in cvs) + " |",
              "| --- |" + " ---: |" * len(cvs),
              f"| at all {len(POINTS)} points | " + " | ".join(_pct(res.power_all[cv]) for cv in cvs) + " |",
              "| at one point | " + " | ".join(_pct(res.power_one[cv]) for cv in cvs) + " |"]
    return "\n".join(lines) + "\n"


def summary(res: Results) -> str:
    cvs = sorted(res.power_all)
    return (f"compare gate: identical runs exit 1 in at most {_pct(res.worst)} of pairs (goal <= {GOAL:.0%}; "
            f"{len(res.null)} design x CV entries, {res.pairs} pairs each); power to establish a 10% regression "
            f"at every point with {POWER_DESIGN.launches} launches: "
            + " / ".join(_pct(res.power_all[cv]) for cv in cvs) + " at launch CV "
            + " / ".join(f"{100 * cv:g}" for cv in cvs) + "%")


def write(path: Path, text: str) -> None:
    doc = path.read_text()
    start, end = doc.index(MARK_START) + len(MARK_START), doc.index(MARK_END)
    path.write_text(doc[:start] + "\n" + text + doc[end:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--write", type=Path, help="replace the table between the compare-gate markers of this file")
    a = ap.parse_args(argv)
    res = simulate(a.pairs, a.seed)
    text = markdown(res)
    print(text)
    if a.write:
        write(a.write, text)
    print(summary(res))
    return 0 if res.worst <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())

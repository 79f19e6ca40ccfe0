"""Coverage and width of every 95% interval the report prints, by simulation.

    python -m benchmarks.interval_coverage [--trials 4000] [--write docs/metrics.md]

For each interval (speedup, per-user speedup, output throughput, per-user speed, TPOT p50, acceptance
length; all positive figures, all on the log scale) it draws n independent units (launches, or repeats
when launches are not measured) at a between-unit coefficient of variation CV, computes the interval with
the very function specbench.metrics uses, and counts how often it holds the true value. Goal: 0.93-0.97 at
every n and CV (exit code 1 otherwise). A second table shows why launches must be the unit: with a between-launch
effect, an interval that treats the repeats inside launches as independent covers far less. A third row
set reproduces the previous method (paired BCa bootstrap over repeats) for comparison. A fourth compares,
for output throughput with few units and a large CV, the Student t interval on the natural scale (which
can reach below 0) with the one on the log scale. The gated rows (`GATED`, one `GatedRow` each) draw every
speedup interval the report prints by its interval_unit (launch at n = 2, repeat+calibration, history,
launch+history) through cells.speedup_ci, with the history as history_checks.check_run hands it to a run, and
every main-table interval at n = 2; each prints its coverage, Monte Carlo SE and gate, and a row below its
gate fails the script (exit 1). `--quick`: 100 measurements per entry (a test). Last line:
`interval coverage: K of N gated rows pass; closest to its gate: ...`.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.decide import stats
from specbench.decide.intervals import variance_levels
from specbench.metrics.speedup import speedup_ci
from specbench.stores import history_checks, variance_history
from specbench.stores.variance_history import Calibration

NS = (3, 5, 10)
CVS = (0.02, 0.05, 0.10, 0.30)  # 30%: the between-launch CV an A/A run measured on a loaded 2-core CPU
GOAL = (0.93, 0.97)
REQUESTS_PER_WINDOW = 8  # requests inside one unit (per-user speed, TPOT): C x waves
REQUEST_CV = 0.15  # spread of per-request figures inside a unit (prompts differ)
TRUE_SPEEDUP = 1.2
TAU = 2.5  # true acceptance length (tokens per target step)
TOKENS_PER_WINDOW = 512
MARK_START = "<!-- interval-coverage:start -->"
MARK_END = "<!-- interval-coverage:end -->"

Trial = Callable[[np.random.Generator, int, float], tuple[stats.TInterval, float]]


def _units(rng: np.random.Generator, n: int, cv: float, mean: float = 1.0) -> np.ndarray:
    """n unit effects, normal with the given mean and CV (kept positive)."""
    return np.maximum(rng.normal(mean, cv * mean, n), 1e-6 * mean)


def _requests(rng: np.random.Generator, unit: np.ndarray) -> np.ndarray:
    """REQUESTS_PER_WINDOW per unit: the unit effect times a lognormal request factor of mean 1."""
    s = math.sqrt(math.log(1 + REQUEST_CV**2))
    return unit[:, None] * rng.lognormal(-s * s / 2, s, (unit.size, REQUESTS_PER_WINDOW))


def trial_throughput(rng: np.random.Generator, n: int, cv: float) -> tuple[stats.TInterval, float]:
    return stats.positive_mean_ci(100.0 * _units(rng, n, cv)), 100.0


def trial_speedup(rng: np.random.Generator, n: int, cv: float) -> tuple[stats.TInterval, float]:
    return stats.ratio_ci(100.0 * TRUE_SPEEDUP * _units(rng, n, cv), 100.0 * _units(rng, n, cv)), TRUE_SPEEDUP


def trial_per_user(rng: np.random.Generator, n: int, cv: float) -> tuple[stats.TInterval, float]:
    req = 30.0 * _requests(rng, _units(rng, n, cv))
    return stats.positive_mean_ci(req.mean(axis=1), point=float(req.mean())), 30.0


def trial_per_user_speedup(rng: np.random.Generator, n: int, cv: float) -> tuple[stats.TInterval, float]:
    var = 30.0 * TRUE_SPEEDUP * _requests(rng, _units(rng, n, cv))
    base = 30.0 * _requests(rng, _units(rng, n, cv))
    return stats.ratio_ci(var.mean(axis=1), base.mean(axis=1)), TRUE_SPEEDUP


_TPOT_TRUTH: dict[float, float] = {}


def _tpot_truth(cv: float) -> float:
    """Median TPOT over the population of (unit, request), by a large simulation."""
    if cv not in _TPOT_TRUTH:
        rng = np.random.default_rng(12345)
        _TPOT_TRUTH[cv] = float(np.median(0.04 * _requests(rng, _units(rng, 400_000, cv))))
    return _TPOT_TRUTH[cv]


def trial_tpot(rng: np.random.Generator, n: int, cv: float) -> tuple[stats.TInterval, float]:
    req = 0.04 * _requests(rng, _units(rng, n, cv))
    return stats.positive_mean_ci(np.median(req, axis=1), point=float(np.median(req))), _tpot_truth(cv)


def _lognormal_units(rng: np.random.Generator, n: int, cv: float) -> np.ndarray:
    """n unit effects, lognormal with mean 1 and the given CV: acceptance lengths stay away from 0, where a
    normal draw at a large CV would make E[steps] = E[tokens / tau] explode."""
    s = math.sqrt(math.log(1 + cv**2))
    return rng.lognormal(-s * s / 2, s, n)


def _tau_truth(cv: float) -> float:
    """E[tokens] / E[steps] = TAU / E[1 / u] when each unit's acceptance length is TAU times a lognormal
    unit effect u of mean 1 (E[1 / u] = exp(s^2) = 1 + CV^2)."""
    return TAU / (1 + cv**2)


def trial_acceptance(rng: np.random.Generator, n: int, cv: float) -> tuple[stats.TInterval, float]:
    tau = TAU * _lognormal_units(rng, n, cv)
    tokens = np.full(n, float(TOKENS_PER_WINDOW))
    return stats.ratio_estimator_ci(tokens, tokens / tau), _tau_truth(cv)


INTERVALS: dict[str, tuple[str, Trial]] = {
    "speedup": ("Welch t on log ratio of means (units: launches)", trial_speedup),
    "per_user_speedup": ("Welch t on log ratio of unit means of per-user speed", trial_per_user_speedup),
    "output_throughput": ("Student t on the log of the mean of unit throughputs", trial_throughput),
    "per_user_tok_s": ("Student t on the log scale, unit means of per-user speed, centred on the pooled mean",
                       trial_per_user),
    "tpot_p50_s": ("Student t on the log scale, unit medians of TPOT, centred on the pooled median", trial_tpot),
    "acceptance_length": ("ratio estimator sum(tokens)/sum(steps) on the log scale, t with n-1 df",
                          trial_acceptance),
}


@dataclass
class Result:
    coverage: float
    rel_width: float  # median (high - low) / truth
    undefined: int


def simulate(trial: Trial, n: int, cv: float, trials: int, seed: int) -> Result:
    rng = np.random.default_rng(seed)
    hits, widths, undefined = 0, [], 0
    for _ in range(trials):
        ci, truth = trial(rng, n, cv)
        if ci.low is None or ci.high is None:
            undefined += 1
            continue
        hits += ci.low <= truth <= ci.high
        widths.append((ci.high - ci.low) / truth)
    done = trials - undefined
    return Result(hits / done if done else math.nan, float(np.median(widths)) if widths else math.nan, undefined)


POSITIVITY_CASES = ((2, 0.10), (2, 0.30), (3, 0.30), (5, 0.30))


def positivity_table(trials: int, seed: int) -> list[list[str]]:
    """Output throughput with few units and a large CV: the Student t interval on the natural scale (the
    former method, `stats.mean_ci`) against the one on the log scale (`stats.positive_mean_ci`): coverage
    and the share of intervals whose low end is 0 or below (an impossible throughput)."""
    rows = []
    for n, cv in POSITIVITY_CASES:
        rng = np.random.default_rng(seed + 100 * n + round(1000 * cv))
        hits = {"natural": 0, "log": 0}
        nonpositive = {"natural": 0, "log": 0}
        for _ in range(trials):
            units = 100.0 * _units(rng, n, cv)
            for name, ci in (("natural", stats.mean_ci(units)), ("log", stats.positive_mean_ci(units))):
                hits[name] += ci.low <= 100.0 <= ci.high  # type: ignore[operator]
                nonpositive[name] += ci.low <= 0  # type: ignore[operator]
        rows.append([str(n), f"{100 * cv:.0f}%",
                     *(f"{hits[k] / trials:.3f} ({100 * nonpositive[k] / trials:.1f}%)" for k in ("natural", "log"))])
    return rows


def launch_table(trials: int, seed: int) -> list[list[str]]:
    """Speedup with a between-launch effect (CV 10%) and repeats inside each launch (CV 2%): launches as
    the unit (what specbench does) vs repeats treated as independent (what launch-blind intervals do)."""
    rows = []
    rng = np.random.default_rng(seed)
    for launches, repeats in ((2, 3), (3, 3), (5, 2)):
        hits_l = hits_r = 0
        for _ in range(trials):
            def windows(mean: float, launches: int = launches, repeats: int = repeats) -> np.ndarray:
                launch = _units(rng, launches, 0.10, mean)
                return launch[:, None] * _units(rng, launches * repeats, 0.02).reshape(launches, repeats)

            v, b = windows(100.0 * TRUE_SPEEDUP), windows(100.0)
            by_launch = stats.ratio_ci(v.mean(axis=1), b.mean(axis=1))
            by_repeat = stats.ratio_ci(v.ravel(), b.ravel())
            hits_l += by_launch.low <= TRUE_SPEEDUP <= by_launch.high  # type: ignore[operator]
            hits_r += by_repeat.low <= TRUE_SPEEDUP <= by_repeat.high  # type: ignore[operator]
        rows.append([f"{launches} x {repeats}", f"{hits_l / trials:.3f}", f"{hits_r / trials:.3f}"])
    return rows


def adaptive_rows(trials: int, seed: int) -> list[list[str]]:
    """Adaptive repeats (one launch, windows as units): windows drawn one at a time until the runner's own
    rule (metrics.adaptive_done, the config's default target and cap) stops; then the output throughput
    interval over the windows kept (stats.positive_mean_ci). Per CV: coverage and mean windows."""
    from specbench.config import AdaptiveConfig
    from specbench.decide.adaptive import adaptive_done

    a = AdaptiveConfig()
    rows = []
    for cv in (0.02, 0.03, 0.05, 0.10):
        rng = np.random.default_rng(seed + round(1000 * cv))
        hits, used = 0, 0
        for _ in range(trials):
            xs: list[float] = []
            while len(xs) < a.max_repeats and not adaptive_done(xs, a.target_rel_half_width):
                xs.append(float(100.0 * _units(rng, 1, cv)[0]))
            ci = stats.positive_mean_ci(xs)
            hits += ci.low <= 100.0 <= ci.high  # type: ignore[operator]
            used += len(xs)
        rows.append([f"{100 * cv:.0f}%", f"{hits / trials:.3f}", f"{used / trials:.1f}"])
    return rows


def _paired_bca(v: np.ndarray, b: np.ndarray, seed: int) -> tuple[float, float]:
    """The former interval: paired BCa bootstrap of mean(v) / mean(b) over repeats (percentile fallback)."""
    import warnings

    import scipy.stats

    def ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(x, axis=axis) / np.mean(y, axis=axis)

    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = scipy.stats.bootstrap((v, b), ratio, paired=True, n_resamples=1000, method=method,
                                        rng=np.random.default_rng(seed))
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return lo, hi
    return math.nan, math.nan


def previous_method(trials: int, seed: int) -> list[list[str]]:
    """The former speedup interval (paired BCa bootstrap over repeats) on the same simulated data."""
    rows = []
    for cv in CVS:
        cells = []
        for n in NS:
            rng = np.random.default_rng(seed + n)
            hits = 0
            for i in range(trials):
                v, b = 100.0 * TRUE_SPEEDUP * _units(rng, n, cv), 100.0 * _units(rng, n, cv)
                lo, hi = _paired_bca(v, b, seed=i)
                hits += lo <= TRUE_SPEEDUP <= hi
            cells.append(f"{hits / trials:.2f}")
        rows.append([f"{100 * cv:.0f}%", *cells])
    return rows


# ---------------------------------------------------------------------------------------------------
# Gated rows: every speedup interval the report prints, by its interval_unit, through the product's own
# speedup.speedup_ci, with its coverage gate. To add a row: one GatedRow with a trial function.

LAUNCH_CV, REPEAT_CV = 0.10, 0.02  # as launch_table: launches vary far more than repeats
CAL_LAUNCHES, CAL_REPEATS, CAL_CELLS = 3, 2, 4  # one `specbench calibrate --launches 3` (repeats >= 2)
HISTORY_CALIBRATIONS = (1, 2, 5, 15)  # a history of df 2, 4, 10 and 30

RowTrial = Callable[[np.random.Generator], tuple[stats.TInterval, float]]


@dataclass(frozen=True)
class GatedRow:
    """One gated row: the interval (the report's interval_unit), how it is drawn, its trial and its gate
    (the lowest acceptable coverage; the script exits 1 below it)."""

    interval: str
    design: str
    trial: RowTrial
    gate: float = GOAL[0]


def _windows(rng: np.random.Generator, mean: float, launches: int, repeats: int) -> dict[tuple[int, int], float]:
    """(launch, repeat) -> window throughput: a launch effect (LAUNCH_CV) times a repeat effect (REPEAT_CV)."""
    launch = _units(rng, launches, LAUNCH_CV, mean)
    rep = _units(rng, launches * repeats, REPEAT_CV).reshape(launches, repeats)
    return {(la + 1, r + 1): float(launch[la] * rep[la, r]) for la in range(launches) for r in range(repeats)}


def simulated_history(rng: np.random.Generator, calibrations: int) -> Calibration | None:
    """`calibrations` A/A calibrations of the baseline (CAL_LAUNCHES x CAL_REPEATS on CAL_CELLS cells that
    share each launch's effect), estimated by variance_history.estimate and pooled by variance_history.pooled."""
    entries = []
    for i in range(calibrations):
        launch = _units(rng, CAL_LAUNCHES, LAUNCH_CV, 100.0)
        cells = {}
        for c in range(CAL_CELLS):
            rep = _units(rng, CAL_LAUNCHES * CAL_REPEATS, REPEAT_CV).reshape(CAL_LAUNCHES, CAL_REPEATS)
            cells[f"c{c}"] = {(la + 1, r + 1): float(launch[la] * rep[la, r]) for la in range(CAL_LAUNCHES)
                              for r in range(CAL_REPEATS)}
        frame = _cells_frame({"base": cells})
        est = variance_history.estimate(frame, "base", hardware={}, engine="", model="", source_run=str(i))
        if est is not None:  # as run_estimate records it: the baseline's speeds, repeats per launch
            entries.append(replace(est, speeds=history_checks.speeds(frame, "base"), repeats=CAL_REPEATS))
    return variance_history.pooled(entries, "simulated")


def _cells_frame(windows: dict[str, dict[str, dict[tuple[int, int], float]]]) -> pd.DataFrame:
    """Cells as the history's checks read them: per variant and point, launches, repeats, the output
    throughput and the variance levels (metrics.variance_levels)."""
    return pd.DataFrame([{"variant": v, "point_id": p, "valid": True, "launches": len({la for la, _ in w}),
                          "repeats": len(w), "output_throughput_tok_s": stats.mean(list(w.values())),
                          **variance_levels(w, [])} for v, by_point in windows.items() for p, w in by_point.items()])


def _speedup_trial(launches: int, repeats: int, calibrations: int, variant_launches: int | None = None) -> RowTrial:
    """The report's speedup interval of one point (speedup.speedup_ci) for a variant and a baseline measured
    launches x repeats each, with the pooled history of `calibrations` calibrations (0: none; df 2 each) as the
    run would use it after history_checks.check_run (its speed and F tests). `variant_launches`: the launches
    the variant measured when fewer than configured (its later launches failed, or the run stopped): the
    interval takes the launches measured, whatever the config said."""
    def trial(rng: np.random.Generator) -> tuple[stats.TInterval, float]:
        cal = simulated_history(rng, calibrations) if calibrations else None
        v = _windows(rng, 100.0 * TRUE_SPEEDUP, variant_launches or launches, repeats)
        b = _windows(rng, 100.0, launches, repeats)
        own = _cells_frame({"base": {"c0": b}, "v": {"c0": v}})
        lv = history_checks.check_run(own, ["base", "v"], cal).variance("simulated")
        point = stats.mean(list(v.values())) / stats.mean(list(b.values()))
        return speedup_ci(v, b, lv, point), TRUE_SPEEDUP
    return trial


GATED: list[GatedRow] = [
    GatedRow("launch", "2 launches x 1 repeat (n = 2), no history", _speedup_trial(2, 1, 0)),
    GatedRow("launch", "2 launches x 3 repeats (n = 2), no history", _speedup_trial(2, 3, 0)),
    GatedRow("repeat+calibration", "1 launch x 3 repeats + 3 calibrations", _speedup_trial(1, 3, 3)),
    GatedRow("history", "1 launch x 1 repeat + 3 calibrations", _speedup_trial(1, 1, 3)),
    GatedRow("launch+history", "2 launches x 1 repeat + 1 calibration", _speedup_trial(2, 1, 1)),
    GatedRow("launch+history", "2 launches x 1 repeat + 3 calibrations", _speedup_trial(2, 1, 3)),
    GatedRow("launch+history", "3 launches x 1 repeat + 3 calibrations", _speedup_trial(3, 1, 3)),
    # the exact small-sample interval at each history df (issue 41): t at the Satterthwaite df, no bound on top
    *(GatedRow(unit, f"1 launch x {r} repeat{'s' if r > 1 else ''}, history df {2 * k} ({k} calibration"
               f"{'s' if k > 1 else ''})", _speedup_trial(1, r, k))
      for k in HISTORY_CALIBRATIONS for unit, r in (("repeat+calibration", 3), ("history", 1))),
    # launches measured, not configured: the variant's second launch failed, the baseline measured both
    GatedRow("repeat+calibration", "baseline 2 launches x 3 repeats, variant 1 of 2 launches x 3 repeats "
             "(its second failed) + 1 calibration", _speedup_trial(2, 3, 1, variant_launches=1)),
]


def _at(trial: Trial, n: int, cv: float) -> RowTrial:
    """A main-table trial at a fixed n and CV (a gated row of its own: the main table starts at n = 3)."""
    return lambda rng: trial(rng, n, cv)


GATED += [GatedRow(f"{name} (n = 2)", f"2 units, CV {100 * cv:.0f}%: {method}", _at(trial, 2, cv))
          for name, (method, trial) in INTERVALS.items() for cv in (0.05, 0.30)]


LAST_LINE = [""]  # the summary line main prints last


def gated_rows(trials: int, seed: int) -> tuple[list[list[str]], bool]:
    """Each gated row's coverage with its Monte Carlo standard error, its gate and whether it passes."""
    rows, ok = [], True
    lowest: tuple[float, float, str] = (math.inf, 0.0, "")
    for i, row in enumerate(GATED):
        rng = np.random.default_rng(seed + 7919 * (i + 1))
        hits = done = 0
        for _ in range(trials):
            ci, truth = row.trial(rng)
            if ci.low is None or ci.high is None:
                continue
            done += 1
            hits += ci.low <= truth <= ci.high
        cov = hits / done if done else math.nan
        se = math.sqrt(cov * (1 - cov) / done) if done else math.nan
        passed = cov >= row.gate
        ok &= passed
        lowest = min(lowest, (cov - row.gate, cov, f"{row.interval}, {row.design}"))
        rows.append([f"`{row.interval}`", row.design, f"{cov:.3f} ({se:.3f})", f">= {row.gate:.2f}",
                     "pass" if passed else "FAIL"])
    n_pass = sum(r[-1] == "pass" for r in rows)
    LAST_LINE[0] = (f"interval coverage: {n_pass} of {len(rows)} gated rows pass; closest to its gate: {lowest[2]} "
                    f"at {lowest[1]:.3f}")
    return rows, ok


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    return "\n".join(["\n".join(lines), *("| " + " | ".join(r) + " |" for r in rows)])


def run(trials: int, seed: int, previous_trials: int) -> tuple[str, bool]:
    gated, ok = gated_rows(trials, seed)
    rows = []
    for name, (method, trial) in INTERVALS.items():
        for cv in CVS:
            cells = []
            for n in NS:
                r = simulate(trial, n, cv, trials, seed + 1000 * n + round(1000 * cv))
                ok &= GOAL[0] <= r.coverage <= GOAL[1]
                cells.append(f"{r.coverage:.3f} ({100 * r.rel_width:.1f}%)")
            rows.append([f"`{name}`", method if cv == CVS[0] else "", f"{100 * cv:.0f}%", *cells])
    head = ["interval", "method", "CV", *(f"n={n}" for n in NS)]
    text = [f"Coverage of the nominal 95% intervals ({trials} simulated measurements per entry; in brackets "
            "the median width as a percentage of the true value). CV = coefficient of variation between "
            f"units; per-user speed and TPOT units hold {REQUESTS_PER_WINDOW} requests each with a "
            f"{100 * REQUEST_CV:.0f}% request-to-request spread. Goal: {GOAL[0]}-{GOAL[1]}.", "",
            _table(head, rows), "",
            f"Launch effect (between-launch CV 10%, repeats inside a launch CV 2%, speedup, {trials} "
            "measurements): coverage with launch means as units vs repeats treated as independent.", "",
            _table(["launches x repeats", "launches as units (or calibrated)", "repeats as units"],
                   launch_table(trials, seed)),
            "",
            f"Every speedup interval the report prints, by its `interval_unit`, through speedup.speedup_ci ({trials} "
            f"measurements per row; between-launch CV {100 * LAUNCH_CV:.0f}%, between-repeat CV "
            f"{100 * REPEAT_CV:.0f}%; a calibration is {CAL_LAUNCHES} launches x {CAL_REPEATS} repeats of the "
            f"baseline on {CAL_CELLS} cells, estimated and pooled by specbench.stores.calibration). In brackets the "
            "Monte Carlo standard error; a row below its gate fails the script.", "",
            _table(["interval_unit", "design", "coverage", "gate", ""], gated),
            "",
            f"Positive figures (output throughput, {trials} measurements per row): coverage of the Student t "
            "interval on the natural scale (the former method) and on the log scale (specbench's), in brackets "
            "the share of intervals whose low end is 0 or below.", "",
            _table(["units", "CV", "natural scale", "log scale"], positivity_table(trials, seed)),
            "", f"Adaptive repeats (one launch, windows as units; target half-width 3%, at most 10 windows; "
            f"{trials} cells per row): coverage of the output throughput interval where the rule stopped. Goal: "
            f">= {GOAL[0]}.", "", _table(["CV", "coverage", "mean windows"], adaptive := adaptive_rows(trials, seed)),
            ""]
    ok &= all(float(r[1]) >= GOAL[0] for r in adaptive)
    if previous_trials:
        text += [f"The previous speedup interval (paired BCa bootstrap over repeats, {previous_trials} "
                 "measurements) on the same data:", "",
                 _table(["CV", *(f"n={n}" for n in NS)], previous_method(previous_trials, seed)), ""]
    return "\n".join(text), ok


def write_into(doc: Path, block: str) -> None:
    """Replace the text between the coverage markers in `doc`."""
    text = doc.read_text()
    start, end = text.index(MARK_START) + len(MARK_START), text.index(MARK_END)
    doc.write_text(text[:start] + "\n" + block + "\n" + text[end:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.interval_coverage", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=4000, help="simulated measurements per table entry")
    p.add_argument("--previous-trials", type=int, default=400,
                   help="measurements per entry for the previous bootstrap method (0: skip it)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="100 measurements per entry, no bootstrap rows (a test)")
    p.add_argument("--write", type=Path, metavar="DOC", help="also write the tables between the markers in DOC")
    p.add_argument("--gated-only", action="store_true", help="only the gated rows (their table; no --write)")
    p.add_argument("--only", metavar="TEXT", help="with --gated-only: only the rows whose design contains TEXT")
    a = p.parse_args(argv)
    if a.quick:
        a.trials, a.previous_trials = min(a.trials, 100), 0
    if a.gated_only:
        if a.only:
            GATED[:] = [r for r in GATED if a.only in r.design]
        rows, ok = gated_rows(a.trials, a.seed)
        print(_table(["interval_unit", "design", "coverage", "gate", ""], rows))
        print(LAST_LINE[0])
        return 0 if ok else 1
    block, ok = run(a.trials, a.seed, a.previous_trials)
    print(block)
    if a.write:
        write_into(a.write, block)
    if not ok:
        print(f"coverage outside {GOAL[0]}-{GOAL[1]} for at least one interval, or a gated row below its gate",
              file=sys.stderr)
    print(LAST_LINE[0])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

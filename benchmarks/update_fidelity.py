"""S of issue 50's price line: on how many points `specbench update` decides, its word is the new head's full
matrix's, by simulation through specbench's own functions.

    python -m benchmarks.update_fidelity [--trials 40] [--seed 0] [--al-b 2.4,2.8]

A known truth shaped like K2.6 (configs/kimi-k2.6-tp8.yaml) as benchmarks.decision_price simulates it, the
requests and windows simulated as benchmarks.prediction_coverage does (`measure`: each request's steps from its
acceptance, windows on C slots via metrics.makespan, cells via metrics.speedup.speedup_columns and
metrics.acceptance.cell_acceptance): levels C = 1 ... 32 (sweep.concurrency), one category, output length 256,
windows of the same 32 prompts at every level. The baseline's decode step is 1 / `estimates.per_request_tok_s`
(26 tok/s at C = 1, 25.23 at C = 32, linear in log C between), its prefill PREFILL_SHARE of a request. Head A
(EAGLE-3) has mean acceptance AL_A (2.6) with an SD of ACCEPTANCE_SD (0.3) over prompts, and at each C the
step-cost ratio r(C) that puts its true speedup (the window tail included) on the public curve
(decision_price.public_curve): r = 1.92 at C = 1 down to 1.55 at C = 16, 1.59 at C = 32. Each head B (HEADS_B:
AL 2.4, worse, and 2.8, better) is a new head of the same configuration (same r, same prefill) at another mean
acceptance, each prompt's acceptance sharing head A's score; the acceptance does not move with C. Launch CV: the
baseline 3% (decision_price.LAUNCH_CV), the drafters DRAFTER_CV (5%).

Per trial: RUN (the baseline and head A at every level, LAUNCHES launches each; its decomposition via
metrics.decomposition.decomposition_table, its step cost via surface.reference.reference_from_run); per head B
the update's run (head B alone at RUN's highest level, one launch: its cells have the head's acceptance and no
speedup) and `update.level.level_words` on it with RUN's step cost at min_speedup 1.05 (no prediction ledger:
the model's own past errors are not added); and head B's full matrix (the baseline and head B at every level,
LAUNCHES launches), its word per level `update.level.word_of` of its speedup interval. Counted over trials and
levels: the points the update decides (power), among them those where its word is the full matrix's (S), where
the full matrix is undecided, and where the two disagree in direction (adopt against slower). Against the truth
(true_speedup of each head and level, TRUTH_WINDOWS windows): the decided words that are wrong (`adopt` at a
true speedup at or below min_speedup, `slower` at one of 1 or more, `same` outside [1/m, m]), the full matrix's the
same way, and the share of predicted intervals holding the true speedup. A/A (the command, not decision_price):
a second full matrix of each head on the same prompts, its launches from a stream of their own (the figures
above do not move), its words against the first's as S counts the update's: how often the reference S is
counted against repeats its own word. Last line:

    update fidelity: the full matrix's words on <S>% of <n> decided points (power <p>%, ...)
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field, fields
from functools import cache

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from benchmarks.decision_price import CONFIG, LAUNCH_CV, public_curve
from benchmarks.prediction_coverage import BASE, HEAD_A, HEAD_B, Setup, launch_effects, measure, true_speedup
from specbench.config import load_config
from specbench.metrics.decomposition import decomposition_table
from specbench.metrics.forced_surface import Prediction, has_interval
from specbench.surface.reference import reference_from_run
from specbench.update.level import StepCost, level_words, measured_at, word_of

OUT, WINDOW, LAUNCHES, MIN_SPEEDUP = 256, 32, 3, 1.05
PREFILL_SHARE = 0.05  # the baseline's prefill share of a request (assumed: the config states none)
AL_A, HEADS_B = 2.6, (2.4, 2.8)  # EAGLE-3's mean acceptance; two new heads, one worse, one better
ACCEPTANCE_SD, DRAFTER_CV = 0.3, 0.05
TRIALS = 40
TRUTH_WINDOWS = 400  # windows of the truth per evaluation (common random numbers: the same prompts each)
UNDECIDED = "undecided"
OPPOSITE = {"adopt": "slower", "slower": "adopt"}


def tok_s(c: int, est: dict[int, float]) -> float:
    """The baseline's per-request tok/s at C: the estimates' figures, linear in log C between (flat outside)."""
    xs = sorted(est)
    if c <= xs[0] or c >= xs[-1]:
        return est[xs[0] if c <= xs[0] else xs[-1]]
    lo, hi = max(x for x in xs if x <= c), min(x for x in xs if x >= c)
    t = 0.0 if lo == hi else (math.log(c) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return est[lo] + t * (est[hi] - est[lo])


@cache
def k26_levels(al_a: float, acceptance_sd: float) -> tuple[tuple[int, tuple[float, float, float]], ...]:
    """Per C of K2.6's sweep: the baseline's step, r(C) and prefill share, r(C) solved (brentq) so that head A's
    true speedup (prediction_coverage.true_speedup over TRUTH_WINDOWS windows, the window tail included) is the
    public curve's."""
    cfg = load_config(CONFIG)
    est = {int(k): float(v) for k, v in (cfg.estimates.per_request_tok_s or {}).items()}
    out = []
    for c in cfg.sweep.concurrency:
        s = 1.0 / tok_s(c, est)
        r = brentq(head_a_gap, 0.2, 10.0, args=(c, s, al_a, acceptance_sd), xtol=1e-6)
        out.append((c, (s, float(r), PREFILL_SHARE)))
    return tuple(out)


def head_a_gap(r: float, c: int, step: float, al_a: float, acceptance_sd: float) -> float:
    """Head A's true speedup at C with step-cost ratio r, minus the public curve's."""
    setup = Setup(al_a, al_a, acceptance_sd, levels={c: (step, r, PREFILL_SHARE)}, window=WINDOW, output_len=OUT)
    return true_speedup(setup, al_a, c, c, windows=TRUTH_WINDOWS) - public_curve(c)


def k26_setup(al_b: float, acceptance_sd: float = ACCEPTANCE_SD, baseline_cv: float = LAUNCH_CV,
              drafter_cv: float = DRAFTER_CV, al_a: float = AL_A) -> Setup:
    """The K2.6-shaped truth with head B at `al_b` (k26_levels)."""
    levels = dict(k26_levels(al_a, acceptance_sd))
    return Setup(al_a, al_b, acceptance_sd, baseline_cv, drafter_cv, LAUNCHES, OUT, tuple(levels), levels, WINDOW)


@dataclass
class Tally:
    """Per level: the points, those the update decides, and among them those with the full matrix's word, with
    the full matrix undecided, and with the opposite direction (adopt against slower); against the truth, the
    update's and the full matrix's wrong words and the predicted intervals holding it; A/A, a second full
    matrix's decided points and those with the first's word."""

    points: int = 0
    decided: int = 0
    same: int = 0
    full_undecided: int = 0
    opposite: int = 0
    wrong: int = 0
    full_decided: int = 0
    full_wrong: int = 0
    predicted: int = 0
    covered: int = 0
    aa_decided: int = 0
    aa_same: int = 0

    def add(self, update: str, full: str, truth: float = math.nan, pred: Prediction | None = None,
            again: str | None = None) -> None:
        """One point: the update's word, the full matrix's, the true speedup (NaN: unknown, no error counted),
        the update's prediction (its interval's coverage) and a second full matrix's word (A/A)."""
        self.points += 1
        self.full_decided += full != UNDECIDED
        self.full_wrong += wrong(full, truth)
        if pred is not None and has_interval(pred) and math.isfinite(truth):
            self.predicted += 1
            self.covered += pred.low <= truth <= pred.high
        if again is not None and again != UNDECIDED:
            self.aa_decided += 1
            self.aa_same += again == full
        if update == UNDECIDED:
            return
        self.decided += 1
        self.same += update == full
        self.full_undecided += full == UNDECIDED
        self.opposite += OPPOSITE.get(update) == full
        self.wrong += wrong(update, truth)

    def __iadd__(self, o: Tally) -> Tally:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(o, f.name))
        return self

    def share(self, n: int, of: int) -> float:
        return n / of if of else math.nan

    @property
    def s(self) -> float:
        """S: the update's decided points with the full matrix's word, over the points it decides."""
        return self.share(self.same, self.decided)


def wrong(word: str, truth: float, m: float = MIN_SPEEDUP) -> bool:
    """A decided word the true speedup contradicts (decide.decision's outcomes): adopt at or below m, slower at
    1 or more, same outside [1/m, m]."""
    if not math.isfinite(truth):
        return False
    return {"adopt": truth <= m, "slower": truth >= 1.0, "same": not 1 / m <= truth <= m}.get(word, False)


@dataclass
class Fidelity:
    """Tallies per (head B's mean acceptance, C), the trials and the seed."""

    tallies: dict[tuple[float, int], Tally] = field(default_factory=dict)
    trials: int = 0
    seed: int = 0
    truth: dict[tuple[float, int], float] = field(default_factory=dict)
    aa: bool = False

    def pooled(self, al_b: float | None = None) -> Tally:
        out = Tally()
        for (al, _), t in self.tallies.items():
            if al_b is None or al == al_b:
                out += t
        return out


def trial(setups: list[Setup], rng: np.random.Generator, out: Fidelity, again: np.random.Generator | None = None) \
        -> None:
    """One RUN (the baseline and head A), and per head B (setups: one each) the update's run and the full
    matrix (and with `again`, a second one: its launches' stream); each level's words tallied in `out`."""
    run = setups[0]
    z = rng.standard_normal(run.window)
    effect = {BASE: launch_effects(rng, run.launches, run.baseline_cv),
              HEAD_A: launch_effects(rng, run.launches, run.drafter_cv)}
    cells, acceptance, req, win = measure(run, {BASE: None, HEAD_A: run.acceptance(run.al_a, z)}, effect)
    step = StepCost(reference_from_run(decomposition_table(req, win, cells, BASE), cells, acceptance), HEAD_A)
    top = max(run.levels)
    for setup in setups:
        acc_b = setup.acceptance(setup.al_b, z)
        new_cells, new_acc, _, _ = measure(setup, {HEAD_B: acc_b},
                                           {HEAD_B: launch_effects(rng, 1, setup.drafter_cv)}, (top,))
        words = level_words(new_cells, new_acc, HEAD_B, step, MIN_SPEEDUP)
        full = full_matrix(setup, acc_b, rng)
        aa = None if again is None else full_matrix(setup, acc_b, again)
        for w in words:
            key, full_word = (setup.al_b, w.concurrency), word_of(*measured_at(full, HEAD_B, w.concurrency)[1:],
                                                                  MIN_SPEEDUP)
            second = None if aa is None else word_of(*measured_at(aa, HEAD_B, w.concurrency)[1:], MIN_SPEEDUP)
            out.tallies.setdefault(key, Tally()).add(w.word, full_word, out.truth.get(key, math.nan), w.predicted,
                                                     second)


def full_matrix(setup: Setup, acc_b: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    """Head B's full matrix: the baseline and the head at every level, setup.launches launches each, their
    launch effects drawn from `rng` (the baseline's first); its cells."""
    return measure(setup, {BASE: None, HEAD_B: acc_b},
                   {BASE: launch_effects(rng, setup.launches, setup.baseline_cv),
                    HEAD_B: launch_effects(rng, setup.launches, setup.drafter_cv)})[0]


def fidelity(trials: int = TRIALS, seed: int = 0, heads: tuple[float, ...] = HEADS_B,
             acceptance_sd: float = ACCEPTANCE_SD, baseline_cv: float = LAUNCH_CV,
             drafter_cv: float = DRAFTER_CV, aa: bool = False) -> Fidelity:
    """The tallies of `trials` simulated updates (one RUN each, every head of `heads` updated from it), with
    each head's true speedup per level; `aa`: with a second full matrix per head (A/A)."""
    setups = [k26_setup(al, acceptance_sd, baseline_cv, drafter_cv) for al in heads]
    truth = {(s.al_b, c): true_speedup(s, s.al_b, c, c, windows=TRUTH_WINDOWS) for s in setups for c in s.levels}
    out, rng = Fidelity(trials=trials, seed=seed, truth=truth, aa=aa), np.random.default_rng(seed)
    again = np.random.default_rng((seed, 1)) if aa else None  # its own stream: the other draws do not move
    for _ in range(trials):
        trial(setups, rng, out, again)
    return out


def last_line(f: Fidelity) -> str:
    t = f.pooled()
    return (f"update fidelity: the full matrix's words on {100 * t.s:.1f}% of {t.decided} decided points (power "
            f"{100 * t.share(t.decided, t.points):.1f}% of {t.points}; of the decided, the full matrix undecided "
            f"{100 * t.share(t.full_undecided, t.decided):.1f}%, opposite direction "
            f"{100 * t.share(t.opposite, t.decided):.1f}%; against the truth, wrong "
            f"{100 * t.share(t.wrong, t.decided):.1f}% "
            f"(the full matrix {100 * t.share(t.full_wrong, t.full_decided):.1f}% of its {t.full_decided}), the "
            f"predicted 95% interval holds it at {100 * t.share(t.covered, t.predicted):.1f}% of {t.predicted}) over "
            f"{f.trials} trials (seed {f.seed})")


def aa_line(f: Fidelity) -> str:
    """A/A: a second full matrix's words against the first's, as S counts the update's."""
    t = f.pooled()
    return (f"A/A: a second full matrix (the same prompts, new launches) has the first's words on "
            f"{100 * t.share(t.aa_same, t.aa_decided):.1f}% of its {t.aa_decided} decided points (power "
            f"{100 * t.share(t.aa_decided, t.points):.1f}%): the reference repeats its own word")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.update_fidelity", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=TRIALS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--al-b", default=",".join(f"{x:g}" for x in HEADS_B), help="the new heads' mean acceptances")
    p.add_argument("--acceptance-sd", type=float, default=ACCEPTANCE_SD, help="head A's SD over prompts")
    p.add_argument("--drafter-cv", type=float, default=DRAFTER_CV, help="each head's between-launch CV")
    p.add_argument("--no-aa", action="store_true", help="without the second full matrix (A/A; about 40%% faster)")
    a = p.parse_args(argv)
    heads = tuple(float(x) for x in a.al_b.split(","))
    if a.trials < 1 or min(heads) <= 1:
        p.error("--trials >= 1 and every --al-b > 1")
    f = fidelity(a.trials, a.seed, heads, a.acceptance_sd, LAUNCH_CV, a.drafter_cv, aa=not a.no_aa)
    print(f"K2.6-shaped: head A AL {AL_A:g} on the public curve, heads B AL {a.al_b}, acceptance SD "
          f"{a.acceptance_sd:g} over {WINDOW} prompts, O = {OUT}, launch CV baseline {100 * LAUNCH_CV:g}%, drafters "
          f"{100 * a.drafter_cv:g}%, RUN and the full matrix {LAUNCHES} launches, the update 1 launch at "
          f"C={max(k26_setup(heads[0]).levels)}; min_speedup {MIN_SPEEDUP}")
    print("| head B AL | C | true speedup | update decides | full matrix's word | full undecided | opposite | "
          "wrong | interval holds the truth | full matrix decides |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (al, c), t in sorted(f.tallies.items()):
        print(f"| {al:g} | {c} | {f.truth[(al, c)]:.3f} | {100 * t.share(t.decided, t.points):.1f}% | "
              f"{100 * t.s:.1f}% | {100 * t.share(t.full_undecided, t.decided):.1f}% | "
              f"{100 * t.share(t.opposite, t.decided):.1f}% | {100 * t.share(t.wrong, t.decided):.1f}% | "
              f"{100 * t.share(t.covered, t.predicted):.1f}% | {100 * t.share(t.full_decided, t.points):.1f}% |")
    if f.aa:
        print(aa_line(f))
    print(last_line(f))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a variance history buys a one-launch run: per concurrency, the smallest speedup its verdict can adopt
and the largest it can call slower (docs/metrics.md, "What a calibration buys").

`specbench calibrate` prints it before and after the entry it adds ("a one-launch run can now adopt from
1.28x at C=1, C=4 and C=8"). Nothing is re-derived here: each level's claim is decided as the report decides
it, by the intervals' own functions. The run is the config's sweep launched once per variant (its repeats
per cell) with every point of the level at the same true speedup s, each window measuring exactly its
expected throughput (one window a cell: s and 1; r windows: a spread whose sample variance is the history's
repeat variance); its mix interval is `decide.primary.mix_interval` with the history's components, re-drawn at
the family's level (`decide.family.family_level`, the verdict table's claims: every drafter at every level it
measures) and classified by `decide.primary.family_outcome`. The smallest adoptable speedup is the smallest s
whose word is adopt (found by bisection on ln s, rounded up to 0.01), the largest slower the largest s whose
word is slower (rounded down).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specbench.config import RunConfig
from specbench.decide.decision import ALPHA, Outcome
from specbench.decide.family import ClaimShape, FamilyLevel, HistoryShape, family_level
from specbench.decide.intervals import LaunchVariance
from specbench.decide.primary import Windows, family_outcome, mix_interval
from specbench.pricing.planner import make_plan
from specbench.stores.variance_history import Calibration

S_MAX = 100.0  # no adoptable speedup below this: "nothing can be adopted"
STEPS = 60  # bisection steps on ln s: far below the 0.01 the result is rounded to


@dataclass(frozen=True)
class LevelPrice:
    """One concurrency level of a one-launch run: the smallest true speedup its word adopts (inf: none below
    S_MAX) and the largest it calls slower (0: none), with the mix interval's df."""

    concurrency: int
    adopt_from: float
    slower_below: float
    df: float


def _windows(value: float, repeats: int, repeat_var: float) -> dict[tuple[int, int], float]:
    """One launch's windows of a cell whose mean is `value`: r equally spaced values whose sample variance
    is value^2 x repeat_var (one window: the value)."""
    if repeats < 2:
        return {(1, 1): value}
    z = [i - (repeats - 1) / 2 for i in range(repeats)]
    sd = math.sqrt(sum(x * x for x in z) / (repeats - 1))
    cv = math.sqrt(repeat_var) if math.isfinite(repeat_var) and repeat_var > 0 else 0.0
    return {(1, i + 1): value * (1 + cv * x / sd) for i, x in enumerate(z)}


def _outcome(s: float, points: int, repeats: int, cal: LaunchVariance, level: FamilyLevel,
             min_speedup: float) -> tuple[Outcome, float]:
    """The word (and df) of a level whose `points` points all run at true speedup s."""
    pts: list[tuple[float, Windows, Windows]] = [
        (s, _windows(s, repeats, cal.repeat_rel_var), _windows(1.0, repeats, cal.repeat_rel_var))] * points
    mix = mix_interval(pts, cal)
    if not (math.isfinite(mix.low) and math.isfinite(mix.high)):
        return Outcome.UNDECIDED, math.nan
    return family_outcome(mix.low, mix.high, mix.df, level, min_speedup), mix.df


def _smallest(holds: Callable[[float], bool], lo: float, hi: float) -> float:
    """The smallest x in [lo, hi] where `holds` (false at lo, true at hi, monotone), by bisection on ln x."""
    a, b = math.log(lo), math.log(hi)
    for _ in range(STEPS):
        mid = (a + b) / 2
        a, b = (a, mid) if holds(math.exp(mid)) else (mid, b)
    return math.exp(b)


def level_prices(cfg: RunConfig, history: Calibration | None) -> list[LevelPrice]:
    """Each concurrency level's smallest adoptable and largest slower speedup for a one-launch run of `cfg`
    (its repeats per cell) whose intervals carry `history` (None: no launch variance, nothing is decided).
    Empty for an open-loop sweep (its claims are per rate) or a config without drafters."""
    s = cfg.sweep
    drafters = [v for v in cfg.variants if not v.baseline]
    if s.load.open or not drafters:
        return []
    levels = sorted(set(s.concurrency))
    points = max(1, make_plan(cfg, history).points // (len(levels) * len(s.temperatures)))
    r = s.repeats if s.adaptive is None else s.adaptive.max_repeats
    if history is None or not (history.df > 0 and history.rel_var >= 0):
        return [LevelPrice(c, math.inf, 0.0, math.nan) for c in levels]
    cal = history.variance("history")
    shapes = [ClaimShape(v.name, (c, t), float(points), 1, 1, r, r) for v in drafters for c in levels
              for t in s.temperatures if v.max_concurrency is None or c <= v.max_concurrency]
    level = family_level(shapes, ALPHA, None, HistoryShape(history.rel_var, history.df, history.repeat_rel_var,
                                                           history.repeat_df))
    m = cfg.verdict.min_speedup

    def word(x: float) -> Outcome:
        return _outcome(x, points, r, cal, level, m)[0]

    # every level has the same points, repeats and history, so one edge serves them all; the list keeps one
    # entry per level measured by some drafter (a level's claims differ only in which drafters they hold)
    up = _smallest(lambda x: word(x) is Outcome.ADOPT, 1.0, S_MAX) if word(S_MAX) is Outcome.ADOPT else math.inf
    down = 1 / _smallest(lambda x: word(1 / x) is Outcome.SLOWER, 1.0, S_MAX) \
        if word(1 / S_MAX) is Outcome.SLOWER else 0.0
    price = (math.ceil(up * 100 - 1e-9) / 100 if math.isfinite(up) else math.inf, math.floor(down * 100 + 1e-9) / 100,
             _outcome(1.0, points, r, cal, level, m)[1])
    return [LevelPrice(c, *price) for c in levels if any(v.max_concurrency is None or c <= v.max_concurrency
                                                         for v in drafters)]


def _levels(cs: Sequence[int]) -> str:
    names = [f"C={c}" for c in cs]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def describe(prices: Sequence[LevelPrice]) -> str:
    """"adopt from 1.28x at C=1 and C=4, from 1.30x at C=8; call slower below 0.78x at C=1, ..." (levels with
    the same figure together); "decide nothing ..." when no level can adopt or be slower."""
    if not prices or all(not math.isfinite(p.adopt_from) and p.slower_below <= 0 for p in prices):
        return "decide nothing (no launch variance in its intervals: indicative only)"

    def grouped(values: list[tuple[str, int]]) -> str:
        by: dict[str, list[int]] = {}
        for text, c in values:
            by.setdefault(text, []).append(c)
        return ", ".join(f"{text} at {_levels(cs)}" for text, cs in by.items())

    adopt = grouped([(f"from {p.adopt_from:.2f}x" if math.isfinite(p.adopt_from) else "nothing", p.concurrency)
                     for p in prices])
    slower = grouped([(f"below {p.slower_below:.2f}x" if p.slower_below > 0 else "nothing", p.concurrency)
                      for p in prices])
    return f"adopt {adopt}; call slower {slower}"

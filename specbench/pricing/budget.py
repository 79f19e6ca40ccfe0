"""`specbench plan CONFIG --budget GPU_HOURS`: the design that decides the most claims within a budget.

The search runs over launches, repeats, a calibration of the baseline first (its launches buy the launch
variance's df for a one-launch run), a seeded stratified prompt subset at the slow levels (`sweep.subset`)
and, only where `--may-drop` allows, fewer output lengths or levels. Each candidate is priced as `plan`
prices a config (pricing.planner) and judged per level by the expected half-width of ln S at the family's
level (decide.family.family_level, as the verdict draws it) from the variance components, the subset's
sampling variance (decide.sampling) and the design (docs/guide.md, "Planning for a budget"). With
`--target T` a claim counts as decidable where a drafter at T would be adopted (m exp(h) <= T); without it,
every claim with an interval. The best decides the most claims, keeps the most, has the lowest worst (then
mean) smallest adoptable speedup, then costs least. Pure: config and history in, a `BudgetPlan` out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from specbench.config import RunConfig, SubsetConfig
from specbench.decide.decision import ALPHA, Components
from specbench.decide.family import ClaimShape, FamilyLevel, HistoryShape, family_level
from specbench.decide.sampling import subset_variance
from specbench.decide.stats import satterthwaite_df
from specbench.plan.subset import level_prompt_count
from specbench.plan.windows import category_passes, level_requests
from specbench.pricing.planner import (
    applicable,
    category_prompts,
    make_plan,
    point_seconds,
    priced_output_lens,
    variance_components,
)
from specbench.stores.calibration import PROBE_REPEATS
from specbench.stores.variance_history import Calibration

LAUNCHES = (1, 2, 3, 4)
REPEATS = (1, 2, 3)
CALIBRATION = (0, *range(3, 21))  # baseline launches of a `specbench calibrate` before a one-launch run
SUBSET_SIZES = (*range(2, 17), 24)  # prompts per category at the subset's levels
DROPPABLE = ("levels", "lengths")
MAX_DROPPED_LEVELS = 2


@dataclass(frozen=True)
class BudgetDesign:
    """One candidate: per variant `launches` x `repeats`, `calibration` baseline launches first (0: none), the
    subset (None: every level sends every prompt), the output lengths and levels measured."""

    launches: int
    repeats: int
    calibration: int
    subset: SubsetConfig | None
    output_lens: tuple[int | str, ...]
    concurrency: tuple[int, ...]


@dataclass(frozen=True)
class LevelPrice:
    """What a design can say at one level: the half-width of ln S at the family's level, the smallest
    adoptable speedup m exp(h) and the largest "slower" exp(-h); NaN: no interval (one launch, no history)."""

    concurrency: int
    claims: int  # drafters measured at this level
    half_width: float
    adopt_from: float
    slower_below: float
    subset: bool


@dataclass(frozen=True)
class BudgetChoice:
    design: BudgetDesign
    seconds: float  # one after another: every variant's launches, and the calibration
    calibration_s: float  # ... of which the calibration's probe launches
    gpu_hours: float
    levels: list[LevelPrice]
    decided: int  # claims whose smallest adoptable speedup is at most the target
    claims: int
    family: str  # how the family's level was obtained (FamilyLevel.method)

    def score(self) -> tuple[float, ...]:
        """The search's order (the module's docstring)."""
        adopt = [lv.adopt_from for lv in self.levels for _ in range(lv.claims)]
        finite = bool(adopt) and all(map(math.isfinite, adopt))
        worst = max(adopt) if finite else math.inf
        mean = math.fsum(math.log(a) for a in adopt) / len(adopt) if finite else math.inf
        return self.decided, self.claims, -worst, -mean, -self.seconds


@dataclass(frozen=True)
class BudgetPlan:
    name: str
    budget_h: float
    target: float | None  # --target: a claim counts when a drafter at it would be adopted (None: any interval)
    min_speedup: float
    best: BudgetChoice | None  # None: no candidate within the budget
    next_hour: BudgetChoice | None  # the best at budget + 1 GPU-hour
    considered: int  # candidates priced
    within: int  # ... of them within the budget
    components_source: str
    prompt_cv: float | None
    may_drop: frozenset[str]
    gpus: float  # GPU-hours per hour of one variant (GPUs a node x nodes)


@dataclass(frozen=True)
class _Facts:
    """What every candidate shares, read once."""

    cfg: RunConfig
    history: Calibration | None
    counts: list[int | None]  # prompts of each category
    lens: list[tuple[int | str, float]]  # (config value, priced tokens)
    caps: dict[str, int]  # variant -> its max_concurrency
    drafters: list[str]
    baseline: str
    startup_s: float
    gpus: float
    comps: Components
    history_df: float  # the launch variance's df from the history (0: none)
    repeat_df: float
    per_point: int  # input lengths x temperatures


def _facts(cfg: RunConfig, history: Calibration | None) -> tuple[_Facts | None, str]:
    plan = make_plan(cfg, history)
    speeds, comps_history = applicable(cfg, history)
    comps, source = variance_components(cfg, comps_history)
    if comps is None or plan.startup.value is None or plan.measuring_s is None or plan.gpus.value is None:
        missing = "variance components" if comps is None else "startup" if plan.startup.value is None else \
            "per-request speeds" if plan.measuring_s is None else "GPUs a node"
        return None, f"cannot price a budget without {missing} ({source if comps is None else 'see plain plan'})"
    pooled = comps_history is not None and comps_history.repeat_df > 0
    hist, rep_df = (comps_history.df, comps_history.repeat_df) if comps_history and pooled else (0.0, math.inf)
    lens = list(zip(_ordered(cfg), priced_output_lens(cfg)))
    s = cfg.sweep
    return _Facts(cfg, speeds, category_prompts(cfg), lens,
                  {v.name: v.max_concurrency or max(s.concurrency) for v in cfg.variants},
                  [v.name for v in cfg.variants if not v.baseline], cfg.baseline.name, plan.startup.value,
                  plan.gpus.value * plan.nodes, comps, hist, rep_df,
                  len(s.input_lens or [None]) * len(s.temperatures)), source


def _ordered(cfg: RunConfig) -> list[int | str]:
    """The output lengths in the order planner.priced_output_lens prices them: the fixed ones, then natural."""
    return [*cfg.sweep.fixed_output_lens, *(o for o in cfg.sweep.output_lens if not isinstance(o, int))]


def _window(f: _Facts, d: BudgetDesign, k: int | None, c: int, tokens: float) -> float:
    """One window at C of a category of k prompts (None: unknown here): planner.point_seconds at its requests."""
    kept = None if k is None else level_prompt_count(d.subset, k, c)
    n = level_requests(f.cfg.sweep, c) if kept is None else kept * category_passes(f.cfg.sweep, kept, c)
    return point_seconds(f.cfg, f.history, tokens, c, n) or 0.0


def _measuring(f: _Facts, d: BudgetDesign, cap: int) -> float:
    """One repeat of the design's sweep for a variant capped at `cap`."""
    lens = [t for o, t in f.lens if o in d.output_lens]
    return f.per_point * sum(_window(f, d, k, c, t) for k in f.counts for c in d.concurrency if c <= cap for t in lens)


def _calibration_seconds(f: _Facts, d: BudgetDesign) -> float:
    """The calibration as `calibrate OUT --probe` runs it (stores.calibration.probe_config): each launch a startup
    and PROBE_REPEATS windows of the baseline at one point (first category, first length, highest level). A
    launch's effect is one factor of all its points (decide/primary.py), so one short point measures it."""
    if not d.calibration:
        return 0.0
    top = max(c for c in d.concurrency if c <= f.caps[f.baseline])
    window = _window(f, d, f.counts[0] if f.counts else None, top, dict(f.lens)[d.output_lens[0]])
    return d.calibration * (f.startup_s + PROBE_REPEATS * window)


def _cost(f: _Facts, d: BudgetDesign) -> float:
    """Seconds one after another: each variant's launches x (startup + repeats x its sweep), the calibration's."""
    run = sum(d.launches * (f.startup_s + d.repeats * _measuring(f, d, f.caps[v]))
              for v in f.caps if f.caps[v] >= min(d.concurrency))
    return run + _calibration_seconds(f, d)


def _level(f: _Facts, d: BudgetDesign, c: int, level: FamilyLevel | None) -> LevelPrice:
    claims = sum(f.caps[v] >= c for v in f.drafters)
    nan = LevelPrice(c, claims, math.nan, math.nan, math.nan, False)
    points = _points(f, d)
    lv, rv = f.comps.launch.var, f.comps.repeat.var
    n, r = d.launches, d.repeats
    sub = d.subset is not None and c <= d.subset.up_to and any(
        k is not None and level_prompt_count(d.subset, k, c) < k for k in f.counts)
    extra = []
    if sub and d.subset is not None:
        kept, total = [level_prompt_count(d.subset, k or 1, c) for k in f.counts], [k or 1 for k in f.counts]
        extra = [(subset_variance(f.cfg.estimates.prompt_cv or 0.0, kept, total), math.inf)]
    if n >= 2:
        terms = [(2 * (lv + rv / (r * points)) / n, 2.0 * (n - 1))]
    else:
        launch_df = f.history_df + max(0, d.calibration - 1)
        if not launch_df > 0:
            return nan
        rep_df = 2.0 * points * (r - 1) if r >= 2 else f.repeat_df
        terms = [(2 * lv, launch_df), (2 * rv / (r * points), rep_df)]
    terms += extra
    var = math.fsum(v for v, _ in terms)
    df = satterthwaite_df(terms)
    if level is None or df is None or not var > 0:
        return nan
    half = level.quantile(df) * math.sqrt(var)
    m = f.cfg.verdict.min_speedup
    return LevelPrice(c, claims, half, m * math.exp(half), math.exp(-half), sub)


def _points(f: _Facts, d: BudgetDesign) -> int:
    return len(f.counts) * sum(o in d.output_lens for o, _ in f.lens) * f.per_point


def _family(f: _Facts, d: BudgetDesign) -> FamilyLevel | None:
    claims = [ClaimShape(v, c, float(_points(f, d)), d.launches, d.launches, d.repeats, d.repeats)
              for v in f.drafters for c in d.concurrency if f.caps[v] >= c]
    if d.launches >= 2:
        return family_level(claims, ALPHA, None, None)  # no launch sharing known before the run: Bonferroni
    launch_df = f.history_df + max(0, d.calibration - 1)
    if not launch_df > 0:
        return None
    hist = HistoryShape(f.comps.launch.var, launch_df, f.comps.repeat.var,
                        f.repeat_df if math.isfinite(f.repeat_df) else 1e6)
    return family_level(claims, ALPHA, None, hist)


def evaluate(f: _Facts, d: BudgetDesign, target: float | None) -> BudgetChoice:
    """A design's price and what it can say; `target` None: every claim with an interval counts as decidable
    (the search then minimises the worst smallest adoptable speedup)."""
    seconds = _cost(f, d)
    level = _family(f, d)
    levels = [_level(f, d, c, level) for c in d.concurrency]
    decided = sum(lv.claims for lv in levels if lv.adopt_from <= (math.inf if target is None else target))
    return BudgetChoice(d, seconds, _calibration_seconds(f, d), seconds / 3600 * f.gpus, levels, decided,
                        sum(lv.claims for lv in levels),
                        level.method if level is not None else "none (one launch, no history)")


def _subsets(f: _Facts, levels: Sequence[int]) -> Iterable[SubsetConfig | None]:
    yield None
    if f.cfg.estimates.prompt_cv is None:  # a subset's sampling variance cannot be priced without it
        return
    most = max((k for k in f.counts if k is not None), default=0)
    for up_to, n in itertools.product(levels, SUBSET_SIZES):
        if up_to <= n < most:  # no prompt in flight twice at a subset level, and fewer than the set
            yield SubsetConfig(up_to=up_to, per_category=n)


def _shapes(f: _Facts, may_drop: frozenset[str]) -> Iterable[tuple[tuple[int | str, ...], tuple[int, ...]]]:
    lens = [o for o, _ in f.lens]
    levels = list(f.cfg.sweep.concurrency)
    len_sets = [tuple(x) for k in range(len(lens), 0, -1) for x in itertools.combinations(lens, k)] \
        if "lengths" in may_drop else [tuple(lens)]
    level_sets = [tuple(x) for k in range(len(levels), max(0, len(levels) - MAX_DROPPED_LEVELS - 1), -1)
                  for x in itertools.combinations(levels, k) if k > 0] if "levels" in may_drop else [tuple(levels)]
    return itertools.product(len_sets, level_sets)


def candidates(f: _Facts, may_drop: frozenset[str]) -> Iterable[BudgetDesign]:
    for (lens, levels), n, r in itertools.product(_shapes(f, may_drop), LAUNCHES, REPEATS):
        for k in (CALIBRATION if n == 1 else (0,)):
            for sub in _subsets(f, levels):
                yield BudgetDesign(n, r, k, sub, lens, levels)


def best_within(f: _Facts, budget_h: float, target: float | None, may_drop: frozenset[str],
                ) -> tuple[BudgetChoice | None, int, int]:
    """(the best design within `budget_h` GPU-hours, candidates priced, candidates within the budget)."""
    best: BudgetChoice | None = None
    seen = within = 0
    for d in candidates(f, may_drop):
        seen += 1
        seconds = _cost(f, d)
        if seconds / 3600 * f.gpus > budget_h:
            continue
        within += 1
        choice = evaluate(f, d, target)
        if best is None or choice.score() > best.score():
            best = choice
    return best, seen, within


def plan_budget(cfg: RunConfig, history: Calibration | None, budget_h: float, target: float | None = None,
                may_drop: Iterable[str] = ()) -> BudgetPlan | str:
    """The best design within `budget_h` GPU-hours and the best with one GPU-hour more; a sentence when the
    config cannot be priced (no variance components, startup, speeds or GPUs) or is an open loop."""
    if bad := (drop := frozenset(may_drop)) - set(DROPPABLE):
        return f"--may-drop: unknown {', '.join(sorted(bad))} (known: {', '.join(DROPPABLE)})"
    if cfg.sweep.load.open:
        return "plan --budget: the search decides closed-loop speedups per concurrency (sweep.load.kind: closed)"
    f, source = _facts(cfg, history)
    if f is None:
        return f"plan --budget: {source}"
    best, seen, within = best_within(f, budget_h, target, drop)
    more, _, _ = best_within(f, budget_h + 1, target, drop)
    return BudgetPlan(cfg.name, budget_h, target, cfg.verdict.min_speedup, best, more, seen, within, source,
                      cfg.estimates.prompt_cv, drop, f.gpus)

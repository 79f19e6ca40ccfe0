"""`specbench plan CONFIG`: before any launch, what a config will cost and what it can decide.

Per variant: launches x (engine startup + repeats x the sweep's measuring time); the sweep's measuring
time is, per window, (requests / C) x output_len / per-request speed (a closed loop keeps C requests in
flight, so a wave of C lasts about one request; a window's requests are whole passes of its category's
prompts, as many as each C needs: plan.windows.category_passes). The expected speedup interval follows from
the variance components (the hardware's pooled history first, else the config's `estimates`), and the
cost-optimal launches x repeats from Kalibera & Jones 2013 (metrics.decision.optimal_design). Pure: config
and history in, a `CostPlan` out; `render` turns it into text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from specbench.config import RunConfig
from specbench.decide.change import gate_launches
from specbench.decide.decision import (
    Components,
    Design,
    Estimate,
    Plan,
    component_interval,
    log_ratio_variance,
    optimal_design,
    t_quantile,
)
from specbench.plan.windows import capped_variants
from specbench.stores.variance_history import Calibration, model_key

COMPARE_THRESHOLD = 0.05  # `specbench compare` / `history`'s default --threshold

# What benchmarks/decision_cost.py measured (docs/metrics.md, "What it saves"): the reason `plan` recommends
# sequential measurement (until: decided) over the fixed cost-optimal design, in one sentence.
SEQUENTIAL_VS_FIXED = ("its stated error rates hold when the variance history is misspecified and the fixed "
                       "design's do not: in benchmarks/decision_cost.py, with the history's SDs halved, the "
                       "sequential rule's worst boundary error stays at 1.5% while the fixed design says \"same\" "
                       "for a drafter at the margin in 10.9% of points (coverage 0.92), at 58% of its GPU-hours "
                       "and with fewer points decided (docs/metrics.md, \"What it saves\")")
SEQUENTIAL_START, SEQUENTIAL_MAX = 2, 10  # the sequential design decision_cost simulates


@dataclass(frozen=True)
class Source:
    value: float | None
    source: str  # where the figure comes from ("history ...", "config estimates.x", "unknown")


@dataclass(frozen=True)
class CostPlan:
    name: str
    variants: list[str]
    points: int
    design: Design
    startup: Source
    measuring_s: float | None  # one repeat of the sweep, per variant
    rate_source: str
    components: Components | None
    components_source: str
    half_width: float | None  # expected half-width of ln(speedup) at every point
    indicative: bool  # no launch variance in the intervals (1 launch and no history)
    optimal: Plan | None
    min_speedup: float
    sequential: tuple[int, int] | None = None  # (launches to start, max_launches) with until: decided
    # variant -> (its max_concurrency, its points, one repeat of its sweep) for a variant that measures fewer
    capped: dict[str, tuple[int, int, float | None]] = field(default_factory=dict)
    # launches per variant (at the design's repeats) with which `specbench compare` of two such runs has 80%
    # power in every drafter cell (change.gate_launches); None: none within 30, or no components
    compare_launches: int | None = None
    open_loop: bool = False  # until: decided decides closed-loop speedups only
    gpus: Source = Source(None, "unknown")  # GPUs a node (a node-hour is that many GPU-hours)
    nodes: int = 1  # nodes a variant holds (engine.nodes): an hour of it is that many node-hours

    @property
    def variant_s(self) -> float | None:
        """One uncapped variant: its launches x (startup + repeats x one repeat of the sweep)."""
        return self._cost(self.measuring_s)

    def cost_of(self, variant: str) -> float | None:
        """One variant's cost (a capped variant measures only its points)."""
        return self._cost(self.capped[variant][2] if variant in self.capped else self.measuring_s)

    @property
    def total_s(self) -> float | None:
        costs = [self.cost_of(v) for v in self.variants]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    def _cost(self, measuring: float | None) -> float | None:
        if measuring is None:
            return None
        return self.design.launches * ((self.startup.value or 0.0) + self.design.repeats * measuring)


def _categories(cfg: RunConfig) -> int:
    """Prompt categories the sweep will measure (read from the prompt sets; their declared lists when a
    set cannot be read here)."""
    return len(category_prompts(cfg))


def category_prompts(cfg: RunConfig) -> list[int | None]:
    """The prompt count of each category the sweep measures (None where a set cannot be read here)."""
    from collections import Counter

    from specbench.plan.prompts import load_prompts

    try:
        return list(Counter(p.category for p in load_prompts(cfg.sweep.prompts)).values())
    except Exception:  # a set that needs a wheel or file this machine lacks: what the config names
        return [None] * sum(len(s.categories or []) or 1 for s in cfg.sweep.prompts)


CHARS_PER_TOKEN = 4.0  # output_lens natural: plan prices a reference answer at this (it has no tokenizer)
NATURAL_UNKNOWN_TOKENS = 512  # ... and at this when the prompt set cannot be read here


def priced_output_lens(cfg: RunConfig) -> list[float]:
    """The output lengths to price: the fixed ones, and for `natural` the mean reference answer length of
    the sweep's prompts (characters / CHARS_PER_TOKEN: an estimate, the run counts target tokens)."""
    from specbench.config import NATURAL
    from specbench.plan.prompts import load_prompts

    out: list[float] = list(cfg.sweep.fixed_output_lens)
    if NATURAL in cfg.sweep.output_lens:
        try:
            refs = [len(p.reference or "") / CHARS_PER_TOKEN for p in load_prompts(cfg.sweep.prompts)]
        except Exception:  # as _category_prompts: a set this machine cannot read
            refs = []
        out.append(max(1.0, sum(refs) / len(refs)) if refs else NATURAL_UNKNOWN_TOKENS)
    return out


def window_requests_count(cfg: RunConfig, prompts: int | None, concurrency: int) -> int:
    """Requests in one closed-loop window at `concurrency` of a category with `prompts` prompts: whole passes
    of its set, as many as the level needs (plan.windows.category_passes); unknown prompts: the level's own
    need (plan.windows.level_requests)."""
    from specbench.plan.subset import level_prompt_count
    from specbench.plan.windows import category_passes, level_requests

    if prompts is None:
        return level_requests(cfg.sweep, concurrency)
    prompts = level_prompt_count(cfg.sweep.subset, prompts, concurrency)  # sweep.subset at the slow levels
    return prompts * category_passes(cfg.sweep, prompts, concurrency)


def _rate(rates: float | dict[int, float], concurrency: int) -> float:
    if not isinstance(rates, dict):
        return rates
    nearest = min(rates, key=lambda c: (abs(math.log(c) - math.log(concurrency)), c))
    return rates[nearest]


def _rates(cfg: RunConfig, history: Calibration | None) -> tuple[float | dict[int, float] | None, str]:
    """Per-request speeds (one figure, or per concurrency) and where they come from."""
    if history is not None and history.rates:
        return {int(k): float(v) for k, v in history.rates.items()}, f"measured ({history.history})"
    return cfg.estimates.per_request_tok_s, "config estimates.per_request_tok_s"


def point_seconds(cfg: RunConfig, history: Calibration | None, output_len: float, concurrency: int,
                  requests: int) -> float | None:
    """One window of a closed-loop point: (requests / C) x output_len / per-request speed at its concurrency
    (None without speeds). `requests`: the window's real request count, whole passes of its category's
    prompts (`window_requests_count`, or `plan.windows.point_requests` for a planned point), never waves x C.
    The plan's measuring time is the sum of these over the sweep's points."""
    rates, _ = _rates(cfg, history)
    return None if rates is None else requests / concurrency * output_len / _rate(rates, concurrency)


def measuring_time(cfg: RunConfig, history: Calibration | None,
               cap: int | None = None) -> tuple[float | None, str]:
    """One repeat of the sweep's measuring time (for a variant capped at `cap`: its points only)."""
    s = cfg.sweep
    rates, where = _rates(cfg, history)
    if rates is None:
        return None, "unknown: set estimates.per_request_tok_s, or calibrate this hardware"
    if s.load.open:  # one mixed point per rate: its arrivals span n / rate, then the last request drains
        n = s.load.warmup_requests + s.load.requests_per_rate
        per_rate = [n / r + o / _rate(rates, 1) for o in priced_output_lens(cfg) for r in (s.load.rates or [])]
        return sum(per_rate) * len(s.input_lens or [None]) * len(s.temperatures), where
    lens = priced_output_lens(cfg)
    per_point = [point_seconds(cfg, history, o, c, window_requests_count(cfg, k, c)) or 0.0
                 for k in category_prompts(cfg) for o in lens for c in s.concurrency
                 if cap is None or c <= cap]
    return sum(per_point) * len(s.input_lens or [None]) * len(s.temperatures), where


def variance_components(cfg: RunConfig, history: Calibration | None) -> tuple[Components | None, str]:
    if history is not None and history.repeat_df > 0:
        return (Components(Estimate(history.rel_var, history.df), Estimate(history.repeat_rel_var, history.repeat_df)),
                f"pooled history {history.history} (launch df {history.df:g}, repeat df {history.repeat_df:g})")
    e = cfg.estimates
    if e.launch_cv is not None and e.repeat_cv is not None:
        return (Components(Estimate(e.launch_cv ** 2, math.inf), Estimate(e.repeat_cv ** 2, math.inf)),
                "config estimates.launch_cv / repeat_cv (stated, not measured)")
    return None, "unknown: no history for this hardware and no estimates.launch_cv / repeat_cv"


def half_width_of(comps: Components, design: Design, history: Calibration | None) -> tuple[float | None, bool]:
    """(expected half-width of ln speedup, indicative). With 2+ launches the run estimates its own
    launch variance (Welch df 2(n - 1)); with one launch only a history supplies it, its components on
    their df (t at the Welch-Satterthwaite df, decision.component_interval), as the run's interval takes them."""
    if design.launches >= 2:
        return t_quantile(2 * (design.launches - 1)) * math.sqrt(log_ratio_variance(comps, design, design)), False
    if history is None:
        return None, True
    lo, hi, _ = component_interval(1.0, comps, design, design)
    return (math.log(hi) if math.isfinite(hi) else None), False


def applicable(cfg: RunConfig, history: Calibration | None) -> tuple[Calibration | None, Calibration | None]:
    """(the history for startup and speeds, the history for variance components). The history is kept
    per hardware of the machine that runs `plan`: its startup and speeds belong to the model it measured,
    so for another model (a GPU matrix planned on a CPU login node) the config's estimates price the run;
    its variance components still stand in, unless the config states its own."""
    if history is None or history.model == model_key(cfg):
        return history, history
    stated = cfg.estimates.launch_cv is not None and cfg.estimates.repeat_cv is not None
    return None, None if stated else history


def gpus_per_node(cfg: RunConfig) -> Source:
    """GPUs a node: engine.gpus as stated, else the launch's TP x PP (engine.args and the baseline's args)
    spread over engine.nodes; unknown for an endpoint specbench does not launch."""
    from specbench.server.engines import ENGINES
    from specbench.server.parallel import parallel_of

    if cfg.engine.gpus is not None:
        return Source(cfg.engine.gpus, "engine.gpus")
    if not ENGINES.get(cfg.engine.kind).launched:
        return Source(None, "unknown: set engine.gpus (an external endpoint's GPUs)")
    par = parallel_of(list(cfg.engine.args) + list(cfg.baseline.args))
    nodes = cfg.engine.nodes
    return Source(math.ceil(par.gpus / nodes), par.source + (f" over {nodes} nodes" if nodes > 1 else ""))


def decidable(half_width: float, min_speedup: float) -> tuple[float, float]:
    """(the smallest speedup a design can adopt, the largest it can call slower) for an expected half-width
    h of ln speedup: adopt needs the interval's low end above m (estimate > m exp(h)), slower its high end
    below 1 (estimate < exp(-h)); decision.classify."""
    return min_speedup * math.exp(half_width), math.exp(-half_width)


def make_plan(cfg: RunConfig, history: Calibration | None) -> CostPlan:
    s = cfg.sweep
    categories = _categories(cfg)
    per_length = len(s.load.rates or []) if s.load.open else categories * len(s.concurrency)
    points = per_length * len(s.input_lens or [None]) * len(s.output_lens) * len(s.temperatures)
    design = Design(s.launches, s.repeats if s.adaptive is None else s.adaptive.max_repeats)
    history, comps_history = applicable(cfg, history)
    if history is not None and history.startup_s > 0:
        startup = Source(history.startup_s, f"measured ({history.history})")
    elif cfg.estimates.startup_s is not None:
        startup = Source(cfg.estimates.startup_s, "config estimates.startup_s")
    else:
        startup = Source(None, "unknown: set estimates.startup_s")
    measuring, rate_source = measuring_time(cfg, history)
    comps, comps_source = variance_components(cfg, comps_history)
    half, indicative = (half_width_of(comps, design, comps_history) if comps is not None
                        else (None, comps_history is None))
    optimal = None
    if comps is not None and measuring is not None and startup.value is not None:
        pooled = comps_history.df if comps_history is not None and comps_history.repeat_df > 0 else 0.0
        optimal = optimal_design(comps, startup.value, measuring, cfg.verdict.min_speedup, prior_df=pooled)
    capped = {name: (cap, points // len(s.concurrency) * sum(c <= cap for c in s.concurrency),
                     measuring_time(cfg, history, cap)[0]) for name, cap in
                     capped_variants(cfg.variants, cfg.sweep.concurrency).items()}
    return CostPlan(name=cfg.name, variants=[v.name for v in cfg.variants], points=points, design=design,
                    startup=startup, measuring_s=measuring, rate_source=rate_source, components=comps,
                    components_source=comps_source, half_width=half, indicative=indicative, optimal=optimal,
                    min_speedup=cfg.verdict.min_speedup,
                    sequential=(s.launches, s.max_launches) if s.until == "decided" else None, capped=capped,
                    gpus=gpus_per_node(cfg), nodes=cfg.engine.nodes,
                    open_loop=s.load.open,
                    compare_launches=gate_launches(comps, design.repeats, COMPARE_THRESHOLD,
                                                   points * max(1, len(cfg.variants) - 1)) if comps else None)


def dur(seconds: float | None) -> str:
    """A duration as the plan prints it: hours from one hour up, else minutes; None: "unknown"."""
    if seconds is None:
        return "unknown"
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"

"""What a variance history buys a one-launch run (pricing/bought.py): per concurrency, the smallest speedup the
verdict can adopt and the largest it can call slower, found through the verdict's own functions."""

from __future__ import annotations

import math

from specbench.config import parse_config
from specbench.decide.decision import ALPHA, Outcome, t_quantile
from specbench.decide.family import ClaimShape, HistoryShape, family_level
from specbench.decide.primary import family_outcome, mix_interval
from specbench.pricing.bought import describe, level_prices
from specbench.stores.variance_history import Calibration

VARIANTS = [{"name": "base", "drafter": "autoregressive", "baseline": True},
            {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}},
            {"name": "eagle", "drafter": "ngram", "params": {"num_tokens": 5}, "max_concurrency": 4}]


def config(variants=VARIANTS, **sweep):
    sw = {"prompts": [{"set": "seed", "categories": ["code", "chat"]}], "output_lens": [64], "concurrency": [1, 4, 8],
          **sweep}
    return parse_config({"name": "demo", "model": {"path": "/models/m"}, "engine": {"kind": "vllm"},
                         "variants": variants, "sweep": {k: v for k, v in sw.items() if v is not None}})


def history(cv: float, df: float, repeat_cv: float = 0.01, repeat_df: float = 11.0) -> Calibration:
    return Calibration(rel_var=cv ** 2, df=df, launches=int(df) + 1, cells=1, hardware={}, engine="vllm", model="m",
                       created="", source_run="probe", repeat_rel_var=repeat_cv ** 2, repeat_df=repeat_df)


def test_without_a_history_a_one_launch_run_decides_nothing() -> None:
    prices = level_prices(config(), None)
    assert [p.concurrency for p in prices] == [1, 4, 8]
    assert all(math.isinf(p.adopt_from) and p.slower_below == 0 for p in prices)
    assert describe(prices) == "decide nothing (no launch variance in its intervals: indicative only)"


def test_the_smallest_adoptable_speedup_is_the_verdicts_own_known_answer() -> None:
    """One launch, one window a cell, P = 2 points a level: var(ln S) = 2 s_L^2 (both sides' launches, the
    history's estimate once) + 2 x (1/2) s_R^2 (every point's repeat, both sides), re-drawn at the family's
    max-t level for the 5 claims (ngram at 3 levels, eagle at 2): adopt_from = m exp(q sqrt(var))."""
    cal = history(0.042, 10)
    prices = level_prices(config(), cal)
    shapes = [ClaimShape(v, (c, 0.0), 2.0, 1, 1, 1, 1) for v, cs in (("ngram", (1, 4, 8)), ("eagle", (1, 4)))
              for c in cs]
    level = family_level(shapes, ALPHA, None, HistoryShape(cal.rel_var, cal.df, cal.repeat_rel_var, cal.repeat_df))
    assert level.method.startswith("max-t")
    mix = mix_interval([(1.0, {(1, 1): 1.0}, {(1, 1): 1.0})] * 2, cal.variance("history"))
    half = math.log(mix.high) * level.quantile(mix.df) / t_quantile(mix.df)
    assert math.isclose(half, level.quantile(mix.df) * math.sqrt(2 * cal.rel_var + cal.repeat_rel_var), rel_tol=1e-6)
    for p in prices:
        assert math.isclose(p.adopt_from, 1.05 * math.exp(half), abs_tol=0.01)
        assert math.isclose(p.slower_below, math.exp(-half), abs_tol=0.01)
        assert p.df == mix.df
        # the verdict's word on each side of the edge, as the report reads it
        for s, word in ((p.adopt_from, Outcome.ADOPT), (p.adopt_from - 0.01, Outcome.UNDECIDED)):
            m = mix_interval([(s, {(1, 1): s}, {(1, 1): 1.0})] * 2, cal.variance("history"))
            assert family_outcome(m.low, m.high, m.df, level, 1.05) is word
    assert describe(prices).startswith(f"adopt from {prices[0].adopt_from:.2f}x at C=1, C=4 and C=8; call slower below")


def test_more_degrees_of_freedom_buy_smaller_speedups() -> None:
    """The probe's point: the same launch CV on df 2 (a 3-launch calibration) and on df 10 (an 11-launch
    probe); a noisier machine needs a larger speedup."""
    cfg = config()
    df2, df10 = level_prices(cfg, history(0.042, 2))[0], level_prices(cfg, history(0.042, 10))[0]
    loud = level_prices(cfg, history(0.128, 10))[0]
    assert df2.adopt_from > df10.adopt_from > 1.05 and loud.adopt_from > df10.adopt_from
    assert df2.slower_below < df10.slower_below < 1


def test_repeats_in_the_run_enter_through_their_own_windows() -> None:
    """Two windows a cell: each point's repeat variance is the run's own (df 1 a side, windows spread as the
    history's repeat variance), the launch's the history's: still a finite price."""
    prices = level_prices(config(repeats=2), history(0.042, 10, repeat_cv=0.01))
    assert all(math.isfinite(p.adopt_from) and p.adopt_from > 1.05 for p in prices)


def test_an_open_loop_sweep_is_not_priced() -> None:
    cfg = config(VARIANTS[:2], concurrency=None, load={"kind": "open", "rates": [1.0, 2.0], "max_in_flight": 8})
    assert level_prices(cfg, history(0.04, 10)) == []

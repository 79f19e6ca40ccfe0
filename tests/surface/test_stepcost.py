"""The speedup surface as a time model (issue 38, item 3): a request's time is prefill + (O - 1) / a steps of a
step cost that does not depend on a, so 1/S = p + q/a. Known answers from synthetic runs built from step times."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specbench.metrics.forced_surface import Curve, TimeModel, break_even_acceptance, fit, held_out
from specbench.surface.derive import derived_name
from specbench.surface.table import break_even_table, group_curves, surface_table
from tests.fixtures_surface import cells_frame

# a synthetic configuration from step times (s): baseline prefill 0.1 and step 0.02, the drafter's prefill 0.12
# and step 0.03 (its cost does not depend on the acceptance); 65 output tokens, so 64 decode steps at AL 1
OUT, PB, SB, PS, SS = 65, 0.1, 0.02, 0.12, 0.03
T_BASE = PB + (OUT - 1) * SB  # 1.38 s


def _speedup(a: float, step: float = SS) -> float:
    return T_BASE / (PS + (OUT - 1) / a * step)


def _cells(points: dict[float, float], read_back: dict[float, float] | None = None, c: int = 4):
    return cells_frame([dict(variant=derived_name("e", a), output_len=OUT, concurrency=c, speedup=s,
                             speedup_ci_low=s / 1.1, speedup_ci_high=s * 1.1,
                             acceptance_length=(read_back or {}).get(a, a)) for a, s in points.items()])


def test_the_model_reproduces_a_run_built_from_known_step_times_exactly():
    surface = surface_table(_cells({a: _speedup(a) for a in (1.0, 2.0, 4.0)}))
    row = break_even_table(surface).iloc[0]
    assert row["prefill_term"] == pytest.approx(PS / T_BASE) and row["decode_term"] == pytest.approx(64 * SS / T_BASE)
    # S(a*) = 1: T_spec(a*) = T_base, a* = 64 x 0.03 / (1.38 - 0.12)
    assert row["break_even_acceptance"] == pytest.approx(64 * SS / (T_BASE - PS))
    assert row["heldout_acceptance"] == 2.0 and row["heldout_error"] == pytest.approx(0.0, abs=1e-12)
    (curve,) = group_curves(surface, "e").values()
    for a in (1.5, 3.0, 5.0):  # between and beyond the forced lengths
        assert curve.at(a) == pytest.approx(_speedup(a))
    # concave in a (hyperbolic), not ln S linear: the middle lies above the chord
    assert curve.at(2.5) > (curve.at(1.0) + curve.at(4.0)) / 2


def test_without_prefill_the_model_is_the_decompositions_identity():
    # no prefill and no tail, the decomposition's residual is 1 and speedup = AL / r: the model's q is r
    r = SS / SB
    assert TimeModel(0.0, r).at(3.0) == pytest.approx(3.0 / r)
    assert fit([1.0, 2.0, 3.0], [a / r for a in (1.0, 2.0, 3.0)]) == TimeModel(pytest.approx(0.0), pytest.approx(r))
    assert TimeModel(0.0, r).break_even() == pytest.approx(r)


def test_a_point_that_did_not_read_back_is_dropped_with_the_reason():
    good = {a: _speedup(a) for a in (1.0, 2.0, 4.0)}
    # AL 3 was forced but the engine accepted 2.5: its speedup is not the model's at 3
    surface = surface_table(_cells({**good, 3.0: _speedup(2.5)}, read_back={3.0: 2.5}))
    assert list(surface["readback"]) == ["ok", "ok", "mismatch", "ok"]
    row = break_even_table(surface).iloc[0]
    clean = break_even_table(surface_table(_cells(good))).iloc[0]
    assert row["points"] == 3 and row["dropped"] == "AL 3 (mismatch: read back 2.50)"
    for col in ("break_even_acceptance", "prefill_term", "decode_term", "heldout_error"):
        assert row[col] == pytest.approx(clean[col], abs=1e-12)
    assert [c.al for c in group_curves(surface, "e").values()] == [(1.0, 2.0, 4.0)]
    from specbench.surface.render import surface_markdown

    md = surface_markdown(surface, break_even_table(surface))
    assert "| 4 | O=65 | 3 | 2.50 (mismatch, dropped) |" in md
    assert "- dropped at C=4: AL 3 (mismatch: read back 2.50)" in md


def test_the_held_out_error_is_the_models_error_at_the_middle_length():
    points = {a: _speedup(a) for a in (1.0, 2.0, 4.0)}
    points[2.0] *= 1.05  # the shape is off by 5% at the middle
    row = break_even_table(surface_table(_cells(points))).iloc[0]
    assert row["heldout_acceptance"] == 2.0 and row["heldout_measured"] == pytest.approx(1.05 * _speedup(2.0))
    assert row["heldout_predicted"] == pytest.approx(_speedup(2.0))  # fitted on 1 and 4 alone: exact there
    assert row["heldout_error"] == pytest.approx(1 / 1.05 - 1)
    assert held_out([1.0, 2.0], [0.5, 0.8]) is None  # two lengths determine the model: nothing to check
    assert held_out([1.0, 1.5, 2.0, 3.0], [1, 1, 1, 1], index=0).al == 1.0  # any point can be held out
    from specbench.surface.render import surface_markdown

    md = surface_markdown(surface_table(_cells(points)), break_even_table(surface_table(_cells(points))))
    assert "Held-out error of the time model: C=4 O=65: -4.8%." in md


def test_break_even_beyond_k_plus_one_and_the_censored_ends():
    slow = {a: _speedup(a, step=0.08) for a in (1.0, 2.0, 3.0)}  # a step costs 4x: a* = 64 x 0.08 / 1.26 = 4.06
    surface = surface_table(_cells(slow), top={"e": 3.0})
    row = break_even_table(surface).iloc[0]
    assert row["break_even_acceptance"] == math.inf and bool(row["break_even_acceptance_beyond"])
    assert row["break_even_acceptance_extrapolated"] == pytest.approx(64 * 0.08 / (T_BASE - PS))
    from specbench.report.surface_section import break_even_text

    assert break_even_text(row) == ("beyond k+1 = 3", "[beyond, beyond]")
    # k + 1 = 5 reaches it: a finite break-even, its interval from the models through the points' interval ends
    row5 = break_even_table(surface_table(_cells(slow), top={"e": 5.0})).iloc[0]
    assert row5["break_even_acceptance"] == pytest.approx(64 * 0.08 / (T_BASE - PS))
    assert not row5["break_even_acceptance_beyond"]
    # the ends: S x 1.1 (or / 1.1) everywhere scales 1/S = p + q/a by 1 / 1.1 (or 1.1): a* = q / (1.1 - p), ...
    assert row5["break_even_acceptance_low"] == pytest.approx(64 * 0.08 / (1.1 * T_BASE - PS))
    assert row5["break_even_acceptance_high"] == pytest.approx(64 * 0.08 / (T_BASE / 1.1 - PS))
    # ... an end past k + 1 is censored there: `beyond`
    row4 = break_even_table(surface_table(_cells(slow), top={"e": 4.5})).iloc[0]
    assert row4["break_even_acceptance_high"] == math.inf and break_even_text(row4)[1].endswith(", beyond]")
    # pays at the lowest forced length already: `at most`
    fast = Curve.of([1.0, 2.0, 3.0], [_speedup(a, step=0.015) for a in (1.0, 2.0, 3.0)])
    be = break_even_acceptance(fast, 4.0)
    assert be.at_most and be.value == 1.0 and be.model < 1.0 and math.isnan(be.low)  # no interval: none


def test_the_step_cost_check_compares_forced_and_real_step_costs():
    import pandas as pd

    from specbench.surface.stepcost import agree_word, step_cost_check, step_cost_lines

    def rows(variant, c, rs):
        return [dict(variant=variant, concurrency=c, rate=math.nan, step_cost_ratio=r) for r in rs]

    surface = pd.DataFrame(rows("e-al1", 4, [1.8]) + rows("e-al2", 4, [1.9]) + rows("e-al3", 4, [1.85])
                           + rows("e-al1", 16, [2.4]) + rows("e-al3", 16, [2.5]) + rows("f-al2", 4, [9.0])
                           + rows("ar", 4, [math.nan]))
    run = pd.DataFrame(rows("head", 4, [1.88, 1.95]) + rows("head", 16, [1.5, 1.6]) + rows("head", 64, [3.0]))
    check = step_cost_check(run, surface, {"head": "e"}).set_index("concurrency")
    assert list(check.index) == [4, 16]  # C=64: no forced step cost to compare with
    assert check.loc[4, "forced_r"] == pytest.approx((1.8 * 1.9 * 1.85) ** (1 / 3))
    assert (check.loc[4, "forced_r_low"], check.loc[4, "forced_r_high"], check.loc[4, "forced_cells"]) == (1.8, 1.9, 3)
    assert check.loc[4, "agree"] == "yes" and check.loc[16, "agree"] == "no"  # [1.5, 1.6] vs [2.4, 2.5]
    assert agree_word((2.0, 2.0, 2.0), (3.0, 3.0, 3.0)) == "n/a"  # one cell each: nothing to judge by
    assert step_cost_lines(check.reset_index())[1] == (
        "step cost head C=16: forced r 2.45 [2.40, 2.50] (2 cells), real r 1.55 [1.50, 1.60] (2 cells), agree no")


def _launch_cells(variant, c, cells):
    """decomposition.csv rows of one variant at C: (r, its launch interval's low and high end) per cell."""
    return [dict(variant=variant, concurrency=c, rate=math.nan, step_cost_ratio=r, step_cost_ratio_ci_low=lo,
                 step_cost_ratio_ci_high=hi) for r, lo, hi in cells]


# two heads of one configuration at C=4 (as docs/examples/prediction-heads-cpu): the cells' r apart, each
# cell's interval over 3 launches wide
REF_CELLS = [(1.52, 1.30, 1.78), (1.59, 1.36, 1.86)]
REAL_CELLS = [(1.44, 1.23, 1.69), (1.51, 1.29, 1.77)]
REF_ENDS = (math.sqrt(1.30 * 1.36), math.sqrt(1.78 * 1.86))  # the geometric mean of each end over the cells
REAL_ENDS = (math.sqrt(1.23 * 1.29), math.sqrt(1.69 * 1.77))


def test_the_step_cost_check_compares_launch_intervals():
    """Each side's interval is the geometric mean over its cells of each end of their launch intervals: two
    sides whose cells' ranges are apart ([1.52, 1.59] vs [1.44, 1.51]) agree within the launches' noise."""
    import pandas as pd

    from specbench.surface.stepcost import step_cost_check

    ref, real = pd.DataFrame(_launch_cells("a", 4, REF_CELLS)), pd.DataFrame(_launch_cells("b", 4, REAL_CELLS))
    row = step_cost_check(real, ref, {"b": "a"}, forced=False).iloc[0]
    assert row["forced_r"] == pytest.approx(math.sqrt(1.52 * 1.59))
    assert (row["forced_r_low"], row["forced_r_high"]) == pytest.approx(REF_ENDS)
    assert (row["real_r_low"], row["real_r_high"]) == pytest.approx(REAL_ENDS)
    assert row["agree"] == "yes"
    # a cell without a launch interval (one launch) is left out of the ends, not taken as zero width
    one = pd.DataFrame(_launch_cells("b", 4, REAL_CELLS + [(1.40, math.nan, math.nan)]))
    row = step_cost_check(one, ref, {"b": "a"}, forced=False).iloc[0]
    assert (row["real_r_low"], row["real_cells"]) == (pytest.approx(REAL_ENDS[0]), 3)


def test_the_step_cost_check_without_launch_intervals_compares_the_cells_range():
    """A decomposition.csv written before the interval columns (or whose cells have none: one launch) gives
    the range over the cells, as before."""
    import pandas as pd

    from specbench.surface.stepcost import read_decomposition, step_cost_check, step_cost_lines

    for drop in (True, False):
        ref = pd.DataFrame(_launch_cells("a", 4, [(r, math.nan, math.nan) for r, _, _ in REF_CELLS]))
        real = pd.DataFrame(_launch_cells("b", 4, REAL_CELLS))
        if drop:
            ref = ref.drop(columns=["step_cost_ratio_ci_low", "step_cost_ratio_ci_high"])
            real = real.drop(columns=["step_cost_ratio_ci_low", "step_cost_ratio_ci_high"])
        row = step_cost_check(real, ref, {"b": "a"}, forced=False).iloc[0]
        assert (row["forced_r_low"], row["forced_r_high"]) == (1.52, 1.59)
        assert (row["real_r_low"], row["real_r_high"]) == ((1.44, 1.51) if drop else pytest.approx(REAL_ENDS))
        assert row["agree"] == ("no" if drop else "yes")
    # the example run (3 launches, step times per request) has launch intervals: docs/surface.md's lines
    example = Path(__file__).resolve().parents[2] / "docs/examples/prediction-heads-cpu"
    decomp = read_decomposition(example)
    lines = step_cost_lines(step_cost_check(decomp, decomp, {"eagle3": "eagle3_small"}, forced=False), "reference")
    assert "step cost eagle3 C=4: reference r 1.50 [1.15, 1.97] (2 cells), real r 1.46 [1.13, 1.90] (2 cells), " \
        "agree yes" in lines
    old = decomp.drop(columns=["step_cost_ratio_ci_low", "step_cost_ratio_ci_high"])  # as written before them
    lines = step_cost_lines(step_cost_check(old, old, {"eagle3": "eagle3_small"}, forced=False), "reference")
    assert "step cost eagle3 C=4: reference r 1.50 [1.44, 1.57] (2 cells), real r 1.46 [1.41, 1.52] (2 cells), " \
        "agree yes" in lines


def test_the_window_makespan_of_a_closed_loop():
    from specbench.metrics.makespan import makespan, window_speedup

    # C=2, four requests of 3, 1, 1, 2 s: slot A 3; slot B 1, then 1 (ends at 2), then 2 (ends at 4): 4 s
    assert makespan([3.0, 1.0, 1.0, 2.0], 2) == 4.0
    assert makespan([1.0, 1.0, 1.0, 5.0], 2) == 6.0  # the last request starts at 1 s on the first free slot
    assert makespan([2.0], 4) == 2.0 and math.isnan(makespan([], 2))
    # every request at the same acceptance: the window is the time model's speedup exactly
    assert window_speedup(TimeModel(0.1, 1.6), [2.0], 8, 4) == pytest.approx(1 / (0.1 + 0.8))
    # spread with the same mean acceptance: the slowest requests hold the window open, the speedup falls
    spread = window_speedup(TimeModel(0.1, 1.6), [1.5, 2.5], 8, 4, seed=1)
    assert spread < 1 / (0.1 + 0.8)
    assert spread == window_speedup(TimeModel(0.1, 1.6), [1.5, 2.5], 8, 4, seed=1)  # seeded


def test_a_surface_run_directory_gets_k_plus_one_from_its_drafters_arguments(tmp_path):
    from specbench.config import dump_config, parse_config
    from specbench.surface.derive import surface_config
    from specbench.surface.render import write_surface

    cfg = parse_config({"name": "t", "model": {"path": "/m"}, "engine": {"kind": "vllm"},
                        "variants": [{"name": "ar", "drafter": "autoregressive", "baseline": True},
                                     {"name": "e", "drafter": "ngram", "params": {"num_tokens": 3}}],
                        "sweep": {"prompts": [{"set": "seed"}], "output_lens": [OUT], "concurrency": [4]}})
    (tmp_path / "config.yaml").write_text(dump_config(surface_config(cfg, ["e"], {"e": [1.0, 2.0, 3.0]})))
    slow = {a: _speedup(a, step=0.08) for a in (1.0, 2.0, 3.0)}
    _cells(slow).to_csv(tmp_path / "cells.csv", index=False)
    write_surface(tmp_path)
    import pandas as pd

    be = pd.read_csv(tmp_path / "break_even_al.csv").iloc[0]
    assert be["max_acceptance"] == 4.0  # n-gram's 3 draft tokens: k + 1 = 4, below a* = 4.06
    assert be["break_even_acceptance"] == math.inf and be["break_even_acceptance_beyond"]
    assert "| 4 | O=65 | beyond k+1 = 4 |" in (tmp_path / "surface.md").read_text()


def test_a_prediction_takes_the_model_of_its_own_output_length():
    from specbench.surface.predict import predict_run

    rows = [dict(variant=derived_name("e", a), output_len=o, concurrency=c, speedup=s * f, speedup_ci_low=s * f / 1.1,
                 speedup_ci_high=s * f * 1.1, acceptance_length=a)
            for a in (1.0, 2.0, 4.0) for c in (1, 4) for o, f in ((OUT, 1.0), (513, 1.5)) if (s := _speedup(a))]
    surface = surface_table(cells_frame(rows))
    run = cells_frame([dict(variant="ar", output_len=OUT, concurrency=c, speedup=1.0, speedup_ci_low=1.0,
                            speedup_ci_high=1.0, acceptance_length=1.0) for c in (1, 4)]
                      + [dict(variant="e", output_len=OUT, concurrency=c, speedup=1.0, speedup_ci_low=0.9,
                              speedup_ci_high=1.1, acceptance_length=3.0) for c in (1, 4)])
    pred = predict_run(run, "ar", surface).set_index("concurrency")
    assert pred.loc[4, "predicted"] == pytest.approx(_speedup(3.0))  # O=65's model, not O=513's 1.5x


def _spread_pool(a: float, n: int = 16, d: float = 0.12) -> list[float]:
    """n requests around forced length a whose decode steps average (O - 1) / a (harmonic mean a): 1/a_j =
    (1 + e_j) / a with e_j spread symmetrically in [-d, d], as a forced engine's per-step draws spread them."""
    return [a / (1 + d * (2 * j / (n - 1) - 1)) for j in range(n)]


def _central(ref, c: int) -> TimeModel:
    models = ref.model("e", c, float(OUT), math.nan)
    assert models is not None
    return models[0]


def test_a_surfaces_own_window_tail_is_taken_out_before_a_prediction_adds_the_heads():
    """Forced points whose 16 requests spread (one window of 16 at C=16) measure the truth's window speedup,
    below S(a): the model fitted on them as measured holds their tail, and a prediction that simulates a
    head's tail on top of it is low. With the run's acceptance.csv each point's tail_factor takes its own tail
    out, and the reference recovers the true model, so the head's prediction is the truth's."""
    import pandas as pd

    from specbench.metrics.makespan import request_acceptance, tail_factor, window_speedup
    from specbench.surface.reference import reference_from_surface

    truth, c = TimeModel(0.05, 0.95), 16
    pools = {a: _spread_pool(a) for a in (1.0, 1.5, 2.0, 3.0)}
    measured = {a: window_speedup(truth, pool, c, c) for a, pool in pools.items()}
    cells = cells_frame([dict(variant=derived_name("e", a), point_id=f"p{a}", output_len=OUT, concurrency=c,
                              speedup=s, speedup_ci_low=s / 1.1, speedup_ci_high=s * 1.1, acceptance_length=a)
                         for a, s in measured.items()])
    acceptance = pd.DataFrame([dict(variant=derived_name("e", a), point_id=f"p{a}", window_id="w", prompt_id=f"q{j}",
                                    output_tokens=OUT, verify_steps=1 + (OUT - 1) / x)
                               for a, pool in pools.items() for j, x in enumerate(pool)])
    for a in pools:
        assert measured[a] < truth.at(a) * 0.995  # the tail costs every forced point something
    surface = surface_table(cells, acceptance=acceptance)
    assert (surface["tail_factor"] < 0.995).all()
    model = _central(reference_from_surface(surface), c)
    assert (model.prefill, model.decode) == (pytest.approx(truth.prefill, abs=1e-6), pytest.approx(truth.decode))
    head = request_acceptance(acceptance, derived_name("e", 1.5), "p1.5")  # a head with the 1.5 point's spread
    assert window_speedup(model, head.acceptance, c, c) == pytest.approx(measured[1.5], rel=1e-6)
    as_measured = _central(reference_from_surface(surface.drop(columns="tail_factor")), c)
    assert as_measured.decode > truth.decode * 1.05  # the points' tail (here proportional to 1/a) held in the model
    assert window_speedup(as_measured, head.acceptance, c, c) < measured[1.5] * 0.99
    assert tail_factor(truth, head._replace(acceptance=[1.5] * 16), c) == 1.0  # no spread, no tail


def test_a_point_without_requests_has_no_tail_factor_and_is_fitted_as_measured():
    from specbench.metrics.makespan import Spread, untailed_fit

    al, s = [1.0, 2.0], [TimeModel(0.05, 0.95).at(1.0), TimeModel(0.05, 0.95).at(2.0)]
    _, factors = untailed_fit(al, s, [Spread([], math.nan), Spread([2.0] * 16, 16.0)], 16)
    assert math.isnan(factors[0]) and factors[1] == 1.0  # unknown, and a whole-number length: no spread

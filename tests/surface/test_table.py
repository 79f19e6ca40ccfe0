"""Known answers for the speedup surface's math: the time model 1/S = p + q/a, break-even acceptance,
prediction, the surface table and the benchmark's summary line (specbench.metrics.forced_surface, specbench.surface;
the model against synthetic runs from step times: tests/surface/test_stepcost.py)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.metrics.forced_surface import (
    Curve,
    Prediction,
    apart,
    break_even_acceptance,
    break_even_level,
    decided,
    fit,
)
from specbench.shared.errors import ConfigError, UsageError
from specbench.surface.derive import default_lengths, derived_name, split_name, surface_config
from specbench.surface.predict import predict_run
from specbench.surface.table import break_even_table, readback, surface_table
from tests.fixtures_surface import acceptance_run, cells_frame, plan_config, surface_dir


def test_the_time_model_is_linear_in_one_over_the_acceptance():
    # 1/S from 1/0.5 = 2 at AL 1 to 1/1.25 = 0.8 at AL 3: p = 0.2, q = 1.8, S(2) = 1 / 1.1
    m = fit([1.0, 3.0], [0.5, 1.25])
    assert (m.prefill, m.decode) == pytest.approx((0.2, 1.8))
    assert m.at(2.0) == pytest.approx(1 / 1.1) and m.break_even() == pytest.approx(1.8 / 0.8)
    # one point: all of its time is decode (p = 0); none: NaN; neither term negative
    assert fit([2.0], [0.8]).at(5.0) == pytest.approx(2.0)
    assert math.isnan(fit([], []).at(1.0))
    assert fit([1.0, 2.0], [0.5, 1.5]).prefill == 0.0  # the line would cross below 0 at 1/a = 0
    assert fit([1.0, 2.0], [0.5, 0.4]).decode == 0.0  # S falling with a: no decode term, S constant


def test_break_even_acceptance_and_its_interval_from_the_envelopes():
    # on the model p = 0.2, q = 1.6 (S = 5/9, 1, 5/3 at AL 1, 2, 4); the ends: S / 1.25 and S x 1.25
    c = Curve.of([1, 2, 4], [5 / 9, 1.0, 5 / 3], [4 / 9, 0.8, 4 / 3], [25 / 36, 1.25, 25 / 12])
    be = break_even_acceptance(c)
    assert be.value == pytest.approx(2.0)
    assert be.low == pytest.approx(1.28 / 0.84)  # the high end's model: p = 0.16, q = 1.28
    assert be.high == pytest.approx(2.0 / 0.75)  # the low end's model: p = 0.25, q = 2.0
    assert be.low <= be.value <= be.high and not be.beyond


def test_break_even_beyond_the_surface_and_paying_from_the_lowest_length():
    # S doubling from AL 1 to 2 with no prefill: a* = 1 / 0.3 = 3.33, past the highest forced length 2
    be = break_even_acceptance(Curve.of([1, 2], [0.3, 0.6]))
    assert be.value == math.inf and be.beyond and be.model == pytest.approx(1 / 0.3)
    assert break_even_acceptance(Curve.of([1, 2], [0.3, 0.6]), top=4.0).value == pytest.approx(1 / 0.3)
    paying = break_even_acceptance(Curve.of([1.0, 2.0], [1.2, 1.5]))
    assert paying.at_most and paying.value == 1.0


def test_prediction_carries_the_step_cost_the_acceptance_and_the_model_error():
    from specbench.metrics.makespan import Spread
    from specbench.surface.model_predict import predict_point
    from specbench.surface.reference import Reference

    c = Curve.of([1, 3], [0.5, 1.25], [0.25, 0.625], [1.0, 2.5])
    key = ("e", 1, math.nan, math.nan)
    ref = Reference({key: (c.models["speedup"], c.models["low"], c.models["high"])}, {("e", 1): [0.05, -0.1]},
                    {key: (1.0, 3.0)})

    def at(a: float, lo: float = math.nan, hi: float = math.nan):
        acc = pd.Series(dict(acceptance_length=a, acceptance_length_ci_low=lo, acceptance_length_ci_high=hi,
                             output_len=64.0, input_len=math.nan))
        point = predict_point(ref, ("e", 1), acc, Spread([], math.nan))
        assert point is not None
        return point.speedup

    # S(2) = 1 / 1.1 on p = 0.2, q = 1.8; the envelopes give half and double; the acceptance's ends 1.5 and 2.5
    # give 1 / 1.4 and 1 / 0.92; the model's own error max |ln(1 + e)| = ln(1 / 0.9): in quadrature
    p = at(2.0, 1.5, 2.5)
    below = math.sqrt(math.log(2) ** 2 + math.log(1.4 / 1.1) ** 2 + math.log(1 / 0.9) ** 2)
    above = math.sqrt(math.log(2) ** 2 + math.log(1.1 / 0.92) ** 2 + math.log(1 / 0.9) ** 2)
    assert (p.speedup, p.low, p.high) == pytest.approx((1 / 1.1, math.exp(-below) / 1.1, math.exp(above) / 1.1))
    assert not p.extrapolated and at(3.5).extrapolated


def test_the_prompts_sampling_widens_the_prediction_when_every_launch_sends_the_same_prompts():
    """Two prompts sent in each of 3 launches, accepting 1.6 and 2.4 every time: the launches' interval of the
    acceptance has no width, but the prompts are a sample of the traffic: the SE of their mean is over 2
    prompts, not 6 requests, and the prediction's interval takes S(a -+ t x SE) at prompts - 1 df."""
    from scipy.stats import t as student_t

    from specbench.metrics.makespan import request_acceptance
    from specbench.surface.model_predict import predict_point
    from specbench.surface.reference import Reference

    rows = pd.DataFrame([dict(variant="e", point_id="p", window_id=f"w{la}", prompt_id=pid, output_tokens=65,
                              verify_steps=1 + 64 / a) for la in (1, 2, 3) for pid, a in (("x", 1.6), ("y", 2.4))])
    spread = request_acceptance(rows, "e", "p")
    assert (spread.prompts, spread.per_window) == (2, 2.0)
    assert spread.prompt_se == pytest.approx(0.4)  # SD of (1.6, 2.4) = 0.566, over sqrt(2): per prompt, not request
    c = Curve.of([1, 3], [0.5, 1.25], [0.5, 1.25], [0.5, 1.25])  # no step-cost width
    key = ("e", 1, math.nan, math.nan)
    ref = Reference({key: (c.models["speedup"],) * 3}, {}, {key: (1.0, 3.0)})
    acc = pd.Series(dict(acceptance_length=1.6, acceptance_length_ci_low=1.6, acceptance_length_ci_high=1.6,
                         output_len=64.0, input_len=math.nan))
    m = c.models["speedup"]
    narrow = predict_point(ref, ("e", 1), acc, spread._replace(prompt_se=math.nan))
    wide = predict_point(ref, ("e", 1), acc, spread._replace(prompt_se=0.01))
    assert narrow is not None and wide is not None
    assert narrow.speedup.low == narrow.speedup.high == narrow.speedup.speedup  # launches alone: no width
    h = float(student_t.ppf(0.975, 1)) * 0.01
    s = wide.speedup.speedup
    assert (wide.speedup.low, wide.speedup.high) == pytest.approx(
        (s * m.at(1.6 - h) / m.at(1.6), s * m.at(1.6 + h) / m.at(1.6)))


def test_break_even_level_and_decisions():
    assert break_even_level([1, 4, 16], [1.2, 0.9, 0.5]) == 1
    assert break_even_level([1, 4, 16], [1.2, 1.1, 1.0]) == 3
    assert break_even_level([16, 1, 4], [0.5, 1.2, 1.1]) == 2  # by concurrency, not by order given
    assert decided(Prediction(1.3, 1.1, 1.5, False), 1.05) == "pays"
    assert decided(Prediction(0.7, 0.6, 0.9, False), 1.05) == "slower"
    assert decided(Prediction(1.0, 0.8, 1.2, False), 1.05) == "undecided"
    assert decided(Prediction(0.5, 0.5, 0.5, False), 1.05) == "undecided"  # no interval: decides nothing


def test_default_lengths_are_capped_at_k_plus_one():
    assert default_lengths(3) == [1.0, 1.5, 2.0, 3.0, 4.0]
    assert default_lengths(1) == [1.0, 1.5, 2.0]
    assert default_lengths(None) == [1.0, 1.5, 2.0, 3.0]
    assert split_name(derived_name("eagle3-big", 1.5)) == ("eagle3-big", 1.5)
    assert split_name("eagle3") is None


def _cfg(kind="vllm", extra=None, ng_url=None):
    return parse_config({
        "name": "t", "model": {"path": "/m"}, "engine": {"kind": kind, **(extra or {})},
        "variants": [{"name": "ar", "drafter": "autoregressive", "baseline": True},
                     {"name": "ng", "drafter": "ngram", "params": {"num_tokens": 3},
                      **({"url": ng_url} if ng_url else {})}],
        "sweep": {"prompts": [{"set": "seed"}], "output_lens": [64], "concurrency": [1, 4]}})


def _launches(cfg):
    from specbench.server.launch import make_engine, plan_launches

    return {la.name: la for la in plan_launches(cfg, make_engine(cfg, "/m", "m"))}


def test_forced_variants_reach_vllm_and_sglang_launches():
    la = _launches(surface_config(_cfg(), ["ng"], {"ng": [2.0]}))
    argv = la["ng-al2"].spec.argv
    spec = argv[argv.index("--speculative-config") + 1]
    assert '"rejection_sample_method":"synthetic"' in spec and '"synthetic_acceptance_length":2.0' in spec
    assert argv.count("--speculative-config") == 1
    assert la["ng-al2"].fingerprint() != _launches(_cfg())["ng"].fingerprint()
    from specbench.checks.fairness import audit

    for launches in (la,):  # SGLang's: tests/surface/test_derive_forced_engines.py
        result = audit(list(launches.values()))
        assert result.fair, result.warnings  # the forcing environment is the drafter's own setting
        assert any("force their acceptance" in n for n in result.notes)


def test_forced_acceptance_is_refused_where_it_cannot_apply():
    with pytest.raises(ConfigError, match=r"forced_acceptance.*outside \[1, 4\]"):
        _launches(surface_config(_cfg(), ["ng"], {"ng": [4.5]}))
    with pytest.raises(ConfigError, match="cannot force acceptance"):
        _launches(surface_config(_cfg("external", {"url": "http://x:1"}, ng_url="http://y:1"), ["ng"], {"ng": [2.0]}))
    with pytest.raises(UsageError, match="is the baseline"):
        surface_config(_cfg(), ["ar"], {"ar": [2.0]})
    cmd = _cfg("command", {"command": ["serve", "--port", "{port}"]})
    with pytest.raises(ConfigError, match=r"does not take \{forced_acceptance\}"):
        _launches(surface_config(cmd, ["ng"], {"ng": [2.0]}))
    ok = _cfg("command", {"command": ["serve", "--port", "{port}", "--force-al", "{forced_acceptance}"]})
    assert _launches(surface_config(ok, ["ng"], {"ng": [2.0]}))["ng-al2"].spec.argv[-1] == "2"
    assert _launches(ok)["ng"].spec.argv[-1] == "0"


def _surface_cells():
    rows = []
    for c, s1, s3 in ((1, 0.8, 2.0), (4, 0.5, 1.25)):
        for al, s in ((1.0, s1), (3.0, s3)):
            for out in (64, 256):
                rows.append(dict(variant=derived_name("e", al), output_len=out, concurrency=c, speedup=s,
                                 speedup_ci_low=s / 1.2, speedup_ci_high=s * 1.2, acceptance_length=al * 0.98))
    return cells_frame(rows)


def test_break_even_words_say_at_most_and_none(tmp_path):
    from specbench.report.surface_section import break_even_text
    from specbench.surface.render import surface_markdown

    one_launch = surface_table(cells_frame([dict(variant=derived_name("e", al), output_len=64, concurrency=1, speedup=s,
                                            speedup_ci_low=math.nan, speedup_ci_high=math.nan, acceptance_length=al)
                                       for al, s in ((1.0, 1.09), (2.0, 2.1))]))
    row = break_even_table(one_launch).iloc[0]
    assert break_even_text(row) == ("at most 1.00", "none")  # pays at AL 1 already; the points have no interval
    assert "| 1 | O=64 | at most 1.00 | none | 0.91 | 2 | n/a | n/a |" in surface_markdown(
        one_launch, break_even_table(one_launch))
    with_ci = break_even_table(surface_table(_surface_cells())).iloc[0]
    value, interval = break_even_text(with_ci)
    assert value == f"{with_ci['break_even_acceptance']:.2f}" and interval.startswith("[")
    assert not with_ci["break_even_acceptance_at_most"]
    # the surface run's report.md carries the same table (report section "Break-even acceptance")
    from specbench.report.derived import RunData
    from specbench.report.document import Document
    from specbench.report.markdown import render
    from specbench.report.surface_section import break_even_al_section

    break_even_table(one_launch).to_csv(tmp_path / "break_even_al.csv", index=False)
    data = RunData(path=tmp_path, meta={}, environment={}, fairness=None, cells=pd.DataFrame(),
                   break_even=pd.DataFrame(), config={})
    assert "| e | 1 | O=64 | at most 1.00 | none | 0.91 | n/a |" in render(Document("t", break_even_al_section(data)))


def test_surface_table_keeps_output_lengths_apart_and_reads_the_acceptance_back():
    t = surface_table(_surface_cells())
    assert list(t["forced_acceptance"]) == [1.0, 3.0] * 4 and (t["cells"] == 1).all()
    assert list(t["output_len"]) == [64, 64, 256, 256] * 2
    assert (t["readback"] == "ok").all()
    assert readback(2.0, 2.25) == "mismatch" and readback(2.0, math.nan) == "unknown"
    be = break_even_table(t).set_index(["concurrency", "output_len"])
    # C=1: 1/S from 1.25 at AL 1 to 0.5 at AL 3, p = 0.125, q = 1.125: a* = 1.125 / 0.875; C=4: 1.8 / 0.8
    assert be.loc[(1, 64), "break_even_acceptance"] == pytest.approx(1.125 / 0.875)
    assert be.loc[(4, 256), "break_even_acceptance"] == pytest.approx(1.8 / 0.8)


def test_a_heads_own_profile_is_pooled_by_drafts_and_read_back_at_one_plus_its_sum(tmp_path):
    from specbench.shared.schema import WindowRecord
    from specbench.surface.profile import head_profile
    from specbench.surface.render import surface_markdown

    # the head's run: two cells at C=1 (10 and 30 drafts) and one at C=4, which the profile leaves out
    run = tmp_path / "run"
    run.mkdir()
    cells_frame([dict(variant="e", point_id=f"p{c}{o}", output_len=o, concurrency=c, speedup=1.0,
                      acceptance_length=1.5, acceptance_per_position=pp)
                 for c, o, pp in ((1, 64, "[0.8, 0.4]"), (1, 256, "[0.2, 0.1]"), (4, 64, "[0.9, 0.9]"))]
                ).to_csv(run / "cells.csv", index=False)
    wins = [WindowRecord(window_id=f"w{pid}", variant="e", cell_id=pid, point_id=pid, repeat=0, t_start=0, t_end=1,
                         n_requests=1, per_position_accepted=acc,
                         counters={"num_drafts": d, "num_draft_tokens": 2 * d, "num_accepted_tokens": sum(acc),
                                   "generation_tokens": d + sum(acc)})
            for pid, d, acc in (("p164", 10, [8, 4]), ("p1256", 30, [6, 3]), ("p464", 10, [9, 9]))]
    (run / "windows.jsonl").write_text("".join(w.model_dump_json() + "\n" for w in wins))
    prof = head_profile(run, "e")
    assert prof is not None and prof.rates == [0.35, 0.175] and prof.concurrency == 1  # 14/40, 7/40, not [0.5, 0.25]
    assert prof.how == "pooled over the draft counts of 2 window(s)"
    # the surface: the profile point reads back against 1 + sum, and checks the model instead of joining it
    rows = [dict(variant=derived_name("e", al), output_len=64, concurrency=1, speedup=s, speedup_ci_low=math.nan,
                 speedup_ci_high=math.nan, acceptance_length=al) for al, s in ((1.0, 0.8), (3.0, 2.0))]
    name = derived_name("e", prof.rates)
    rows.append(dict(variant=name, output_len=64, concurrency=1, speedup=1.2, speedup_ci_low=math.nan,
                     speedup_ci_high=math.nan, acceptance_length=1.52))
    t = surface_table(cells_frame(rows), forced={name: prof.rates})
    point = t[t["forced_profile"] != ""].iloc[0]
    assert point["forced_acceptance"] == pytest.approx(1.525) and point["readback"] == "ok"
    be = break_even_table(t).iloc[0]
    assert be["points"] == 2 and be["dropped"] == ""  # fitted on the two forced lengths only
    assert "the head's own profile at C=1 O=64: AL 1.525, measured 1.200" in surface_markdown(t, break_even_table(t))


def test_prediction_of_a_run():
    surface = surface_table(_surface_cells())
    # a run whose head accepts 2.0 at C=1: the models through the surface's points (C=1: p = 0.125, q = 1.125;
    # C=4: p = 0.2, q = 1.8) predict 1 / 0.6875 = 1.455 at C=1 and 1 / 1.1 = 0.909 at C=4
    run = cells_frame([dict(variant="ar", output_len=64, concurrency=c, speedup=1.0, speedup_ci_low=1.0,
                       speedup_ci_high=1.0, acceptance_length=1.0) for c in (1, 4)]
                 + [dict(variant="e", output_len=64, concurrency=1, speedup=1.3, speedup_ci_low=1.2,
                         speedup_ci_high=1.4, acceptance_length=2.0),
                    dict(variant="e", output_len=64, concurrency=4, speedup=0.70, speedup_ci_low=0.65,
                         speedup_ci_high=0.75, acceptance_length=1.8)])
    pred = predict_run(run, "ar", surface).set_index("concurrency")
    assert pred.loc[1, "predicted"] == pytest.approx(1 / 0.6875)
    assert pred.loc[4, "predicted"] == pytest.approx(1 / 1.1)
    assert pred.loc[4, "predicted_at_c"] == pytest.approx(1 / 1.2)  # with the AL measured at C=4
    assert pred.loc[4, "error"] == pytest.approx(1 / 1.1 / 0.70 - 1)
    assert pred.loc[4, "disagree"]  # [0.909 / 1.2, 0.909 x 1.2] lies above [0.65, 0.75]
    from pathlib import Path

    from specbench.surface.render import prediction_markdown

    md = prediction_markdown(pred.reset_index(), Path("s"))
    assert ("| e | 4 | 2.00 | 1.80 | 0.909 | [0.758, 1.091] | 0.833 | +29.9% **disagree** | 0.700 "
            "| [0.650, 0.750] |") in md
    assert "- e: predicted C=4, measured C=4" in md


def test_the_cpu_plugin_accepts_like_vllms_synthetic_kernel():
    """specbench's vLLM-CPU plugin: the synthetic branch of vLLM's greedy rejection kernel, known answers."""
    import importlib.util

    import torch

    from specbench.server.engines.vllm import CPU_SYNTHETIC_PLUGIN

    spec = importlib.util.spec_from_file_location("plugin", CPU_SYNTHETIC_PLUGIN / "specbench_vllm_cpu_synthetic.py")
    assert spec is not None and spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    plain = []
    impl = plugin._greedy_synthetic(lambda *a: plain.append(a))
    out = torch.full((3, 4), -1, dtype=torch.int32)
    # three requests of 3 drafts; conditional rates 1, 1, 0.5: request 0 draws 0.9 at position 2 (rejected:
    # the target's token there), request 1 accepts all three (then the bonus token), request 2 has a padded
    # draft (-1) at position 0 (rejected whatever its draw)
    impl(out, torch.tensor([3, 6, 9]), torch.tensor([10, 11, 12, 20, 21, 22, -1, 31, 32]),
         torch.tensor([90, 91, 92, 93, 94, 95, 96, 97, 98]), torch.tensor([[7], [8], [9]]), None, 3,
         torch.tensor([0.1, 0.1, 0.9, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1], dtype=torch.float64),
         torch.tensor([1.0, 1.0, 0.5]), True)
    assert out.tolist() == [[10, 11, 92, -1], [20, 21, 22, 8], [96, -1, -1, -1]]
    assert not plain
    impl(out, None, None, None, None, None, 3)  # without synthetic mode: vLLM's own kernel, unchanged
    assert len(plain) == 1


def test_plan_with_a_surface_prices_only_the_points_the_prediction_leaves_undecided(tmp_path):
    from specbench.surface.operations import plan_text

    cfg = parse_config(plan_config())
    # S(a): at C=1 from 1.2 to 2.4, at C=4 from 0.5 to 0.9, at C=16 from 0.6 to 1.5 over a = 1..3 (+-10%)
    surface = surface_dir(tmp_path, {"ng": {1: (1.2, 2.4), 4: (0.5, 0.9), 16: (0.6, 1.5)}})
    run = acceptance_run(tmp_path, cfg, ("ng",))  # a C=1 run of the head: acceptance 2.0 on its one point
    text = plan_text(cfg, surface, run, None)
    # C=4: 1/S from 2 at AL 1 to 1.11 at AL 3, p = 0.667, q = 1.333: a* = 4, past the highest forced length
    assert ("ng: break-even acceptance length C=1: at most 1.00 [1.00, 1.00]; C=4: beyond [beyond, beyond]; "
            "C=16: 1.80 [1.61, 2.02]") in text
    # at AL 2: C=1 1 / (0.417 + 0.625 / 2) = 1.92 pays, C=4 1 / (0.667 + 0.667) = 0.75 slower, C=16 1.09 undecided
    assert "C=1: 1.92 [1.75, 2.11] pays; C=4: 0.75 [0.68, 0.83] slower; C=16: 1.09 [0.99, 1.20] undecided" in text
    assert "measure only C in [16]" in text
    assert "predicted break-even concurrency: pays up to C" in text


def test_the_report_notes_forced_variants_and_flags_a_prediction_that_disagrees(tmp_path):
    from specbench.report.derived import RunData
    from specbench.report.document import Document
    from specbench.report.markdown import render
    from specbench.report.surface_section import forced_section, prediction_section
    from specbench.surface.predict import PREDICTION_COLUMNS

    pred = pd.DataFrame([dict(variant="e", surface_variant="e", concurrency=c, reference_concurrency=1,
                              acceptance_ref=1.8, acceptance_at_c=1.7, predicted=p, predicted_low=p / 1.1,
                              predicted_high=p * 1.1, extrapolated=False, predicted_at_c=p, measured=m,
                              measured_low=m / 1.05, measured_high=m * 1.05, error=p / m - 1, disagree=d)
                         for c, p, m, d in ((1, 1.2, 1.2, False), (16, 0.9, 0.6, True))], columns=PREDICTION_COLUMNS)
    pred.to_csv(tmp_path / "prediction.csv", index=False)
    data = RunData(path=tmp_path, meta={}, environment={}, fairness=None, cells=pd.DataFrame(),
                   break_even=pd.DataFrame(), config={"variants": [{"name": "e-al2", "forced_acceptance": 2.0}]})
    text = render(Document("t", forced_section(data) + prediction_section(data)))
    assert "Forced acceptance (`e-al2`)" in text and "not the target's" in text
    assert "| e | 16 | 1.80 | 1.70 | 0.90 [0.82, 0.99] | +50.0% | 0.60 [0.57, 0.63] | disagree |" in text
    assert "e at C=16: the prediction and the measured interval do not overlap" in text
    assert "| e | 1 |" in text and text.count("| disagree |") == 1


def test_disagreement_needs_an_interval_on_one_side_at_least():
    nan = math.nan
    assert apart((1.2, 1.3, 1.4), (1.0, 1.05, 1.1))
    assert not apart((1.0, 1.2, 1.4), (1.1, 1.15, 1.3))
    assert apart((1.2, 1.3, 1.4), (nan, 1.0, nan))  # the measured point outside the predicted interval
    assert not apart((nan, 1.3, nan), (nan, 1.0, nan))  # no interval anywhere: not judged
    assert not apart((0.52, 0.52, 0.52), (nan, 0.55, nan))  # a zero-width interval is none


def test_a_point_without_an_interval_says_none_and_leaves_the_break_even_interval_to_the_others():
    from specbench.surface.render import surface_markdown

    nan = math.nan
    rows = []
    for al, s, cis in ((1.0, 0.5, [(0.4, 0.6), (0.4, 0.6)]), (2.0, 0.9, [(0.8, 1.0), (nan, nan)]),
                       (3.0, 1.5, [(1.2, 1.8), (1.2, 1.8)])):
        for cat, (lo, hi) in zip("ab", cis):  # at AL 2 one category's cell is `repeat+calibration`, no interval
            rows.append(dict(variant=derived_name("e", al), category=cat, output_len=64, concurrency=1, speedup=s,
                             speedup_ci_low=lo, speedup_ci_high=hi, acceptance_length=al))
    t = surface_table(cells_frame(rows))
    point = t[t["forced_acceptance"] == 2.0].iloc[0]
    assert math.isnan(point["speedup_ci_low"]) and math.isnan(point["speedup_ci_high"])  # not the other cell's
    be = break_even_table(t).iloc[0]
    # the envelopes run through AL 1 and 3 only (the point at AL 2 no longer pins them to its speedup)
    assert be["break_even_acceptance_low"] == pytest.approx(fit([1.0, 3.0], [0.6, 1.8]).break_even())
    assert be["break_even_acceptance_high"] == pytest.approx(fit([1.0, 3.0], [0.4, 1.2]).break_even())
    assert be["break_even_acceptance_low"] < be["break_even_acceptance"] < be["break_even_acceptance_high"]
    md = surface_markdown(t, break_even_table(t))
    assert "| 1 | O=64 | 2 | 2.00 | 0.900 | none |" in md and "| none |" not in md.split("Break-even")[1]

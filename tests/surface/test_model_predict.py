"""Prediction from the time model (surface.model_predict, benchmarks.prediction): a head's speedup at each
concurrency from its C=1 acceptance and an earlier run's step cost, known answers from step times."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from specbench.metrics.timemodel import log_half_width, model_error_width, model_from_terms
from tests.fixtures_surface import cells_frame, plan_config

OUT, PB, SB, PS = 65, 0.1, 0.02, 0.12
T_BASE = PB + (OUT - 1) * SB  # 1.38 s
STEP = {1: 0.025, 4: 0.03}  # the drafter's step (s) at each concurrency


def _s(a: float, c: int) -> float:
    return T_BASE / (PS + (OUT - 1) / a * STEP[c])


def _a_star(c: int) -> float:
    return (OUT - 1) * STEP[c] / (T_BASE - PS)


def test_a_decomposed_cell_gives_the_model_that_reproduces_its_speedup():
    t_spec = PS + 32 * 0.03  # AL 2: 32 decode steps of 0.03 s
    m = model_from_terms(speedup=T_BASE / t_spec, r=0.03 / SB, al=2.0, baseline_prefill_share=PB / T_BASE)
    # where the model is exact its terms are the request's: the drafter's prefill and decode over T_base
    assert (m.prefill, m.decode) == pytest.approx((PS / T_BASE, 64 * 0.03 / T_BASE))
    assert m.at(2.0) == pytest.approx(T_BASE / t_spec) and m.at(4.0) == pytest.approx(T_BASE / (PS + 16 * 0.03))
    assert math.isnan(model_from_terms(1.2, 1.5, 2.0, math.nan).prefill)
    # the interval's parts in quadrature; the model's error as the largest |ln(1 + e)|
    assert log_half_width(0.03, 0.04, math.nan) == pytest.approx(0.05)
    assert model_error_width([0.05, -0.1]) == pytest.approx(-math.log(0.9))


def test_a_run_references_ends_are_its_cells_speedup_intervals_not_the_spread_over_categories():
    from specbench.surface.reference import reference_from_run

    # two categories at C=4 with different acceptance; their speedups measured with intervals x/÷ 1.2
    t = {2.0: T_BASE / (PS + 32 * 0.03), 3.0: T_BASE / (PS + 64 / 3 * 0.03)}
    decomp = pd.DataFrame([dict(variant="e", point_id=f"p{a}", concurrency=4, output_len=OUT, input_len=math.nan,
                                speedup=s, acceptance_length=a, step_cost_ratio=0.03 / SB,
                                baseline_prefill_share=PB / T_BASE) for a, s in t.items()])
    cells = pd.DataFrame([dict(variant="e", point_id=f"p{a}", speedup_ci_low=s / 1.2, speedup_ci_high=s * 1.2)
                          for a, s in t.items()])
    mid, lo, hi = reference_from_run(decomp, cells).model("e", 4, float(OUT), math.nan)  # type: ignore[misc]
    # both cells come from one time model, so the central model is it and reproduces both speedups
    assert (mid.at(2.0), mid.at(3.0)) == pytest.approx((t[2.0], t[3.0]))
    # an end's p is the mean of the cells' 1 / S at that end minus q / AL: 1 / S moves by the mean of the cells' moves
    inv = (1 / t[2.0] + 1 / t[3.0]) / 2
    for a in (1.5, 2.0, 3.0):
        assert 1 / lo.at(a) - 1 / mid.at(a) == pytest.approx(0.2 * inv)
        assert 1 / hi.at(a) - 1 / mid.at(a) == pytest.approx((1 / 1.2 - 1) * inv)
    # without intervals the ends are the point: no spread over categories passed off as uncertainty
    assert reference_from_run(decomp).model("e", 4, float(OUT), math.nan)[1] == mid  # type: ignore[index]


def test_a_head_predicted_from_its_own_run_gives_its_measured_speedup_its_tail_counted_once():
    """A run reference's p holds the head's own window tail (its requests' acceptance spreads); predicting the
    head at C from its own acceptance at C must give back the speedup measured there, not that tail twice. The
    window is measured whole (8 requests at C=4: no steady interval), as every window was before issue 49."""
    from specbench.metrics.makespan import makespan
    from specbench.surface.model_predict import predict_from_model
    from specbench.surface.reference import reference_from_run

    steps = (17, 65, 33, 33) * 2  # 8 requests: decode acceptance 4, 1 and 2 (x2)
    e2e = [PS + (k - 1) * 0.03 for k in steps]
    s4 = 8 * T_BASE / 4 / makespan(e2e, 4)  # the baseline's window: 2 waves of T_BASE
    al = 8 * OUT / sum(steps)
    cells = cells_frame([dict(variant=v, output_len=OUT, concurrency=c, point_id=f"{v}{c}", speedup=s,
                              speedup_ci_low=s, speedup_ci_high=s, acceptance_length=a)
                         for v, s, a in (("ar", 1.0, 1.0), ("e", s4, al)) for c in (1, 4)])
    acceptance = pd.DataFrame([dict(variant="e", point_id=f"e{c}", window_id=f"w{c}", output_tokens=OUT,
                                    verify_steps=k) for c in (1, 4) for k in steps])
    decomp = pd.DataFrame([dict(variant="e", point_id="e4", concurrency=4, output_len=OUT, input_len=math.nan,
                                speedup=s4, acceptance_length=al, step_cost_ratio=0.03 / SB,
                                baseline_prefill_share=PB / T_BASE, break_even_acceptance_length=math.nan)])
    ref = reference_from_run(decomp, cells, acceptance)
    pred = predict_from_model(cells, acceptance, decomp, ref, {"e": "e"}).set_index("concurrency")
    assert pred.loc[4, "predicted_at_c"] == pytest.approx(s4, rel=1e-6)
    # without the requests' acceptance the reference keeps the tail in p, and the prediction counts it again
    twice = predict_from_model(cells, acceptance, decomp, reference_from_run(decomp, cells), {"e": "e"})
    assert twice.set_index("concurrency").loc[4, "predicted_at_c"] < 0.97 * s4


def _runs(tmp_path):
    from specbench.config import dump_config, parse_config
    from specbench.surface.derive import derived_name
    from specbench.surface.table import surface_table

    surface = surface_table(cells_frame([dict(variant=derived_name("e", a), output_len=OUT, concurrency=c,
                                              speedup=_s(a, c), speedup_ci_low=_s(a, c) / 1.1,
                                              speedup_ci_high=_s(a, c) * 1.1, acceptance_length=a)
                                         for a in (1.0, 2.0, 4.0) for c in (1, 4)]))
    (tmp_path / "surface").mkdir()
    surface.to_csv(tmp_path / "surface" / "surface.csv", index=False)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(dump_config(parse_config(plan_config(("e",), (1, 4)))))
    cells = cells_frame([dict(variant="ar", output_len=OUT, concurrency=c, point_id=f"ar{c}", speedup=1.0,
                              speedup_ci_low=1.0, speedup_ci_high=1.0, acceptance_length=1.0) for c in (1, 4)]
                        + [dict(variant="e", output_len=OUT, concurrency=c, point_id=f"p{c}", speedup=_s(2.0, c),
                                speedup_ci_low=_s(2.0, c) / 1.05, speedup_ci_high=_s(2.0, c) * 1.05,
                                acceptance_length=2.0) for c in (1, 4)])
    cells.to_csv(run / "cells.csv", index=False)
    # the head's requests at C=1: 8 a window, each 65 tokens in 33 target steps (decode acceptance 64 / 32 = 2)
    pd.DataFrame([dict(variant="e", point_id="p1", window_id="w1", output_tokens=OUT, verify_steps=33)] * 8
                 ).to_csv(run / "acceptance.csv", index=False)
    pd.DataFrame([dict(variant="e", concurrency=c, rate=math.nan, step_cost_ratio=STEP[c] / SB,
                       break_even_acceptance_length=_a_star(c)) for c in (1, 4)]
                 ).to_csv(run / "decomposition.csv", index=False)
    return run, tmp_path / "surface"


def test_the_model_predicts_a_head_from_its_c1_acceptance_and_the_surface(tmp_path):
    from specbench.report.derived import normalize_cells
    from specbench.surface.model_predict import predict_from_model
    from specbench.surface.reference import reference_from_surface
    from specbench.surface.table import load_surface

    run, surface = _runs(tmp_path)
    pred = predict_from_model(normalize_cells(pd.read_csv(run / "cells.csv")), pd.read_csv(run / "acceptance.csv"),
                              pd.read_csv(run / "decomposition.csv"), reference_from_surface(load_surface(surface)),
                              {"e": "e"}).set_index("concurrency")
    # no spread and a window of two whole waves at C=4: the window's speedup is the model's S(2) exactly
    assert pred.loc[4, "predicted"] == pytest.approx(_s(2.0, 4))
    assert pred.loc[4, "requests_per_window"] == pytest.approx(8)
    # the interval: the surface's +-10% envelopes (the held-out error is 0 on exact points)
    assert (pred.loc[4, "predicted_low"], pred.loc[4, "predicted_high"]) == pytest.approx(
        (_s(2.0, 4) / 1.1, _s(2.0, 4) * 1.1))
    assert pred.loc[4, "covered"] and pred.loc[4, "error"] == pytest.approx(0.0, abs=1e-12)
    assert pred.loc[4, "break_even_model"] == pytest.approx(_a_star(4))


def test_the_benchmark_prints_the_goal_line(tmp_path, capsys):
    from benchmarks.prediction import main

    run, surface = _runs(tmp_path)
    assert main([str(run), str(surface), "--at", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == ("prediction: 1 points, median error 0.0%, worst 0.0%, interval coverage 1 of 1, "
                       "break-even AL from the run vs the surface within intervals for 1 of 1 drafters")
    assert main([str(run), str(tmp_path / "nowhere")]) == 2
    assert "neither surface.csv" in capsys.readouterr().err


def test_the_coverage_simulation_prints_its_line_and_reproduces_the_truth_without_noise(capsys):
    """benchmarks/prediction_coverage.py: its last line, and with no launch noise and every request at the
    mean acceptance the product's chain (cells, decomposition, run reference, prediction) gives the true
    speedup of the other head, at the demo's O = 64 (the reference's model is solved in the per-request
    acceptance's units, metrics.makespan.untailed, so the AL's two counts no longer differ by 1 / O)."""
    import re

    from benchmarks.prediction_coverage import Setup, exact_error, main

    assert main(["--trials", "3", "--seed", "1"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    m = re.fullmatch(r"prediction coverage: true (\d+\.\d)%, measured (\d+\.\d)% over 3 trials \(nominal 95%\)", last)
    assert m is not None, last
    assert all(0 <= float(x) <= 100 for x in m.groups())
    assert exact_error(Setup()) < 1e-6


def test_the_acceptance_spread_over_requests_slows_the_predicted_window(tmp_path):
    from specbench.report.derived import normalize_cells
    from specbench.surface.model_predict import predict_from_model
    from specbench.surface.reference import reference_from_surface
    from specbench.surface.table import load_surface

    run, surface = _runs(tmp_path)
    # half the requests accept 64 / 16 = 4 a decode step, half 64 / 64 = 1: the window waits for the slow ones
    spread = pd.DataFrame([dict(variant="e", point_id="p1", window_id="w1", output_tokens=OUT, verify_steps=k)
                           for k in (17, 65) * 4])
    args = (normalize_cells(pd.read_csv(run / "cells.csv")), spread, pd.read_csv(run / "decomposition.csv"),
            reference_from_surface(load_surface(surface)), {"e": "e"})
    pred = predict_from_model(*args).set_index("concurrency")
    mean_time = (1 / _s(4.0, 4) + 1 / _s(1.0, 4)) / 2  # each request's time over the baseline's, on average
    assert pred.loc[4, "predicted"] < 1 / mean_time < _s(2.5, 4)  # the tail costs beyond the mean time
    assert pred.loc[4, "predicted"] == predict_from_model(*args).set_index("concurrency").loc[4, "predicted"]


# -- the prediction ledger (stores.prediction_history): past errors of the setup join the model's own error ------
SETUP = dict(hardware="hw", engine="vllm 0.32.0", launch="l", model="m", parallelism="nodes=1")


def _keyed(run, run_id: str, setup: dict[str, str], measured: float) -> None:
    """The run with a run.json recording its id and setup, its measured speedup at C=4 scaled by `measured`."""
    (run / "run.json").write_text(json.dumps({"run_id": run_id, "created": "t", "variance_history": {"setup": setup}}))
    cells = pd.read_csv(run / "cells.csv")
    at4 = (cells["variant"] == "e") & (cells["concurrency"] == 4)
    for col in ("speedup", "speedup_ci_low", "speedup_ci_high"):
        cells.loc[at4, col] *= measured
    cells.to_csv(run / "cells.csv", index=False)


def test_a_run_predicted_twice_is_recorded_once_and_never_widened_by_its_own_errors(tmp_path, monkeypatch, capsys):
    from benchmarks.prediction import main
    from specbench.stores.prediction_history import ledger_path, load_ledger

    monkeypatch.setenv("SPECBENCH_HISTORY", str(tmp_path / "history"))
    run, surface = _runs(tmp_path)
    _keyed(run, "a", SETUP, measured=0.8)
    cells = pd.read_csv(run / "cells.csv")  # C=1 measured once, without an interval: not recorded
    cells.loc[cells["concurrency"] == 1, ["speedup_ci_low", "speedup_ci_high"]] = math.nan
    cells.to_csv(run / "cells.csv", index=False)
    assert main([str(run), str(surface), "--no-record"]) == 0 and not ledger_path(SETUP).exists()
    capsys.readouterr()
    for _ in range(2):
        assert main([str(run), str(surface)]) == 0
    entries = load_ledger(ledger_path(SETUP))
    assert [(e.run, e.variant, e.drafter, e.concurrency) for e in entries] == [("a", "e", "ngram", 4)]
    assert entries[0].error == pytest.approx(1 / 0.8 - 1)
    # the second prediction prints what the first did: its own recorded error (25%) widened nothing
    out = capsys.readouterr().out.splitlines()
    assert out[:len(out) // 2] == out[len(out) // 2:]
    assert [line.split()[-1] for line in out if line.startswith("e ")] == ["0"] * 4


def test_past_errors_of_the_setup_widen_the_interval_by_their_log_width(tmp_path, monkeypatch):
    import shutil

    from benchmarks.prediction import main
    from specbench.config import load_yaml, parse_config
    from specbench.records.rundir import RunDir
    from specbench.report.derived import normalize_cells
    from specbench.stores.prediction_history import for_run
    from specbench.surface.model_predict import predict_from_model
    from specbench.surface.reference import load_reference

    monkeypatch.setenv("SPECBENCH_HISTORY", str(tmp_path / "history"))
    run, surface = _runs(tmp_path)
    for name in ("a", "b", "c"):
        shutil.copytree(run, tmp_path / name)
    _keyed(tmp_path / "a", "a", SETUP, measured=0.8)  # predicted 25% high at C=4
    _keyed(tmp_path / "b", "b", {**SETUP, "engine": "vllm 0.11.2"}, measured=0.5)  # 100% high, another setup
    _keyed(tmp_path / "c", "c", SETUP, measured=1.0)
    assert main([str(tmp_path / "a"), str(surface)]) == 0 and main([str(tmp_path / "b"), str(surface)]) == 0

    def predict(widen: bool) -> tuple[pd.Series, dict[tuple[str, int], int]]:
        rd, ref = RunDir(tmp_path / "c"), load_reference(surface)[0]
        cfg = parse_config(load_yaml(rd.config.read_text(), str(rd.config)), str(rd.config))
        added = for_run(rd, cfg).widen(ref.errors, {"e": "e"}) if widen else {}
        pred = predict_from_model(normalize_cells(pd.read_csv(rd.cells)), pd.read_csv(rd.acceptance),
                                  pd.read_csv(rd.decomposition), ref, {"e": "e"})
        return pred.set_index("concurrency").loc[4], added

    (plain, _), (widened, added) = predict(False), predict(True)
    assert added[("e", 4)] == 1  # run a's error; run b's, of another setup, is not used
    s = plain["predicted"]
    for end, sign in (("predicted_high", 1), ("predicted_low", -1)):
        w0, w1 = sign * math.log(plain[end] / s), sign * math.log(widened[end] / s)
        assert w1 == pytest.approx(log_half_width(w0, model_error_width([1 / 0.8 - 1])))
    assert widened["predicted"] == s and w1 > w0


def test_the_reports_interval_holds_the_surfaces_held_out_error():
    from specbench.surface.derive import derived_name
    from specbench.surface.predict import predict_run
    from specbench.surface.table import surface_table

    # one launch (no intervals): the middle forced length ran 10% above the model through the other two, so the
    # held-out error is 1 / 1.1 - 1, and it alone makes the interval: x/÷ 1.1
    surface = surface_table(cells_frame([dict(variant=derived_name("e", a), output_len=OUT, concurrency=c,
                                              speedup=_s(a, c) * (1.1 if a == 2.0 else 1.0), speedup_ci_low=math.nan,
                                              speedup_ci_high=math.nan, acceptance_length=a)
                                         for a in (1.0, 2.0, 4.0) for c in (1, 4)]))
    run = cells_frame([dict(variant=v, output_len=OUT, concurrency=c, speedup=1.0, speedup_ci_low=0.9,
                            speedup_ci_high=1.1, acceptance_length=2.0) for v in ("ar", "e") for c in (1, 4)])
    r = predict_run(run, "ar", surface).set_index("concurrency").loc[4]
    assert (r["predicted_low"], r["predicted_high"]) == pytest.approx((r["predicted"] / 1.1, r["predicted"] * 1.1))


def test_plan_and_report_give_the_one_prediction_with_the_window_tail(tmp_path):
    import re

    from specbench.config import parse_config
    from specbench.surface.operations import plan_text
    from specbench.surface.render import write_prediction

    run, surface = _runs(tmp_path)
    # half the C=1 requests accept 4 a decode step, half 1: both commands simulate the window's tail from them
    pd.DataFrame([dict(variant="e", point_id="p1", window_id="w1", output_tokens=OUT, verify_steps=k)
                  for k in (17, 65) * 4]).to_csv(run / "acceptance.csv", index=False)
    pred, _ = write_prediction(run, surface)
    r = pred.set_index("concurrency").loc[4]
    assert r["predicted"] < _s(2.0, 4) and r["surface_variant"] == "e"  # the tail, not S at the mean acceptance
    text = plan_text(parse_config(plan_config(("e",), (1, 4))), surface, run, None)
    got = re.search(r"C=4: ([\d.]+) \[([\d.]+), ([\d.]+)\]", text)
    assert got is not None, text
    assert tuple(float(x) for x in got.groups()) == tuple(
        round(float(r[c]), 2) for c in ("predicted", "predicted_low", "predicted_high"))

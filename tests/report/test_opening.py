"""The report's first lines: one sentence per drafter, from mix intervals whose outcome is known by
construction (Bonferroni over the table's claims: the cells carry no launch shapes), and the price of the
undecided levels from run.json's seconds and the cells' measured times."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from specbench.report.derived import RunData, normalize_cells
from specbench.report.document import Details
from specbench.report.markdown import render as render_md
from specbench.report.opening import drafter_sentence, opening_lines, plain, undecided_needs
from specbench.report.summary import HOW_TO_READ, verdict_section

WIN, LOSE, SAME, OPEN = (1.3, 1.2, 1.4), (0.7, 0.6, 0.8), (1.0, 0.99, 1.01), (1.2, 1.02, 1.41)
SURE = "the table's words are wrong with at most 2.5% chance per outcome (family-wise over {k} claims, Bonferroni)"
# each variant: startup 100 s, 3 launches of 160 s (60 s measuring); cells: 30 s of it at C=1, 30 s at C=4
SECONDS = {"startup_s": 100.0, "wall_s": 480.0, "status": "done"}


def cell(variant: str, concurrency: int, mix: tuple[float, float, float] | None, *, temperature: float = 0.0,
         launches: int = 3, unit: str = "launch") -> dict:
    """One cell of the code category, 64 tokens, 10 requests per launch per level's C at 3 s each."""
    s, lo, hi = mix if mix is not None else (math.nan,) * 3
    return {"variant": variant, "category": "code", "input_len": math.nan, "output_len": 64,
            "temperature": temperature, "concurrency": concurrency, "valid": True,
            "point_id": f"code|in-|out64|c{concurrency}|t{temperature}", "n_requests": 10 * concurrency * launches,
            "launches": launches, "repeats": launches, "client_e2e_mean_s": 3.0, "interval_unit": unit,
            "launch_cv": 0.05, "speedup": s, "speedup_ci_low": lo, "speedup_ci_high": hi, "speedup_ci_df": 4.0,
            "mix_points": 1.0 if mix is not None else math.nan, "mix_speedup": s, "mix_speedup_ci_low": lo,
            "mix_speedup_ci_high": hi, "mix_speedup_ci_df": 4.0 if mix is not None else math.nan}


def run(spec: dict[int, tuple[float, float, float]], *, environment: dict | None = None, **kw) -> RunData:
    rows = [cell("spec", c, m, **kw) for c, m in spec.items()] + [cell("base", c, None, **kw) for c in spec]
    return RunData(path=Path("."), meta={"baseline": "base", "variants": {"base": SECONDS, "spec": SECONDS}},
                   environment=environment or {}, config={}, fairness=None, cells=normalize_cells(pd.DataFrame(rows)),
                   break_even=pd.DataFrame())


def sentence(data: RunData) -> str:
    return plain(drafter_sentence(data, "spec"))


def test_adopt_and_slower_say_where_and_how_sure() -> None:
    assert sentence(run({1: WIN, 4: LOSE})) == (
        "spec: switch it on at C=1 (mix speedup 1.30x); leave it off at C=4 (mix speedup 0.70x); "
        + SURE.format(k=2) + ".")


def test_same_everywhere_names_no_lead() -> None:
    assert sentence(run({1: SAME, 4: SAME})) == (
        "spec: no practical difference at C=1, 4 (mix speedup 1.00x, 1.00x); " + SURE.format(k=2) + ".")


def test_undecided_levels_are_priced_in_launches_and_time() -> None:
    """C=4 (1.02, 1.41) on 4 df, 3 launches, re-drawn at 2.5% / 2: 7 launches per variant decide it with 80%
    power (decision.units_to_decide at that level), so 4 more rounds, each one launch of the drafter and of the
    baseline measuring C=4 only: 100 s startup + 60 s x its share (30 of 60 s) = 130 s each, 4 x 260 s = 17.3
    min."""
    data = run({1: WIN, 4: OPEN})
    assert [(n.concurrency, n.launches, n.have) for n in undecided_needs(data, "spec", {1: "adopt", 4: "undecided"})] \
        == [(4, 7, 3)]
    assert sentence(data) == (
        "spec: switch it on at C=1 (mix speedup 1.30x); undecided at C=4 (mix speedup 1.20x); " + SURE.format(k=2)
        + "; deciding C=4 would take 7 launches per variant with 80% power if the estimates held (4 more of spec "
          "and the baseline, about 17.3 min on this machine).")


def test_gpu_runs_are_priced_in_gpu_hours_and_out_of_reach_levels_named() -> None:
    """8 GPUs: 1040 s x 8 = 2.3 GPU-hours; a level at the margin's centre (1.05) no number of launches decides."""
    data = run({1: OPEN, 4: (1.05, 0.98, 1.12)}, environment={"gpus": [{"name": "H100"}] * 8})
    assert sentence(data).endswith(
        "deciding C=1 would take 7 launches per variant with 80% power if the estimates held (4 more of spec and "
        "the baseline, about 2.3 GPU-hours), C=4 more than 50 (too close to the margin, or no interval).")
    assert sentence(data).startswith("spec: switch it on nowhere yet, undecided at C=1, 4")


def test_temperatures_that_disagree_read_mixed() -> None:
    data = run({1: WIN})
    rows = pd.concat([data.cells, normalize_cells(pd.DataFrame([cell("spec", 1, LOSE, temperature=1.0),
                                                                cell("base", 1, None, temperature=1.0)]))])
    data.cells = rows.reset_index(drop=True)
    assert sentence(data) == ("spec: mixed (temperatures or rates disagree) at C=1 (mix speedup 1.30x); "
                              + SURE.format(k=2) + ".")


def test_an_indicative_run_observes_and_prices_a_rerun() -> None:
    """One launch, no calibration: no word is decided; 2 launches of each at 480 s (the whole sweep) = 32 min."""
    data = run({1: WIN, 4: LOSE}, launches=1, unit="repeat")
    data.meta["variants"] = {v: {"startup_s": 100.0, "wall_s": 480.0} for v in ("base", "spec")}
    text = sentence(data)
    assert text.startswith("spec: nothing decided, measured 1.30x at C=1, 0.70x at C=4 on the workload's mix; "
                           "indicative only: 1 launch per variant")
    assert text.endswith("(2 launches of spec and the baseline would take about 32.0 min on this machine).")


def test_the_report_opens_with_the_sentences_and_folds_the_definitions() -> None:
    data = run({1: WIN, 4: LOSE})
    assert [plain(p) for p in opening_lines(data)] == [sentence(data)]
    blocks = verdict_section(data)
    assert isinstance(blocks[-1], Details) and blocks[-1].summary == HOW_TO_READ
    from specbench.report.document import Document

    md = render_md(Document("t", blocks))
    assert "<details><summary>How to read this</summary>\n\n*A concurrency level counts" in md
    assert md.rstrip().endswith("</details>")


def test_a_failed_drafter_gets_no_verdict() -> None:
    data = run({1: WIN})
    data.meta["variants"]["spec"] = {"status": "failed", "reason": "engine exited 1"}
    assert sentence(data) == "spec: failed, no verdict (engine exited 1)."


def test_an_update_run_opens_with_the_updates_words(tmp_path: Path) -> None:
    """A `specbench update` run's table holds the one level it launched; its sentence gives update.csv's word at
    every level of RUN, each estimate named by its source once per run of equal sources."""
    pd.DataFrame([
        {"variant": "spec", "reference_run": "/runs/heads", "reference_variant": "spec", "concurrency": c,
         "word": w, "source": src, "predicted": p, "predicted_low": math.nan, "predicted_high": math.nan,
         "measured": m, "measured_low": math.nan, "measured_high": math.nan}
        for c, w, src, p, m in [(1, "adopt", "predicted", 1.31, math.nan), (4, "slower", "predicted", 0.8, math.nan),
                                (16, "slower", "measured", 1.01, 0.7), (32, "undecided", "to measure", 1.0, math.nan)]
    ]).to_csv(tmp_path / "update.csv", index=False)
    data = run({16: OPEN})
    data = RunData(path=tmp_path, meta=data.meta, environment={}, config={}, fairness=None, cells=data.cells,
                   break_even=pd.DataFrame())
    assert [plain(s) for s in opening_lines(data)] == [
        "spec, a new head of spec in heads: switch it on at C=1 (predicted 1.31x); leave it off at C=4, 16 "
        "(predicted 0.80x, measured 0.70x); undecided at C=32 (to measure); each word per level at 95% (not "
        "family-wise), predicted from the step cost heads measured and the acceptance measured here where its "
        "interval decides (\"Update\" below)."]


def test_a_measured_update_word_states_the_borrowed_baselines_session(tmp_path: Path) -> None:
    pd.DataFrame([{"variant": "spec", "reference_run": "/runs/heads", "reference_variant": "spec", "concurrency": 16,
                   "word": "slower", "source": "measured", "predicted": 1.0, "predicted_low": 0.9,
                   "predicted_high": 1.1, "measured": 0.7, "measured_low": 0.6, "measured_high": 0.8}
                  ]).to_csv(tmp_path / "update.csv", index=False)
    data = run({16: LOSE}, launches=1, unit="history")
    meta = {"baseline": "base", "variants": {"base": {**SECONDS, "status": "reused", "reused_from": "/runs/heads"},
                                             "spec": SECONDS}}
    data = RunData(path=tmp_path, meta=meta, environment={}, config={}, fairness=None, cells=data.cells,
                   break_even=pd.DataFrame())
    assert plain(opening_lines(data)[0]).endswith(
        "(\"Update\" below), if this run's launches, spec's too, vary as the baseline's in the variance history "
        "(untested: one launch a variant, one window a cell) and base, reused from heads, has not shifted since "
        "(untested: another session).")

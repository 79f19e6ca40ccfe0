"""The decomposition (decomposition.csv, docs/metrics.md "Decomposition"): speedup = AL / r x residual in
every cell of a synthetic run, the step-cost ratio the synthetic run was built with, empty terms with
their reason where the engine gave no target steps, and the report's "why" section. The stand-in server's
runs are checked in tests/runner/test_known_answers.py (check_decomposition)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.synthetic_run import Synthetic, write
from specbench.metrics import CellOptions, compute_cells
from specbench.metrics.decomposition import NO_STEPS, TERMS, decomposition_table
from specbench.records.rundir import RunDir, records_frame
from specbench.report.why import level_sentence
from specbench.runner import finalize


def check_decomposition(run: Path, tolerance: float = 0.005) -> pd.DataFrame:
    """Every drafter cell of a finished run: the terms are defined and multiply back to the measured
    speedup within `tolerance` (relative); returns decomposition.csv."""
    d = pd.read_csv(run / "decomposition.csv")
    cells = pd.read_csv(run / "cells.csv")
    drafters = cells[~cells["is_baseline"].astype(bool)]
    assert len(d) == len(drafters) > 0
    for _, row in d.iterrows():
        assert pd.isna(row["reason"]), row["reason"]
        assert all(math.isfinite(row[t]) and row[t] > 0 for t in TERMS), row.to_dict()
        product = row["acceptance_length"] / row["step_cost_ratio"] * row["residual"]
        assert product == pytest.approx(row["speedup"], rel=tolerance)
        assert row["break_even_acceptance_length"] == pytest.approx(row["step_cost_ratio"] / row["residual"])
    merged = d.merge(drafters, on=["variant", "point_id"], suffixes=("", "_cell"))
    assert (merged["speedup"] == merged["speedup_cell"]).all()  # the measured speedup, not a recomputed one
    return d


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    rd = write(tmp_path_factory.mktemp("decomposition") / "run", Synthetic(n=256, output_len=64))
    finalize(rd)
    return rd


def test_synthetic_run_multiplies_back_to_the_speedup(synthetic: RunDir) -> None:
    d = check_decomposition(synthetic.path)
    # synthetic_run.py gives ngram's steps 0.02 s and the baseline's 0.03 s (times the same jitter): r = 2/3
    assert d["step_cost_ratio"].to_numpy() == pytest.approx(2 / 3, rel=0.03)
    assert (d["acceptance_length"] > 2).all()  # 1-4 tokens a step (a chunk), 2.5 on average


def _table(rd: RunDir, requests: pd.DataFrame, windows: pd.DataFrame | None = None) -> pd.DataFrame:
    windows = records_frame(rd.window_records()) if windows is None else windows
    cells = compute_cells(requests, windows, CellOptions(baseline="autoregressive"))
    return decomposition_table(requests, windows, cells, "autoregressive")


def _without_request_steps(rd: RunDir) -> pd.DataFrame:
    requests = records_frame(rd.request_records())
    drafter = requests["variant"] == "ngram"
    requests.loc[drafter, "spec"] = requests.loc[drafter, "spec"].map(lambda s: {**s, "verify_steps": None})
    return requests


def test_step_time_from_the_counters_when_requests_carry_no_steps(synthetic: RunDir) -> None:
    by_request = pd.read_csv(synthetic.path / "decomposition.csv")
    assert (by_request["step_source"] == "request").all()
    d = _table(synthetic, _without_request_steps(synthetic))
    assert (d["step_source"] == "counters").all() and d["reason"].eq("").all()
    # the synthetic counters count the same steps: window steps - its requests = the requests' steps - 1 each
    assert d["step_time_s"].to_numpy() == pytest.approx(by_request["step_time_s"].to_numpy(), rel=1e-9)
    product = d["acceptance_length"] / d["step_cost_ratio"] * d["residual"]
    assert product.to_numpy() == pytest.approx(d["speedup"].to_numpy(), rel=0.005)


def test_missing_target_steps_leave_the_terms_empty_with_the_reason(synthetic: RunDir) -> None:
    windows = records_frame(synthetic.window_records())
    drafter = windows["variant"] == "ngram"
    windows.loc[drafter, "counters"] = windows.loc[drafter, "counters"].map(
        lambda c: {k: v for k, v in c.items() if k not in ("num_accepted_tokens", "num_drafts", "num_draft_tokens")})
    d = _table(synthetic, _without_request_steps(synthetic), windows)
    assert len(d) == 8 and (d["reason"] == NO_STEPS).all() and d["step_source"].eq("").all()
    assert d["acceptance_length"].isna().all() and d["speedup"].notna().all()
    for term in TERMS:  # the drafter's terms empty, never 0; the baseline's own step time is still known
        assert d[term].isna().all() != term.startswith("baseline_"), term


def test_a_point_without_baseline_says_so(synthetic: RunDir) -> None:
    requests = records_frame(synthetic.request_records())
    gone = requests["point_id"].str.endswith("|c4|t0")
    d = _table(synthetic, requests[~(gone & (requests["variant"] == "autoregressive"))])
    no_base = d[d["concurrency"] == 4]
    assert len(no_base) == 2 and (no_base["reason"] == "no baseline cell at this point").all()
    assert no_base["residual"].isna().all()
    assert d.loc[d["concurrency"] != 4, "residual"].notna().all()


def test_a_baseline_without_decode_time_gives_no_step_cost(synthetic: RunDir) -> None:
    """Every token in the first chunk (e2e = TTFT): no step time, so no r or residual, with the reason."""
    requests = records_frame(synthetic.request_records())
    flat = requests["point_id"].str.endswith("|c8|t0") & (requests["variant"] == "autoregressive")
    requests.loc[flat, "e2e_s"] = requests.loc[flat, "ttft_s"]
    d = _table(synthetic, requests)
    c8 = d[d["concurrency"] == 8]
    assert len(c8) == 2 and c8["reason"].str.startswith("no baseline step time").all()
    assert c8[["baseline_step_time_s", "step_cost_ratio", "residual"]].isna().all().all()


def _level(speedup: float, al: float, r: float) -> dict[str, object]:
    res = speedup * r / al
    return {"speedup": speedup, "acceptance_length": al, "step_cost_ratio": r, "residual": res,
            "break_even_acceptance_length": r / res, "prefill_share": 0.12, "baseline_prefill_share": 0.05,
            "reasons": []}


def test_level_sentences_name_the_deciding_factor() -> None:
    assert level_sentence(_level(0.52, 1.26, 2.4)) == (
        "a step costs 2.40x a plain step; 1.26 accepted tokens cannot pay for it (break-even 2.42 tokens a step).")
    assert level_sentence(_level(1.3, 1.9, 1.3)).startswith("pays: 1.90 tokens a step at 1.30x the step cost")
    residual = level_sentence(_level(0.9, 1.9, 1.3))
    assert residual.startswith("1.90 tokens a step at 1.30x the step cost would give 1.46x; the residual 0.62")
    assert "prefill 12% of the time vs 5% for the baseline" in residual
    assert level_sentence({**_level(0.9, 1.9, 1.3), "prefill_share": 0.04}).endswith(
        "the residual 0.62 (the window's tail, queueing) takes it below 1.0.")
    assert level_sentence({**_level(0.9, 1.9, 1.3), "residual": math.nan, "reasons": [NO_STEPS]}) == \
        f"terms unknown: {NO_STEPS}"


def test_report_has_the_why_section(synthetic: RunDir) -> None:
    md = (synthetic.path / "report.md").read_text()
    why = md.split("## Why it pays or not")[1].split("\n## ")[0]
    assert "AL / r x residual" in why and "plot: Acceptance, step cost and residual vs concurrency" in why
    lines = [ln for ln in why.splitlines() if ln.startswith("- C=")]
    assert [ln.split(" ")[1] for ln in lines] == ["C=4", "C=8", "C=16", "C=32"][: len(lines)] and len(lines) == 4
    assert all("pays: " in ln for ln in lines)  # r = 2/3 < AL: ngram pays at every level


def _launch_run(base_t: list[float], drafter_t: list[float]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One point, the baseline `ar` and the drafter `d`, one launch per step time given (two requests a
    launch, each with that step time): requests, windows and cells as decomposition_table reads them."""
    point = "chat|in-|out33|c4|t0"
    reqs, wins = [], []
    for variant, times in (("ar", base_t), ("d", drafter_t)):
        for launch, t in enumerate(times, start=1):
            wid = f"{variant}|{point}|l{launch}r1"
            wins.append({"window_id": wid, "cell_id": f"{variant}|{point}", "launch": launch, "repeat": 1})
            for i in range(2):  # 33 tokens: the baseline's 32 decode steps, the drafter's 16 (verify_steps 17)
                steps = 32 if variant == "ar" else 16
                reqs.append({"variant": variant, "point_id": point, "cell_id": f"{variant}|{point}", "window_id": wid,
                             "launch": launch, "repeat": 1, "index": i, "output_tokens": 33, "ttft_s": 0.1,
                             "e2e_s": 0.1 + steps * t, "spec": {"verify_steps": 17} if variant == "d" else None})
    key = {"category": "chat", "input_len": math.nan, "output_len": 33, "concurrency": 4, "temperature": 0.0,
           "rate": math.nan, "point_id": point}
    cells = pd.DataFrame([{**key, "variant": v, "speedup": s, "acceptance_length": al, "output_throughput_tok_s": tp}
                          for v, s, al, tp in (("ar", 1.0, 1.0, 100.0), ("d", 1.2, 2.0, 120.0))])
    return pd.DataFrame(reqs), pd.DataFrame(wins), cells


def test_step_cost_ratio_interval_over_launches() -> None:
    """r's 95% interval: Welch t on the log ratio of the launches' step times (docs/metrics.md,
    "Decomposition"), written out here with scipy; r itself stays pooled over every launch's requests."""
    from scipy import stats as sps

    base, drafter = [0.030, 0.033, 0.028], [0.045, 0.050, 0.041]
    d = decomposition_table(*_launch_run(base, drafter), "ar").iloc[0]
    md, mb = sum(drafter) / 3, sum(base) / 3
    assert d["step_cost_ratio"] == pytest.approx(md / mb)  # pooled; the same steps every launch: the means' ratio
    vd = sum((x - md) ** 2 for x in drafter) / 2 / (3 * md**2)
    vb = sum((x - mb) ** 2 for x in base) / 2 / (3 * mb**2)
    df = (vd + vb) ** 2 / (vd**2 / 2 + vb**2 / 2)
    half = sps.t.ppf(0.975, df) * math.sqrt(vd + vb)
    assert d["step_cost_ratio_ci_low"] == pytest.approx(md / mb * math.exp(-half), rel=1e-9)
    assert d["step_cost_ratio_ci_high"] == pytest.approx(md / mb * math.exp(half), rel=1e-9)
    assert d["step_cost_ratio_ci_low"] < 1.5 < d["step_cost_ratio_ci_high"]  # the steps were built about 1.5x
    # one launch on either side: no interval (NaN), r still there
    one = decomposition_table(*_launch_run(base[:1], drafter), "ar").iloc[0]
    assert math.isfinite(one["step_cost_ratio"])
    assert math.isnan(one["step_cost_ratio_ci_low"]) and math.isnan(one["step_cost_ratio_ci_high"])


def test_step_times_from_the_counters_get_the_same_launch_interval() -> None:
    """A drafter whose requests carry no target steps takes its step time from the windows' counters (34 steps
    over 2 requests of 33 tokens: 16 decode steps each, as the requests said before): r and its interval over
    launches are the same figures."""
    base, drafter = [0.030, 0.033, 0.028], [0.045, 0.050, 0.041]
    reqs, wins, cells = _launch_run(base, drafter)
    by_request = decomposition_table(reqs, wins, cells, "ar").iloc[0]
    d = reqs["variant"] == "d"
    reqs.loc[d, "spec"] = reqs.loc[d, "spec"].map(lambda s: {"verify_steps": None})
    wins["counters"] = [{"verify_steps": 34, "generation_tokens": 66} if v.startswith("d|") else None
                        for v in wins["window_id"]]
    row = decomposition_table(reqs, wins, cells, "ar").iloc[0]
    assert row["step_source"] == "counters" and by_request["step_source"] == "request"
    for col in ("step_cost_ratio", "step_cost_ratio_ci_low", "step_cost_ratio_ci_high"):
        assert row[col] == pytest.approx(by_request[col], rel=1e-9), col
    assert row["step_cost_ratio_ci_low"] < row["step_cost_ratio"] < row["step_cost_ratio_ci_high"]


def test_the_why_table_gives_r_with_its_launch_interval_where_there_is_one() -> None:
    from specbench.report.why import _with_interval

    row = pd.Series({"step_cost_ratio": 1.5, "step_cost_ratio_ci_low": 1.41, "step_cost_ratio_ci_high": 1.62})
    assert _with_interval(row, "step_cost_ratio") == "1.50 [1.41, 1.62]"
    # one launch, or a decomposition.csv from before the columns: the point alone
    assert _with_interval(row.drop(["step_cost_ratio_ci_low", "step_cost_ratio_ci_high"]), "step_cost_ratio") == "1.50"
    assert _with_interval(pd.Series({**row, "step_cost_ratio_ci_low": math.nan}), "step_cost_ratio") == "1.50"

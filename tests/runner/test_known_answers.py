"""Known answers, end to end: specbench's runner drives the stand-in server through each engine's real code
path (vLLM /metrics counters, SGLang per-request spec details, a command engine's counter or field), and
every number the report prints is compared with the server's own ground truth: the ledger in which the
stand-in writes, per finished request, what it did (tokens, target steps, accepted and proposed drafts,
the acceptance histogram, arrival and finish times, requests in flight). Expected values are computed
here from that ledger, never with specbench's code.

Also: counter_delta and VLLMEngine.read_counters on known Prometheus text.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from specbench.config import parse_config
from specbench.runner import RunOptions, run_matrix
from specbench.server.launch import sweep_facts
from tests.conftest import make_model_dir, standin_config
from tests.metrics.test_decomposition import check_decomposition

REPO = Path(__file__).resolve().parents[2]
FAKE_VLLM = REPO / "tests" / "standin" / "fake_vllm"
FAKE_SGLANG = REPO / "tests" / "standin" / "fake_sglang"
MS_PER_STEP = 10.0  # the stand-in's service time per target step


# -- the ground truth -----------------------------------------------------------------------------------
def ledger(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]


def by_window(run: Path, entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """window_id -> its WindowRecord and the ledger entries that arrived during it. Windows are measured
    one at a time, so arrival time alone places a request (readiness probes fall outside every window)."""
    windows = [json.loads(line) for line in (run / "windows.jsonl").read_text().splitlines()]
    out = {w["window_id"]: {"window": w, "entries": []} for w in windows}
    for e in entries:
        hits = [w for w in windows if w["t_start"] <= e["t_recv"] <= w["t_end"]]
        if hits:
            assert len(hits) == 1, "windows overlap in time"
            out[hits[0]["window_id"]]["entries"].append(e)
    return out


def truth(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """What the server did for these requests: tokens per target step, acceptance rate, per position."""
    tokens = sum(e["n_tokens"] for e in entries)
    steps = sum(e["target_steps"] for e in entries)
    out: dict[str, Any] = {"tokens": tokens, "steps": steps, "tau": tokens / steps}
    if entries and entries[0]["verify_steps"] is not None:
        accepted = sum(e["accepted"] for e in entries)
        proposed = sum(e["proposed"] for e in entries)
        verify = sum(e["verify_steps"] for e in entries)
        width = max(len(e["histogram"]) for e in entries)
        hist = [sum(e["histogram"][j] for e in entries if j < len(e["histogram"])) for j in range(width)]
        out.update(rate=accepted / proposed, draft_tau=1 + accepted / verify,
                   # P(draft position i accepted) = steps that accepted more than i drafts / verify steps
                   per_position=[sum(hist[i + 1:]) / verify for i in range(width - 1)])
    return out


def cells_of(run: Path) -> pd.DataFrame:
    return pd.read_csv(run / "cells.csv")


def cell_windows(windows: dict[str, dict[str, Any]], variant: str, point_id: str) -> list[dict[str, Any]]:
    return [w for w in windows.values() if w["window"]["variant"] == variant and w["window"]["point_id"] == point_id]


def check_acceptance(run: Path, windows: dict[str, dict[str, Any]], variant: str, source: str,
                     per_position: bool = True, rate: bool = True) -> None:
    cells = cells_of(run)
    rows = cells[cells.variant == variant]
    assert len(rows) > 0
    for _, row in rows.iterrows():
        ws = cell_windows(windows, variant, row.point_id)
        entries = [e for w in ws for e in w["entries"]]
        assert len(entries) == row.n_requests, row.point_id  # every measured request reached the server
        t = truth(entries)
        assert row.acceptance_source == source
        assert row.acceptance_length == pytest.approx(t["tau"], rel=1e-9), row.point_id
        assert t["tau"] > 1.2  # the stand-in really speculated (accept rate 0.7)
        if rate:
            assert row.acceptance_rate == pytest.approx(t["rate"], rel=1e-9)
        if per_position:
            assert json.loads(row.acceptance_per_position) == pytest.approx(t["per_position"], rel=1e-9)
        if len(ws) >= 3:  # the interval over windows (ratio estimator, t with n-1 df) holds the pooled tau
            taus = [truth(w["entries"])["tau"] for w in ws]
            assert row.acceptance_length_ci_low <= t["tau"] <= row.acceptance_length_ci_high
            assert len(set(taus)) > 1  # the windows differ (--vary-acceptance), so the interval has a width
            assert row.acceptance_length_ci_high > row.acceptance_length_ci_low


def check_same_requests(run: Path, windows: dict[str, dict[str, Any]], variants: list[str]) -> None:
    """Every variant got the same requests: in the records (prompt, output length, temperature per point,
    repeat and index) and on the wire (prompt, seed and max_tokens each server received, window by window)."""
    recs = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    specs = {v: sorted((r["point_id"], r["repeat"], r["index"], r["prompt_id"], r["output_len"], r["temperature"])
                       for r in recs if r["variant"] == v and not r["warmup"]) for v in variants}
    assert specs[variants[0]], "no requests recorded"
    for v in variants[1:]:
        assert specs[v] == specs[variants[0]], v
    wire: dict[str, Counter] = {v: Counter() for v in variants}
    for w in windows.values():
        win = w["window"]
        for e in w["entries"]:
            wire[win["variant"]][(win["point_id"], win["repeat"], json.dumps(e["source"]), e["seed"],
                                  e["max_tokens"], e["temperature"])] += 1
            assert e["max_tokens"] == int(win["point_id"].split("|out")[1].split("|")[0])
            assert e["seed"] is not None
    assert sum(wire[variants[0]].values()) == len(specs[variants[0]])
    for v in variants[1:]:
        assert wire[v] == wire[variants[0]], v


def check_closed_loop(windows: dict[str, dict[str, Any]]) -> None:
    """A closed loop at concurrency C keeps C requests in flight: the server saw exactly C at once."""
    for wid, w in windows.items():
        c = int(w["window"]["point_id"].split("|c")[1].split("|")[0])
        assert max(e["in_flight"] for e in w["entries"]) == c, wid


def server_throughput(entries: list[dict[str, Any]]) -> float:
    return sum(e["n_tokens"] for e in entries) / (max(e["t_done"] for e in entries) - min(e["t_recv"] for e in entries))


def check_throughput_and_speedup(run: Path, windows: dict[str, dict[str, Any]], baseline: str) -> None:
    """Throughput and speedup against the ledger, with no assumption about the machine's load: only the
    order of events (a request is sent before the server receives it), token counts, the definition
    (docs/metrics.md: a window's output tokens over its measured interval, averaged over the cell's
    windows) and the service time the stand-in sleeps, which load can only lengthen. How close the
    client's figure comes to the server's own is a benchmark (benchmarks/fidelity.py,
    benchmarks/client_overhead.py), not a unit test's business: it depends on how busy the machine is."""
    cells = cells_of(run)
    base = cells[cells.variant == baseline].set_index("point_id")
    recs = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    for _, row in cells.iterrows():
        ws = cell_windows(windows, row.variant, row.point_id)
        c = int(row.concurrency)
        per_window, whole = [], []
        for w in ws:
            mine = [r for r in recs if r["window_id"] == w["window"]["window_id"] and not r["warmup"]]
            assert min(r["t_send"] for r in mine) <= min(e["t_recv"] for e in w["entries"])  # sent, then received
            tokens = sum(r["output_tokens"] for r in mine)
            assert tokens == truth(w["entries"])["tokens"]  # the client counts what the server generated
            # the measured interval (docs/metrics.md): first completion a to last send b, the tokens arriving in
            # (a, b]; C=1, or no request sent at or after a and finished by b: the whole window
            span = max(r["t_send"] + r["e2e_s"] for r in mine) - min(r["t_send"] for r in mine)
            whole.append(tokens / span)
            a = min(r["t_send"] + r["e2e_s"] for r in mine)
            b = max(r["t_send"] for r in mine)
            if c > 1 and any(r["t_send"] >= a and r["t_send"] + r["e2e_s"] <= b for r in mine):
                inside = sum(k for r in mine for o, k in zip(r["chunk_offsets_s"], r["chunk_tokens"])
                             if a < r["t_send"] + o <= b)
                per_window.append(inside / (b - a))
            else:
                per_window.append(whole[-1])
        tp = row.output_throughput_tok_s
        assert tp > 0 and tp == pytest.approx(sum(per_window) / len(per_window), rel=1e-9)
        # The known service rate is a hard ceiling on a whole window: the stand-in sends a request's last chunk
        # no sooner than its steps x MS_PER_STEP after it arrived, so each request's e2e is at least that, and with
        # C in flight the window spans at least sum(e2e) / C: tokens / span <= C x tau per step time (2% for the
        # clocks). The measured interval (a, b] has no such bound (it once read 2.2% over): its steps need not
        # average the window's tau, and a client behind under load counts there tokens the server sent before a.
        # Its figure is checked against the definition, above.
        for w, rate in zip(ws, whole):
            assert rate <= 1.02 * c * 1000 / MS_PER_STEP * truth(w["entries"])["tau"], w["window"]["window_id"]
        b = base.loc[row.point_id]
        assert math.isfinite(row.speedup)
        assert row.speedup == pytest.approx(tp / b.output_throughput_tok_s, rel=1e-9)
        if row.variant != baseline:  # the drafter does the same tokens in fewer target steps (ledger)
            drafted = truth([e for w in ws for e in w["entries"]])
            plain = truth([e for w in cell_windows(windows, baseline, row.point_id) for e in w["entries"]])
            assert drafted["tokens"] == plain["tokens"] and drafted["steps"] < plain["steps"] / 1.2


# -- runs --------------------------------------------------------------------------------------------------
def run_config(tmp_path: Path, data: dict[str, Any]) -> Path:
    out = tmp_path / "run"
    result = run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True))
    assert set(result.status.values()) == {"done"}, result.status
    return out


def engine_env(tmp_path: Path, fake: Path) -> dict[str, str]:
    (tmp_path / "ledger").mkdir(exist_ok=True)
    return {"PYTHONPATH": f"{fake}{os.pathsep}{REPO}", "STANDIN_LEDGER": str(tmp_path / "ledger"),
            "STANDIN_MS_PER_TOKEN": str(MS_PER_STEP), "STANDIN_ACCEPT_RATE": "0.7", "STANDIN_VARY_ACCEPTANCE": "1"}


def sweep(**over: Any) -> dict[str, Any]:
    s = {"prompts": [{"set": "seed", "categories": ["code"], "per_category": 2}], "output_lens": [48],
         "concurrency": [1, 2], "waves": 1, "repeats": 3, "warmup_requests": 0, "request_timeout_s": 20}
    s.update(over)
    return s


def test_vllm_counter_path_known_answers(tmp_path: Path, port: int, no_survivors) -> None:
    """vLLM: acceptance from /metrics counter deltas per window; throughput, speedup, closed loop, pairing."""
    model = make_model_dir(tmp_path / "model")
    data = {"name": "ka-vllm", "model": {"path": str(model), "served_name": "standin"},
            "engine": {"kind": "vllm", "python": sys.executable, "version": "0.32.0", "port": port,
                       "startup_timeout_s": 30, "stop_timeout_s": 3, "env": engine_env(tmp_path, FAKE_VLLM)},
            "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                         {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}],
            "sweep": sweep(), "output_dir": str(tmp_path / "runs")}
    run = run_config(tmp_path, data)
    windows = by_window(run, ledger(tmp_path / "ledger"))
    # vLLM 0.32 reports acceptance per request too (--per-request-spec-decode-metrics): that is the source;
    # the /metrics counters are checked window by window below
    check_acceptance(run, windows, "ngram", "request")
    cells = cells_of(run)
    for _, row in cells[cells.variant == "ngram"].iterrows():  # vLLM's own 1 + accepted / drafts
        entries = [e for w in cell_windows(windows, "ngram", row.point_id) for e in w["entries"]]
        assert row.draft_acceptance_length == pytest.approx(truth(entries)["draft_tau"], rel=1e-9)
    assert (cells[cells.variant == "base"].acceptance_length == 1.0).all()
    # per-window deltas, not totals: each window's counters are that window's requests only
    for w in windows.values():
        if w["window"]["variant"] == "ngram":
            t = truth(w["entries"])
            assert w["window"]["counters"]["generation_tokens"] == t["tokens"]
            assert w["window"]["counters"]["num_accepted_tokens"] == t["tokens"] - t["steps"]
    check_closed_loop(windows)
    check_same_requests(run, windows, ["base", "ngram"])
    check_throughput_and_speedup(run, windows, "base")
    check_step_cost(run)
    no_survivors()


def check_step_cost(run: Path) -> None:
    """The decomposition multiplies back to the speedup, and the step time is the stand-in's: every target
    step sleeps MS_PER_STEP, drafting or not, so r is about 1 (a loaded machine's sleeps overrun alike)."""
    d = check_decomposition(run)
    assert (d["step_time_s"] >= 0.99 * MS_PER_STEP / 1000).all()  # a sleep is a floor
    assert d["step_cost_ratio"].to_numpy() == pytest.approx(1.0, rel=0.2)


def test_vllm_launches_reconcile_window_by_window(tmp_path: Path, port: int, no_survivors) -> None:
    """sweep.launches 2 on vLLM: every window is reconciled with its own requests only (launch 2's
    repeat 1 is not launch 1's), against the ledger: per-request drafting steps and the counters' deltas
    both equal the server's verify steps for that window, and the server timed exactly its requests."""
    model = make_model_dir(tmp_path / "model")
    data = {"name": "ka-launches", "model": {"path": str(model), "served_name": "standin"},
            "engine": {"kind": "vllm", "python": sys.executable, "version": "0.32.0", "port": port,
                       "startup_timeout_s": 30, "stop_timeout_s": 3, "env": engine_env(tmp_path, FAKE_VLLM)},
            "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                         {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}],
            "sweep": sweep(concurrency=[2], repeats=2, launches=2), "output_dir": str(tmp_path / "runs")}
    run = run_config(tmp_path, data)
    windows = by_window(run, ledger(tmp_path / "ledger"))
    assert {w["window"]["launch"] for w in windows.values()} == {1, 2}
    rec = pd.read_csv(run / "reconciliation.csv").set_index("window_id")
    assert set(rec.index) == set(windows)  # every window checked, each once
    for wid, w in windows.items():
        entries, row = w["entries"], rec.loc[wid]
        assert row.client_requests == row.server_requests == len(entries) == w["window"]["n_requests"], wid
        if w["window"]["variant"] == "ngram":
            t = truth(entries)
            assert bool(row.acceptance_ok), wid
            # vLLM's num_drafts = drafting steps = the server's verify steps in this window
            assert row.num_drafts_per_request == row.num_drafts_counter == sum(e["verify_steps"] for e in entries)
            assert row.num_accepted_tokens_per_request == t["tokens"] - t["steps"], wid
    cells = cells_of(run)
    assert (cells.launches == 2).all() and (cells.interval_unit == "launch").all()
    assert (cells.acceptance_windows_checked[cells.variant == "ngram"] == 4).all()
    assert (cells.acceptance_windows_mismatched == 0).all()
    assert cells.client_ttft_mean_s.notna().all() and cells.server_ttft_mean_s.notna().all()
    for w in cells.warnings.fillna(""):
        assert "acceptance_mismatch" not in w and "server_count_mismatch" not in w, w
    for _, row in cells[cells.variant == "ngram"].iterrows():  # pooled over both launches' windows
        entries = [e for w in cell_windows(windows, "ngram", row.point_id) for e in w["entries"]]
        assert row.n_requests == len(entries) and row.acceptance_source == "request"
        assert row.acceptance_length == pytest.approx(truth(entries)["tau"], rel=1e-9)
        assert row.draft_acceptance_length == pytest.approx(truth(entries)["draft_tau"], rel=1e-9)
    check_same_requests(run, windows, ["base", "ngram"])
    no_survivors()


def test_sglang_request_path_known_answers(tmp_path: Path, port: int, no_survivors, monkeypatch) -> None:
    """SGLang: acceptance from each request's sglext.spec_tokens_details (the eagle3 cells)."""
    from specbench.server.engines.base import dist_version

    model = make_model_dir(tmp_path / "model")
    draft = tmp_path / "eagle3"
    draft.mkdir()
    env = engine_env(tmp_path, FAKE_SGLANG)
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    dist_version.cache_clear()
    data = {"name": "ka-sglang", "model": {"path": str(model), "served_name": "standin"},
            "engine": {"kind": "sglang", "version": "0.5.23", "port": port, "startup_timeout_s": 30,
                       "stop_timeout_s": 3, "env": env},
            "variants": [{"name": "ar", "drafter": "autoregressive", "baseline": True},
                         {"name": "eagle3", "drafter": "eagle3",
                          "params": {"draft_model_path": str(draft), "steps": 3, "topk": 1, "num_draft_tokens": 4}}],
            "sweep": sweep(concurrency=[2]), "output_dir": str(tmp_path / "runs")}
    try:
        run = run_config(tmp_path, data)
    finally:
        dist_version.cache_clear()
    windows = by_window(run, ledger(tmp_path / "ledger"))
    check_acceptance(run, windows, "eagle3", "request")
    check_step_cost(run)
    check_closed_loop(windows)
    check_same_requests(run, windows, ["ar", "eagle3"])
    no_survivors()


@pytest.mark.parametrize("how", ["counter", "field-verify-steps", "field-accept-length"])
def test_command_engine_known_answers(how: str, tmp_path: Path, model_dir: Path, port: int, no_survivors) -> None:
    """A command engine: acceptance from a Prometheus counter of verify steps, or from a response field
    holding either the verify steps or the acceptance length."""
    (tmp_path / "ledger").mkdir()
    engine: dict[str, Any] = {"env": {"PYTHONPATH": str(REPO), "STANDIN_LEDGER": str(tmp_path / "ledger")}}
    if how == "counter":
        engine["acceptance_metric"] = "vllm:spec_decode_num_drafts_total"  # = verify steps in the stand-in
    else:
        engine["acceptance_field"] = "standin_spec." + ("verify_steps" if how == "field-verify-steps"
                                                        else "accept_length")
        engine["acceptance_field_kind"] = "verify_steps" if how == "field-verify-steps" else "accept_length"
    flags = ["--accept-rate", "0.7", "--drafts-per-step", "3", "--ms-per-token", str(MS_PER_STEP), "--spec-field",
             "--vary-acceptance"]
    data = standin_config(model_dir, port, faults={"ngram": flags}, engine=engine,
                          sweep=sweep(concurrency=[2], repeats=3 if how == "counter" else 1))
    run = run_config(tmp_path, data)
    windows = by_window(run, ledger(tmp_path / "ledger"))
    check_acceptance(run, windows, "ngram", "counters" if how == "counter" else "request",
                     per_position=False, rate=False)
    # the step time from each request's steps, or from the verify-step counter window by window: the stand-in
    # sleeps MS_PER_STEP a target step (the baseline here does not sleep: its step time is no known answer)
    d = pd.read_csv(run / "decomposition.csv")
    assert len(d) and (d["step_source"] == ("counters" if how == "counter" else "request")).all()
    assert (d["step_time_s"] >= 0.99 * MS_PER_STEP / 1000).all()
    no_survivors()


# -- units: counters ------------------------------------------------------------------------------------
PROM_BEFORE = """# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 5
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 30
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 15
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 12
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 6
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 100
vllm:generation_tokens_total{engine="1",model_name="m"} 40
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 1
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="10"} 0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 7
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 3
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 4
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 2
"""


def read_counters(text: str) -> dict[str, Any]:
    from specbench.server.engines.vllm import VLLMEngine

    cfg = parse_config({"model": {"path": "/m"}, "engine": {"kind": "vllm", "version": "0.32.0"},
                        "variants": [{"name": "a", "drafter": "autoregressive", "baseline": True}],
                        "sweep": {"output_lens": [8], "concurrency": [1]}})

    async def go() -> dict[str, Any]:
        transport = httpx.MockTransport(lambda req: httpx.Response(200, text=text))
        async with httpx.AsyncClient(transport=transport) as http:
            return await VLLMEngine(cfg.engine, sweep_facts(cfg), "/m", "m").read_counters(http, "http://x/metrics")

    return asyncio.run(go())


def test_read_counters_sums_labels_and_orders_positions() -> None:
    got = read_counters(PROM_BEFORE)
    assert got["num_drafts"] == 15 and got["num_draft_tokens"] == 45
    assert got["num_accepted_tokens"] == 18 and got["generation_tokens"] == 140
    # positions 0, 1, 2, 10 summed over engines and ordered numerically (not as strings: "10" < "2")
    assert got["per_position"] == [10, 6, 1, 0]


def test_read_counters_missing_counters_are_absent_not_zero() -> None:
    got = read_counters("# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total 7\n")
    assert got["generation_tokens"] == 7 and got["num_drafts"] is None and got["per_position"] == []


def counter_delta():
    from specbench import runner

    return runner.counter_delta


def test_counter_delta_is_the_window_increase() -> None:
    before = {"num_drafts": 15.0, "num_accepted_tokens": 18.0, "generation_tokens": 140.0, "per_position": [10, 6]}
    after = {"num_drafts": 25.0, "num_accepted_tokens": 30.0, "generation_tokens": 200.0,
             "per_position": [16, 9, 2]}
    counters, per_pos = counter_delta()(before, after)
    assert counters == {"num_drafts": 10.0, "num_accepted_tokens": 12.0, "generation_tokens": 60.0}
    assert per_pos == [6, 3, 2]  # a position first seen in this window counts from 0


def test_counter_delta_edge_cases() -> None:
    delta = counter_delta()
    counters, per_pos = delta({}, {"verify_steps": 4.0, "per_position": []})
    assert counters == {"verify_steps": 4.0} and per_pos is None  # no positions: None, not []
    counters, _ = delta({"verify_steps": None}, {"verify_steps": 9.0, "generation_tokens": None})
    assert counters == {"verify_steps": 9.0}  # a counter absent after the window is left out

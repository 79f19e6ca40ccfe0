"""Known answers for the per-window cross-checks (specbench.metrics.reconcile) and the per-request figures
they rest on (specbench.metrics.requests): which windows are checked, the sums and means, the TIMING_*
thresholds at their boundaries, the warning texts and the reconciliation.csv columns a user reads."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from specbench.metrics import reconciliation_table
from specbench.metrics.reconcile import (
    TimingCheck,
    acceptance_checks,
    cell_reconciliation,
    reconciliation_warnings,
    timing_checks,
    timing_margin_s,
    timing_tolerance_s,
)
from specbench.metrics.requests import (
    measured_requests,
    request_itls,
    request_output_tokens,
    request_tpot,
    to_measured_requests,
    window_throughput_arrays,
)
from specbench.metrics.steady import window_throughput
from specbench.metrics.warnings import WarningCode
from specbench.shared.schema import RequestRecord

NAN = float("nan")


def _req(repeat: int = 1, index: int = 0, *, cell: str = "ngram|c1", variant: str = "ngram",
         ttft: float | None = 0.1, e2e: float | None = 1.0, error: str | None = None,
         spec: tuple[int, int, int] | None = None, **kw: Any) -> dict[str, Any]:
    """One request record; spec = (drafted_steps, accepted_drafts, proposed_drafts)."""
    return {"variant": variant, "cell_id": cell, "point_id": cell.split("|")[1], "window_id": f"{cell}|r{repeat}",
            "repeat": repeat, "index": index, "prompt_id": f"p{index}", "warmup": False, "t_send": 100.0 + index,
            "ttft_s": ttft, "e2e_s": e2e, "chunk_offsets_s": [0.1, 1.0], "chunk_tokens": [1, 9],
            "output_tokens": 10, "error": error,
            "spec": None if spec is None else dict(zip(("drafted_steps", "accepted_drafts", "proposed_drafts"), spec)),
            **kw}


def _win(repeat: int = 1, *, cell: str = "ngram|c1", **counters: float | None) -> dict[str, Any]:
    return {"window_id": f"{cell}|r{repeat}", "cell_id": cell, "variant": cell.split("|")[0],
            "point_id": cell.split("|")[1], "repeat": repeat, "counters": counters or None}


ACC_OK = {"num_drafts": 14, "num_accepted_tokens": 20, "num_draft_tokens": 56}  # 6+8, 11+9, 24+32
TWO_SPECS = [(6, 11, 24), (8, 9, 32)]


def _timing(repeat: int = 1, *, n: int = 2, server_n: float = 2, c_ttft: float = 0.1, s_ttft: float = 0.1,
            c_e2e: float = 1.0, s_e2e: float = 1.0) -> TimingCheck:
    return TimingCheck(window_id=f"w{repeat}", repeat=repeat, client_requests=n, server_requests=server_n,
                       client_ttft_mean_s=c_ttft, server_ttft_mean_s=s_ttft, client_e2e_mean_s=c_e2e,
                       server_e2e_mean_s=s_e2e)


def _details(ws: list) -> dict[WarningCode, str]:
    return {w.code: w.detail for w in ws}


# -- acceptance: per-request sums vs counter deltas ------------------------------------------------------
def test_acceptance_checks_skip_unusable_windows_and_sum_the_rest() -> None:
    reqs = [
        _req(1, 0, spec=TWO_SPECS[0]),  # r1: counters missing -> not checkable
        _req(2, 0), _req(2, 1),  # r2: no request has figures (engine without them) -> nothing to check
        _req(3, 0, spec=TWO_SPECS[0]), _req(3, 1, spec=TWO_SPECS[1], error="boom", ttft=None, e2e=None),  # failed
        _req(4, 0, spec=TWO_SPECS[0]), _req(4, 1, spec=TWO_SPECS[1]),  # r4: checkable, adds up
        _req(5, 0, spec=TWO_SPECS[0]), _req(5, 1),  # r5: one of two requests without figures
    ]
    wins = pd.DataFrame([_win(1), _win(2, **ACC_OK), _win(3, **ACC_OK), _win(4, **ACC_OK), _win(5, **ACC_OK)])
    checks = acceptance_checks(to_measured_requests(pd.DataFrame(reqs)), wins)
    assert [(a.repeat, a.requests, a.missing, a.ok) for a in checks] == [(4, 2, 0, True), (5, 2, 1, False)]
    assert checks[0].per_request == {"num_drafts": 14, "num_accepted_tokens": 20, "num_draft_tokens": 56}
    assert checks[0].window_id == "ngram|c1|r4" and checks[0].differences == {}
    # r5's one request with figures sums to (6, 11, 24), so the counts differ too; the first bad window is named
    assert checks[1].differences == {"num_drafts": -8, "num_accepted_tokens": -9, "num_draft_tokens": -32}
    assert cell_reconciliation(checks, [])["acceptance_windows_checked"] == 2
    assert cell_reconciliation(checks, [])["acceptance_windows_mismatched"] == 1


def test_verify_steps_per_request_are_reconciled_with_a_verify_step_counter() -> None:
    """A command-engine server (e.g. scripts/ddtree_server) reports verify steps per response and counts them
    in a Prometheus counter: the two are checked against each other like vLLM's draft counters."""
    reqs = [_req(1, 0, spec=None), _req(1, 1, spec=None), _req(2, 0, spec=None), _req(2, 1, spec=None)]
    steps = [4, 6, 4, 6]
    for r, n in zip(reqs, steps):
        r["spec"] = {"verify_steps": n}
    wins = pd.DataFrame([_win(1, verify_steps=10), _win(2, verify_steps=11)])  # r2: one step counted too many
    checks = acceptance_checks(to_measured_requests(pd.DataFrame(reqs)), wins)
    assert [(a.repeat, a.ok) for a in checks] == [(1, True), (2, False)]
    assert checks[0].per_request == checks[0].counters == {"verify_steps": 10}
    assert checks[1].differences == {"verify_steps": -1}


def test_acceptance_warning_names_the_counts_or_the_requests_without_figures() -> None:
    reqs = [_req(1, 0, spec=TWO_SPECS[0]), _req(1, 1, spec=TWO_SPECS[1]),
            _req(2, 0, spec=(7, 12, 24)), _req(2, 1, spec=TWO_SPECS[1])]  # r2: one step and one token too many
    wins = pd.DataFrame([_win(1, **ACC_OK), _win(2, **ACC_OK)])
    acc = acceptance_checks(to_measured_requests(pd.DataFrame(reqs)), wins)
    assert _details(reconciliation_warnings(acc, [])) == {WarningCode.ACCEPTANCE_MISMATCH: (
        "1 of 2 windows disagree (r2: num_drafts 15 per request vs 14 counted, "
        "num_accepted_tokens 21 per request vs 20 counted)")}
    # every count agrees but one request has no figures: the warning says so instead of listing counts
    reqs = [_req(1, 0, spec=TWO_SPECS[0]), _req(1, 1, spec=TWO_SPECS[1]), _req(1, 2)]
    acc = acceptance_checks(to_measured_requests(pd.DataFrame(reqs)), pd.DataFrame([_win(1, **ACC_OK)]))
    assert _details(reconciliation_warnings(acc, [])) == {WarningCode.ACCEPTANCE_MISMATCH: (
        "1 of 1 windows disagree (r1: 1 of 3 requests without figures)")}


def test_windows_of_two_launches_are_checked_with_their_own_requests() -> None:
    """sweep.launches 2: launch 2's repeat 1 is another window than launch 1's; each is checked against
    its own requests (keyed by window_id), and a warning names the window as its id does (l2r1)."""
    l2 = {"window_id": "ngram|c1|l2r1", "launch": 2}
    reqs = [_req(1, 0, spec=TWO_SPECS[0]), _req(1, 1, spec=TWO_SPECS[1]),
            _req(1, 0, spec=(7, 12, 24), **l2), _req(1, 1, spec=TWO_SPECS[1], **l2)]  # launch 2: one step more
    timed = {"ttft_sum_s": 0.2, "ttft_count": 2, "e2e_sum_s": 2.0, "e2e_count": 2}
    wins = pd.DataFrame([_win(1, **ACC_OK, **timed) | {"launch": 1}, _win(1, **ACC_OK, **timed) | l2])
    ms = to_measured_requests(pd.DataFrame(reqs))
    acc, timing = acceptance_checks(ms, wins), timing_checks(ms, wins)
    assert [(a.window_id, a.requests, a.ok) for a in acc] == [("ngram|c1|r1", 2, True), ("ngram|c1|l2r1", 2, False)]
    assert [(t.window_id, t.client_requests, t.same_requests) for t in timing] == [
        ("ngram|c1|r1", 2, True), ("ngram|c1|l2r1", 2, True)]
    assert _details(reconciliation_warnings(acc, timing)) == {WarningCode.ACCEPTANCE_MISMATCH: (
        "1 of 2 windows disagree (l2r1: num_drafts 15 per request vs 14 counted, "
        "num_accepted_tokens 21 per request vs 20 counted)")}
    assert cell_reconciliation(acc, timing)["client_ttft_mean_s"] == pytest.approx(0.1)


# -- timing: client means vs the server histograms' sum / count deltas -----------------------------------
def test_timing_checks_skip_windows_with_a_failed_or_untimed_request() -> None:
    timed = {"ttft_sum_s": 0.09, "ttft_count": 1, "e2e_sum_s": 0.95, "e2e_count": 1}
    reqs = [
        _req(1, 0, error="stream cut", ttft=0.1, e2e=0.5),  # failed after its first token: not in vLLM's books
        _req(2, 0, ttft=None, e2e=1.0),  # succeeded without a timed first token
        _req(3, 0, ttft=0.1, e2e=1.0),  # one request: server means are the sums themselves
        _req(4, 0), _req(4, 1),  # the server's histograms saw nothing: its means are unknown, not a crash
    ]
    wins = pd.DataFrame([_win(1, **timed), _win(2, **timed), _win(3, **timed),
                         _win(4, ttft_sum_s=0, ttft_count=0, e2e_sum_s=0, e2e_count=0)])
    checks = timing_checks(to_measured_requests(pd.DataFrame(reqs)), wins)
    assert [(t.repeat, t.client_requests, t.server_requests) for t in checks] == [(3, 1, 1), (4, 2, 0)]
    assert (checks[0].server_ttft_mean_s, checks[0].server_e2e_mean_s) == (0.09, 0.95)
    assert (checks[0].client_ttft_mean_s, checks[0].client_e2e_mean_s) == (0.1, 1.0)
    assert math.isnan(checks[1].server_ttft_mean_s) and math.isnan(checks[1].server_e2e_mean_s)
    assert not checks[1].same_requests


def test_pooled_means_weight_windows_by_requests_and_leave_out_foreign_traffic() -> None:
    timing = [_timing(1, n=2, c_ttft=0.1, s_ttft=0.09, c_e2e=1.0, s_e2e=0.98),
              _timing(2, n=1, server_n=1, c_ttft=0.4, s_ttft=0.38, c_e2e=2.0, s_e2e=1.9),
              _timing(3, n=2, server_n=3, c_ttft=9.0, s_ttft=9.0, c_e2e=9.0, s_e2e=9.0)]  # other traffic
    got = cell_reconciliation([], timing)
    # (2 x window-1 mean + 1 x window-2 mean) / 3 requests
    assert got["client_ttft_mean_s"] == pytest.approx((2 * 0.1 + 0.4) / 3)
    assert got["server_ttft_mean_s"] == pytest.approx((2 * 0.09 + 0.38) / 3)
    assert got["client_e2e_mean_s"] == pytest.approx((2 * 1.0 + 2.0) / 3)
    assert got["server_e2e_mean_s"] == pytest.approx((2 * 0.98 + 1.9) / 3)
    assert (got["acceptance_windows_checked"], got["acceptance_windows_mismatched"]) == (0, 0)
    assert math.isnan(cell_reconciliation([], [timing[2]])["client_e2e_mean_s"])


def test_timing_warning_texts() -> None:
    ws = _details(reconciliation_warnings([], [
        _timing(1, c_ttft=0.0979, s_ttft=0.1),  # 2.1 ms below a 100 ms server mean (tolerance 2 ms)
        _timing(2, c_e2e=23.0, s_e2e=20.0),  # 3 s above a 20 s server mean (margin 10% = 2 s)
        _timing(3, n=2, server_n=3)]))  # the server timed a request the client did not send
    assert ws == {
        WarningCode.SERVER_COUNT_MISMATCH: "r3: the server timed 3 requests, the client sent 2",
        WarningCode.CLIENT_TIMING_BELOW_SERVER: "1 window figure(s): r1 mean TTFT client 97.9 ms, server 100.0 ms",
        WarningCode.CLIENT_TIMING_ABOVE_SERVER: ("1 window figure(s): r2 mean e2e client 23000.0 ms, "
                                                 "server 20000.0 ms (margin 2000 ms)")}


def test_an_unknown_server_ttft_still_checks_e2e() -> None:
    ws = reconciliation_warnings([], [_timing(1, s_ttft=NAN, c_e2e=1.2, s_e2e=1.0)])  # 200 ms > 100 ms margin
    assert [w.code for w in ws] == [WarningCode.CLIENT_TIMING_ABOVE_SERVER]


BELOW = WarningCode.CLIENT_TIMING_BELOW_SERVER
ABOVE = WarningCode.CLIENT_TIMING_ABOVE_SERVER


@pytest.mark.parametrize("client, server, expected", [
    # below: server 100 ms, tolerance max(2 ms, 1% = 1 ms) = 2 ms
    (0.0979, 0.1, {BELOW}),  # 2.1 ms below
    (0.1 - timing_tolerance_s(0.1), 0.1, set()),  # exactly at the tolerance: quiet (strictly below fires)
    (0.099, 0.1, set()),  # 1 ms below: clock resolution
    # above: server 20 ms, margin max(50 ms, 10% = 2 ms) = 50 ms; 0.07 - 0.02 == 0.05 exactly in binary
    (0.07, 0.02, set()),  # exactly at the margin: quiet (strictly above fires)
    (0.0701, 0.02, {ABOVE}),  # 50.1 ms above
    (0.0699, 0.02, set()),
])
def test_timing_thresholds_at_their_boundaries(client: float, server: float, expected: set) -> None:
    assert 0.07 - 0.02 == timing_margin_s(0.02)  # the boundary case above is exact
    ws = reconciliation_warnings([], [_timing(1, c_ttft=client, s_ttft=server)])
    assert {w.code for w in ws} == expected


# -- reconciliation.csv ---------------------------------------------------------------------------------
def test_reconciliation_table_rows_and_columns() -> None:
    reqs = [
        _req(1, 0, cell="ngram|c2", spec=TWO_SPECS[0], ttft=0.12, e2e=1.1),
        _req(1, 1, cell="ngram|c2", spec=TWO_SPECS[1], ttft=0.10, e2e=0.9),
        _req(1, 0, cell="base|c1", variant="base", ttft=0.2, e2e=2.0),  # one request, no per-request figures
    ]
    timed2 = {"ttft_sum_s": 0.2, "ttft_count": 2, "e2e_sum_s": 1.9, "e2e_count": 2}
    timed1 = {"ttft_sum_s": 0.19, "ttft_count": 1, "e2e_sum_s": 1.95, "e2e_count": 1}
    wins = [_win(1, cell="ngram|c2", **ACC_OK, **timed2), _win(1, cell="base|c1", **timed1)]
    rec = reconciliation_table(pd.DataFrame(reqs), pd.DataFrame(wins))
    rows = [{k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))}
            for r in rec.to_dict("records")]
    # cells in cell_id order ("base|c1" < "ngram|c2"); the baseline has timing only
    assert rows[0] == {"variant": "base", "point_id": "c1", "window_id": "base|c1|r1", "launch": 1, "repeat": 1,
                       "client_requests": 1, "server_requests": 1, "client_ttft_mean_s": 0.2,
                       "server_ttft_mean_s": 0.19, "client_e2e_mean_s": 2.0, "server_e2e_mean_s": 1.95}
    assert rows[1] == pytest.approx({
        "variant": "ngram", "point_id": "c2", "window_id": "ngram|c2|r1", "launch": 1, "repeat": 1,
        "acceptance_ok": True, "requests_without_figures": 0,
        "num_drafts_per_request": 14, "num_accepted_tokens_per_request": 20, "num_draft_tokens_per_request": 56,
        "num_drafts_counter": 14, "num_accepted_tokens_counter": 20, "num_draft_tokens_counter": 56,
        "client_requests": 2, "server_requests": 2, "client_ttft_mean_s": 0.11, "server_ttft_mean_s": 0.1,
        "client_e2e_mean_s": 1.0, "server_e2e_mean_s": 0.95})
    assert len(rows) == 2


# -- per-request figures --------------------------------------------------------------------------------
@pytest.mark.parametrize("usage, chunks, expected", [
    (40, [1, 39], 40.0),  # the server's usage wins
    (None, [1, 3, 2], 6.0),  # no usage: the sum of tokens per chunk
    (NAN, [5], 5.0),  # a single chunk
    (None, [], NAN),  # nothing streamed, no usage: unknown, not zero
    (None, None, NAN),
])
def test_request_output_tokens(usage: Any, chunks: list[int] | None, expected: float) -> None:
    got = request_output_tokens(usage, chunks)
    assert got == expected or (math.isnan(got) and math.isnan(expected))


def test_tpot_of_two_tokens_is_the_one_gap() -> None:
    assert request_tpot(1.0, 0.25, 2) == 0.75  # (1.0 - 0.25) / (2 - 1)


def test_itl_skips_chunks_without_tokens() -> None:
    # tokens at 0.5 (1), an empty chunk at 0.7, 2 tokens at 0.9: the gap 0.4 runs from 0.5 and is split in two
    itl = request_itls([0.5, 0.7, 0.9], [1, 0, 2])
    assert itl == pytest.approx([0.2, 0.2])
    assert request_itls([0.3, 0.5, 0.9], [0, 1, 2]) == pytest.approx([0.2, 0.2])  # TTFT is the first token


def test_window_throughput_undefined_cases() -> None:
    one = np.array([10.0])
    # every request failed, though one of them has a finish time: no throughput (not 0 tokens/s)
    assert math.isnan(window_throughput_arrays(one, np.array([2.0]), np.array([5.0]), np.array([False])))
    # a zero span (finish == send) has no rate
    assert math.isnan(window_throughput_arrays(one, np.array([0.0]), np.array([5.0]), np.array([True])))


def test_window_throughput_counts_streamed_tokens_without_usage() -> None:
    rec = RequestRecord(variant="v", cell_id="c", point_id="p", window_id="w", category="code", prompt_id="p0",
                        output_len=8, concurrency=1, temperature=0.0, repeat=1, index=0, warmup=False,
                        t_send=0.0, ttft_s=0.5, e2e_s=2.0, output_tokens=None, chunk_offsets_s=[0.5, 2.0],
                        chunk_tokens=[3, 5])
    assert window_throughput([rec]) == 4.0  # (3 + 5) tokens / 2 s


def test_to_measured_requests_defaults_of_missing_fields() -> None:
    [bare] = to_measured_requests(pd.DataFrame([_req(2, 7, output_tokens=None, chunk_tokens=[2, 2, 1])])
                                  .drop(columns="prompt_id"))
    named = to_measured_requests(pd.DataFrame([_req(1, 0), _req(1, 3, spec=(1, 2, 3))]))[1]
    assert (bare.launch, bare.repeat, bare.index, bare.prompt_id) == (1, 2, 7, "")  # launched once; no prompt id
    assert bare.n_out == 5  # no usage: streamed tokens
    assert (named.index, named.prompt_id) == (3, "p3")
    assert named.spec == {"drafted_steps": 1, "accepted_drafts": 2, "proposed_drafts": 3}
    assert to_measured_requests(pd.DataFrame([{**_req(1, 0), "spec": NAN}]))[0].spec is None  # NaN: no figures


@pytest.mark.parametrize("unknown_warmup", [[NAN, True, NAN], [NAN, 1.0, NAN]])  # object or float column
def test_measured_requests_without_or_with_unknown_warmup(unknown_warmup: list) -> None:
    reqs = pd.DataFrame([_req(1, 0), _req(1, 1), _req(2, 0)]).drop(columns="warmup")
    wins = pd.DataFrame([_win(1)])  # r2 never completed
    assert list(measured_requests(reqs, wins)["index"]) == [0, 1]  # no warmup column: none is warmup
    reqs["warmup"] = unknown_warmup  # unknown (e.g. frames concatenated with and without it): counts
    assert list(measured_requests(reqs, wins)["index"]) == [0]
    assert measured_requests(reqs, pd.DataFrame()).empty  # no window completed

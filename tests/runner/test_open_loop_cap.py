"""The open loop's safety cap, end to end: with `sweep.load.max_in_flight` requests outstanding the next send
waits for one to finish, so the server never sees more in flight (its ledger says how many were), and the wait
is recorded as the request's send-time error. Offered 50 req/s, each request takes the stand-in 8 x 20 ms,
2 slots: the 20 requests cannot have been sent on schedule (0.4 s) when they take 20 x 160 ms / 2 = 1.6 s."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from specbench.config import parse_config
from specbench.runner import RunOptions, run_matrix
from tests.conftest import make_model_dir, standin_config


def test_no_more_than_max_in_flight_and_the_wait_is_recorded(tmp_path: Path, port: int,
                                                              no_survivors: Callable[..., None]) -> None:
    model = make_model_dir(tmp_path / "model")
    (tmp_path / "ledger").mkdir()
    cfg = standin_config(model, port, variants=[{"name": "base", "drafter": "autoregressive", "baseline": True}],
                         faults={"base": ["--ms-per-token", "20", "--ledger", str(tmp_path / "ledger")]},
                         sweep={"output_lens": [8], "load": {"kind": "open", "rates": [50], "requests_per_rate": 20,
                                                             "warmup_requests": 0, "max_in_flight": 2}})
    del cfg["sweep"]["concurrency"]
    result = run_matrix(parse_config(cfg), RunOptions(out=tmp_path / "run", skip_preflight=True))
    assert result.status == {"base": "done"}
    no_survivors()
    entries = [json.loads(line) for f in (tmp_path / "ledger").glob("*.jsonl") for line in f.read_text().splitlines()]
    streamed = [e for e in entries if e["stream"] and e["max_tokens"] == 8]
    assert len(streamed) == 20
    assert max(e["in_flight"] for e in streamed) == 2  # the cap was reached and never passed
    recs = [json.loads(line) for line in (tmp_path / "run" / "requests.jsonl").read_text().splitlines()]
    lags = sorted(r["send_lag_s"] for r in recs if r["rate"] is not None)
    assert len(lags) == 20 and lags[-1] > 0.8  # the last send waited for slots, and its record says so
    assert all(r["error"] is None for r in recs)

"""The client and the load shapes in-process, on a fake transport that replays SSE bytes at set times
(tests/standin/fake_transport.py): no server, no port, milliseconds."""

from __future__ import annotations

import asyncio

import pytest

from specbench.client.load import ClosedLoop, OpenLoop, make_load
from specbench.client.stream import Endpoint, stream_planned, stream_request
from specbench.config import parse_config
from specbench.plan.windows import PlannedRequest, RequestIdentity
from specbench.server.engines.base import RequestSpec
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import sweep_facts
from specbench.shared.schema import RequestRecord
from tests.standin.fake_transport import FakeTransport, Reads, chunk, sse, stream

CFG = parse_config({"model": {"path": "/m"}, "variants": [{"name": "a", "drafter": "autoregressive",
                    "baseline": True}], "sweep": {"output_lens": [4], "concurrency": [1]}})
ENGINE = VLLMEngine(CFG.engine, sweep_facts(CFG), "/m", "m")


def spec(tokens: int = 4, seed: int = 0) -> RequestSpec:
    return RequestSpec(messages=[{"role": "user", "content": "hi"}], prompt_text="hi", max_tokens=tokens,
                       temperature=0.0, seed=seed)


def planned(n: int, concurrency: int, at_s: float | None = None) -> list[PlannedRequest]:
    return [PlannedRequest(spec=spec(seed=i), at_s=at_s, fields=RequestIdentity(
        variant="a", cell_id="a|c", point_id="c", window_id="a|c|r0", category="c", prompt_id=f"p{i}", input_len=None,
        output_len=4, concurrency=concurrency, temperature=0.0, launch=0, repeat=0, index=i, warmup=False))
        for i in range(n)]


def endpoint(t: FakeTransport) -> Endpoint:
    return Endpoint(ENGINE, t, "http://fake", 5.0)


def test_chunk_times_are_the_reads_times_and_the_end_is_the_done_read():
    """TTFT, chunk offsets and e2e_s all come from the times the reads arrived (here set: tokens 10 ms apart,
    [DONE] 5 s after the post began, long after the fake returned), not from when the task ran."""
    reads: Reads = [*stream(4)[:-1], (5.0, sse({"choices": [], "usage": {"completion_tokens": 4}}, "[DONE]"))]
    t = FakeTransport(lambda body: reads)
    r = asyncio.run(stream_request(endpoint(t), spec()))
    assert r.error is None and r.token_ids == [1, 2, 3, 4] and r.chunk_tokens == [1, 1, 1, 1]
    lead = r.chunk_offsets_s[0] - 0.01  # from the request's t0 to the post's origin: the same for every read
    assert r.ttft_s == r.chunk_offsets_s[0]
    assert r.chunk_offsets_s == pytest.approx([lead + 0.01 * i for i in range(1, 5)], abs=1e-9)
    assert r.e2e_s == pytest.approx(lead + 5.0, abs=1e-9)


def test_a_stream_without_done_is_an_error_and_keeps_what_arrived():
    t = FakeTransport(lambda body: stream(4)[:-1])
    r = asyncio.run(stream_request(endpoint(t), spec()))
    assert r.error == "stream ended before [DONE] (truncated)" and r.token_ids == [1, 2, 3, 4]
    assert r.e2e_s is not None and r.e2e_s >= 0


def test_a_record_carries_the_request_and_what_was_streamed():
    t = FakeTransport(lambda body: stream(body["max_tokens"]))
    rec = asyncio.run(stream_planned(endpoint(t), planned(1, 1)[0]))
    assert isinstance(rec, RequestRecord) and rec.error is None and rec.output_tokens == 4 and rec.text == "t1t2t3t4"
    assert t.posts[0]["stream"] is True and t.posts[0]["seed"] == 0


def run_load(load: object, reqs: list[PlannedRequest], t: FakeTransport) -> tuple[list[RequestRecord], list[str]]:
    seen: list[str] = []
    records = asyncio.run(load.send(endpoint(t), reqs, lambda r: seen.append(r.prompt_id)))  # type: ignore[attr-defined]
    return records, seen


def test_the_closed_loop_keeps_exactly_c_in_flight():
    t = FakeTransport(lambda body: stream(4))
    reqs = planned(7, 3)
    load = make_load(reqs)
    assert load == ClosedLoop(concurrency=3)
    records, seen = run_load(load, reqs, t)
    assert len(records) == 7 and all(r.error is None for r in records)
    assert t.max_in_flight == 3 and t.in_flight == 0
    assert sorted(seen) == sorted(p.fields["prompt_id"] for p in reqs) and seen == [r.prompt_id for r in records]


def test_one_failed_request_does_not_stop_the_closed_loop():
    def script(body: dict) -> Reads:  # the request with seed 2 is cut off before [DONE]
        return stream(4)[:-1] if body["seed"] == 2 else stream(4)

    records, _ = run_load(ClosedLoop(concurrency=2), planned(5, 2), FakeTransport(script))
    errors = {r.prompt_id: r.error for r in records}
    assert len(errors) == 5 and errors.pop("p2") == "stream ended before [DONE] (truncated)"
    assert set(errors.values()) == {None}


def test_the_open_loop_sends_on_schedule_up_to_its_cap():
    """Five requests all due at once, a cap of 2: never more than 2 in flight; each record keeps its planned
    offset and how late it went out."""
    t = FakeTransport(lambda body: stream(body["max_tokens"]))
    reqs = planned(5, 2, at_s=0.0)
    load = make_load(reqs)
    assert load == OpenLoop(max_in_flight=2)
    records, seen = run_load(load, reqs, t)
    assert len(records) == 5 and all(r.error is None for r in records) and len(seen) == 5
    assert t.max_in_flight == 2
    assert all(r.scheduled_s == 0.0 and r.send_lag_s is not None and r.send_lag_s >= 0 for r in records)


def test_a_token_count_the_usage_contradicts_is_caught_in_process():
    reads = [(0.01, sse(chunk(1), chunk(2, 5))),
             (0.02, sse({"choices": [], "usage": {"completion_tokens": 5}}, "[DONE]"))]
    r = asyncio.run(stream_request(endpoint(FakeTransport(lambda body: reads)), spec(tokens=5)))
    assert r.error == "token count mismatch: 2 token ids streamed, usage deltas count 5"

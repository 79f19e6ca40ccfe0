"""The same prompts at every concurrency (issue 41, item 1; issue 49, item 3): every closed-loop window of a
category sends the category's whole prompt set in whole passes, as many as its level needs (never what the
largest C needs), in an order that repeats and launches rotate (never the set); no prompt is in flight twice
unless the category has fewer prompts than C, and then the cell says so (`few_prompts`, with its remedy)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.client.inflight import InFlightQueue
from specbench.client.stream import run_closed_loop
from specbench.config import parse_config
from specbench.plan.prompts import Prompt
from specbench.plan.windows import build_sweep, category_passes, point_requests, window_requests
from specbench.runner import RunOptions, run_matrix
from specbench.shared.schema import RequestRecord
from tests.conftest import make_model_dir, needs_standin, standin_config

BASE: dict[str, Any] = {
    "model": {"path": "/m"},
    "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                 {"name": "ngram", "drafter": "ngram"}],
    "sweep": {"output_lens": [8], "concurrency": [1, 4, 16], "waves": 1},
}
PROMPTS = [Prompt(id=f"{cat}-{i}", category=cat, text=f"{cat} prompt {i}")
           for cat, n in (("a", 3), ("b", 5)) for i in range(n)]


def _plan(**sweep: Any) -> tuple[Any, Any]:
    cfg = parse_config({**BASE, "sweep": {**BASE["sweep"], **sweep}})
    return cfg, build_sweep(cfg.sweep, PROMPTS)


def _multiset(cfg: Any, sweep: Any, point: Any, variant: str = "base", repeat: int = 1,
              launch: int = 1) -> Counter[str]:
    return Counter(p.fields["prompt_id"] for p in window_requests(cfg.sweep, sweep, point, variant, repeat, launch))


def test_every_concurrency_sends_whole_passes_as_many_as_it_needs() -> None:
    cfg, sweep = _plan()
    for cat, k in (("a", 3), ("b", 5)):
        points = [p for p in sweep.points if p.category == cat]
        assert [p.concurrency for p in points] == [1, 4, 16]
        for p in points:
            need = 1 if p.concurrency == 1 else 3 * p.concurrency  # waves x C inside, C ramp, C drain
            passes = category_passes(cfg.sweep, k, p.concurrency)
            assert passes == -(-need // k), (cat, p.concurrency)  # whole passes, no more than the level needs
            assert point_requests(cfg.sweep, sweep, p) == k * passes
            assert _multiset(cfg, sweep, p) == Counter({f"{cat}-{i}": passes for i in range(k)}), (cat, p)


def test_c1_sends_what_c1_needs_whatever_the_largest_c() -> None:
    """Issue 49: a sweep to C=128 on 3 prompts sent 129 requests at C=1 (passes set by the largest C). Now each
    level sends what it needs: one pass (3 requests) at C=1, and at every C at least C + waves x C + C."""
    cfg = parse_config({**BASE, "sweep": {**BASE["sweep"], "concurrency": [1, 2, 4, 8, 16, 32, 64, 128]}})
    sweep = build_sweep(cfg.sweep, [p for p in PROMPTS if p.category == "a"])
    sent = {p.concurrency: point_requests(cfg.sweep, sweep, p) for p in sweep.points}
    assert sent[1] == 3
    for c, n in sent.items():
        assert c == 1 or 3 * c <= n < 3 * c + 3, (c, n)  # the level's need, rounded up to a pass of 3


def test_waves_scale_the_passes() -> None:
    cfg, sweep = _plan(waves=3, concurrency=[1, 4])
    a1, a4 = (p for p in sweep.points if p.category == "a")
    assert point_requests(cfg.sweep, sweep, a1) == 3  # 3 waves at C=1: one pass of 3
    assert point_requests(cfg.sweep, sweep, a4) == 3 * 7  # (3 + 2) x 4 = 20: 7 passes of 3


def test_repeats_and_launches_rotate_the_order_never_the_set() -> None:
    cfg, sweep = _plan()
    point = next(p for p in sweep.points if p.category == "b" and p.concurrency == 4)

    def order(repeat: int, launch: int, variant: str = "base") -> list[str]:
        return [p.fields["prompt_id"] for p in window_requests(cfg.sweep, sweep, point, variant, repeat, launch)]

    orders = {(r, la): order(r, la) for r in (1, 2, 3) for la in (1, 2)}
    assert len({tuple(o) for o in orders.values()}) == len(orders)  # each window its own order
    assert len({tuple(sorted(o)) for o in orders.values()}) == 1  # one set
    assert order(2, 1, "ngram") == orders[(2, 1)]  # every variant sends the same list
    assert order(2, 1) == orders[(2, 1)]  # deterministic
    other = parse_config({**BASE, "sweep": {**BASE["sweep"], "seed": 5}})
    seeded = window_requests(other.sweep, build_sweep(other.sweep, PROMPTS), point, "base", 2)
    assert [p.fields["prompt_id"] for p in seeded] != orders[(2, 1)]  # seeded
    # the order does not depend on the point: the same window at C=1 sends the first pass of C=4's list
    c1 = next(p for p in sweep.points if p.category == "b" and p.concurrency == 1)
    assert [p.fields["prompt_id"] for p in window_requests(cfg.sweep, sweep, c1, "base", 2)] == orders[(2, 1)][:5]


def test_the_queue_never_puts_a_prompt_in_flight_twice() -> None:
    cfg, sweep = _plan()
    point = next(p for p in sweep.points if p.category == "b" and p.concurrency == 4)
    q = InFlightQueue(window_requests(cfg.sweep, sweep, point, "base", 1), 4)
    assert q.cap == 1
    flying = [q.take() for _ in range(4)]
    ids = [r.fields["prompt_id"] for r in flying if r is not None]
    assert len(ids) == 4 and len(set(ids)) == 4
    sent = list(ids)
    while len(q):  # finish the oldest, send the next: never a prompt already in flight
        q.done(ids.pop(0))
        nxt = q.take()
        if nxt is None:  # only at the tail: everything left is of a prompt in flight
            assert set(r.fields["prompt_id"] for r in q._pending) <= set(ids)
            continue
        assert nxt.fields["prompt_id"] not in ids
        ids.append(nxt.fields["prompt_id"])
        sent.append(nxt.fields["prompt_id"])
    assert Counter(sent) == _multiset(cfg, sweep, point)


def test_fewer_prompts_than_c_allow_copies_up_to_the_cap() -> None:
    cfg, sweep = _plan()
    point = next(p for p in sweep.points if p.category == "a" and p.concurrency == 16)
    q = InFlightQueue(window_requests(cfg.sweep, sweep, point, "base", 1), 16)
    assert q.cap == 6  # 48 requests of 3 prompts at C=16: ceil(16 / 3)
    taken = [q.take() for _ in range(16)]
    assert all(r is not None for r in taken)
    assert max(Counter(r.fields["prompt_id"] for r in taken if r is not None).values()) <= 6


def test_the_closed_loop_waits_instead_of_sending_a_copy(monkeypatch: Any) -> None:
    """The in-process closed loop at C=2 over [x, x, y]: the second x waits for the first to finish."""
    cfg, sweep = _plan(concurrency=[2])
    point = sweep.points[0]
    planned = window_requests(cfg.sweep, sweep, point, "base", 1)[:3]
    x, y = planned[0].fields["prompt_id"], next(p.fields["prompt_id"] for p in planned
                                                 if p.fields["prompt_id"] != planned[0].fields["prompt_id"])
    reqs = [_with_prompt(planned[0], x), _with_prompt(planned[1], x), _with_prompt(planned[2], y)]
    live: Counter[str] = Counter()
    worst: Counter[str] = Counter()
    events: list[str] = []

    async def fake_stream(ep: Any, p: Any) -> RequestRecord:
        pid = p.fields["prompt_id"]
        live[pid] += 1
        worst[pid] = max(worst[pid], live[pid])
        events.append(f"start {pid}")
        for _ in range(3):
            await asyncio.sleep(0)  # let the other worker run (no timing: it only yields)
        live[pid] -= 1
        events.append(f"end {pid}")
        return RequestRecord(**p.fields, t_send=0.0)

    monkeypatch.setattr("specbench.client.stream.stream_planned", fake_stream)
    recs = asyncio.run(run_closed_loop(None, reqs, 2, lambda r: None))  # type: ignore[arg-type]
    assert len(recs) == 3
    assert worst[x] == 1, events
    assert events[:2] == [f"start {x}", f"start {y}"]  # y went ahead of the second x


def _with_prompt(p: Any, prompt_id: str) -> Any:
    from dataclasses import replace
    return replace(p, fields={**p.fields, "prompt_id": prompt_id})


@needs_standin
def test_a_run_sends_the_same_prompt_multiset_at_every_concurrency(tmp_path: Path, port: int) -> None:
    """Through the stand-in: requests.jsonl holds, per variant, category and repeat, one prompt multiset at
    every concurrency; no prompt of a category with at least C prompts overlaps itself in time; the category
    with fewer prompts than C carries the few_prompts warning and the other does not."""
    model = make_model_dir(tmp_path / "model")
    data = standin_config(model, port, sweep={
        "prompts": [{"set": "seed", "categories": ["code"], "per_category": 3},
                    {"set": "seed", "categories": ["rewrite"], "per_category": 2}],
        "concurrency": [1, 2, 3], "repeats": 2})
    out = tmp_path / "run"
    result = run_matrix(parse_config(data), RunOptions(out=out, skip_preflight=True))
    assert set(result.status.values()) == {"done"}, result.status
    recs = pd.DataFrame([json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()])
    recs = recs[~recs["warmup"]]
    by_c: dict[tuple[str, str, int], dict[int, Counter[str]]] = {}
    for (variant, cat, rep, c), g in recs.groupby(["variant", "category", "repeat", "concurrency"]):
        by_c.setdefault((variant, cat, rep), {})[c] = Counter(g["prompt_id"])
    assert len(by_c) == 2 * 2 * 2
    for key, per_c in by_c.items():
        assert sorted(per_c) == [1, 2, 3], key
        for m in per_c.values():  # whole passes: every prompt of the category equally often
            assert len(set(m.values())) == 1 and len(m) == (3 if key[1] == "code" else 2), (key, per_c)
    code = recs[recs["category"] == "code"]
    one = code[(code["concurrency"] == 3) & (code["variant"] == "base") & (code["repeat"] == 1)]
    assert Counter(one["prompt_id"]) == Counter(
        {p: 3 for p in code["prompt_id"].unique()})  # 3 prompts at C=3: 9 requests needed, three passes
    checked = 0
    for _, w in recs.groupby(["variant", "window_id"]):
        if w["prompt_id"].nunique() < w["concurrency"].iloc[0]:
            continue  # rewrite at C=3: copies are allowed (and warned about)
        for _, g in w.groupby("prompt_id"):
            spans = sorted(zip(g["t_send"], g["t_send"] + g["e2e_s"], strict=True))
            assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False)), spans
            checked += len(spans) - 1
    assert checked > 0  # rewrite at C=2 sends each of its 2 prompts twice
    cells = pd.read_csv(out / "cells.csv")
    few = cells["warnings"].fillna("").str.contains("few_prompts")
    assert set(cells[few][["category", "concurrency"]].itertuples(index=False, name=None)) == {("rewrite", 3)}

"""The reference DDTree server (scripts/ddtree_server): its tree builder and acceptance walk on hand-made
distributions, its losslessness against the target's own greedy decoding in float32 (in process, on the
demo model with a seeded random DFlash head), and its HTTP surface (OpenAI fields, the per-response
acceptance field and the Prometheus counter agree, temperature != 0 refused, requests in arrival order)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

SERVER = Path(__file__).resolve().parents[2] / "scripts" / "ddtree_server"
sys.path.insert(0, str(SERVER))

from dd_tree import build_tree, follow  # noqa: E402


def lp(rows: list[list[float]]) -> np.ndarray:
    """Log-probabilities from rows of probabilities."""
    return np.log(np.asarray(rows, dtype=np.float64))


# -- (a) tree builder and acceptance walk ---------------------------------------------------------
def test_tree_is_the_budget_most_probable_prefixes_best_first():
    # depth 1: token 0 p=.6, 1 p=.3, 2 p=.1; depth 2: token 0 p=.5, 1 p=.4, 2 p=.1 (same for every parent)
    t = build_tree(lp([[.6, .3, .1], [.5, .4, .1]]), budget=4)
    # prefixes by probability: (0)=.6, (0,0)=.30, (1)=.3, (0,1)=.24, (1,0)=.15 ... : ties pop in push order
    assert list(zip(t.tokens, t.depths, t.parents[1:])) == [(0, 1, 0), (0, 2, 1), (1, 1, 0), (1, 2, 1)]
    assert t.size == 5 and t.children[0] == {0: 1, 1: 3} and t.children[1] == {0: 2, 1: 4}


def test_tree_respects_budget_depth_and_token_map():
    t = build_tree(lp([[.9, .1], [.9, .1], [.9, .1]]), budget=100)
    assert t.size - 1 == 2 + 4 + 8  # every path of length <= 3 over 2 tokens: the budget is not reached
    assert max(t.depths) == 3
    assert build_tree(lp([[.5, .5]]), budget=0).size == 1  # the root alone: plain decoding
    mapped = build_tree(lp([[.2, .8]]), budget=1, token_map=np.array([7, 9]))
    assert mapped.tokens == [9]  # vocabulary index 1 is target token 9


def test_visibility_is_ancestors_and_self():
    t = build_tree(lp([[.6, .3, .1], [.5, .4, .1]]), budget=4)  # nodes: 1=(0) 2=(0,0) 3=(1) 4=(0,1)
    vis = t.visibility()
    assert vis.tolist() == [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 1, 0], [1, 1, 0, 0, 1]]


def test_follow_accepts_the_longest_matching_path_plus_the_bonus():
    t = build_tree(lp([[.6, .3, .1], [.5, .4, .1]]), budget=4)  # 1=(0) 2=(0,0) 3=(1) 4=(0,1)
    # greedy[i]: the target's choice after node i. Root -> 0 (node 1) -> 1 (node 4) -> 5 (no such child)
    assert follow(t, [0, 1, 9, 9, 5]) == ([0, 1, 4], 5)
    assert follow(t, [2, 9, 9, 9, 9]) == ([0], 2)  # the first draft is wrong: only the bonus token
    assert follow(t, [1, 9, 9, 7, 9]) == ([0, 3], 7)  # a sibling branch


def test_keep_path_keeps_the_accepted_entries_in_order_and_drops_the_rest():
    """A path that skips tree nodes (moves) and one that is the tree's first nodes (a plain cut)."""
    import torch
    from dd_generate import keep_path
    from transformers import DynamicCache

    for keep in ([0, 2, 5], [0, 1, 2]):
        cache = DynamicCache()
        keys = torch.arange(2 * 9 * 3, dtype=torch.float32).reshape(1, 2, 9, 3)  # 3 past + a 6-node tree
        for layer in range(2):
            cache.update(keys.clone() + layer, -keys.clone() - layer, layer)
        keep_path(cache, 3, keep)
        rows = [0, 1, 2] + [3 + k for k in keep]
        for layer in range(2):
            assert torch.equal(cache.layers[layer].keys, keys[..., rows, :] + layer)
            assert torch.equal(cache.layers[layer].values, -keys[..., rows, :] - layer)
        assert cache.get_seq_length() == 3 + len(keep)
        cache.update(keys[..., :1, :], keys[..., :1, :], 0)  # the next verify appends after the path
        assert torch.equal(cache.layers[0].keys[..., -1, :], keys[..., 0, :])


def test_lazy_greedy_reads_only_the_rows_the_walk_asks_for():
    import torch
    from dd_generate import LazyGreedy

    calls = []

    def head(h):
        calls.append(h.shape[0])
        return h @ torch.eye(3)

    hidden = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [5.0, 0.0, 0.0]])
    g = LazyGreedy(head, hidden)
    assert (g[0], g[2], g[0]) == (1, 0, 1) and calls == [1, 1]  # row 1 never computed, row 0 once


# -- (b) losslessness, in process -----------------------------------------------------------------
needs_models = pytest.mark.skipif(importlib.util.find_spec("speculators") is None,
                                  reason="speculators not installed")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specbench.demo_models import prepare

    torch.manual_seed(0)
    from dd_draft import load_head
    from random_head import make_random_head

    target_dir = prepare("smollm2", progress=lambda _m: None)
    head_dir = make_random_head(target_dir, tmp_path_factory.mktemp("dflash") / "head", seed=0, block_size=4)
    tok = AutoTokenizer.from_pretrained(str(target_dir))
    target = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32,
                                                  attn_implementation="sdpa").eval()
    return tok, target, load_head(head_dir, target)


def chat_ids(tok, text: str) -> list[int]:
    ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


@needs_models
@pytest.mark.parametrize("budget", [0, 3, 16])
def test_output_equals_the_targets_greedy_output_in_float32(demo, budget):
    from dd_generate import Generator, GenRequest, greedy_reference

    tok, target, head = demo
    gen = Generator(target, head, budget)
    for text in ["Write a haiku about the sea.", "Name three prime numbers."]:
        ids = chat_ids(tok, text)
        steps = list(gen.run(GenRequest(ids, 8)))
        out = [t for s in steps for t in s.tokens]
        assert out == greedy_reference(target, ids, 8)
        assert sum(len(s.tokens) for s in steps) == len(steps) + sum(s.accepted_drafts for s in steps)
        if budget:
            assert all(s.tree_nodes <= budget for s in steps) and max(s.tree_nodes for s in steps) > 0


@needs_models
def test_a_forced_draft_is_accepted_and_the_cache_keeps_only_its_path(demo):
    """A head whose every draft is the target's own greedy continuation: every draft is accepted, the output
    is still the greedy one (the kept cache entries are the accepted path's), and steps = n / block."""
    from dd_generate import Generator, GenRequest, greedy_reference

    tok, target, head = demo
    ids = chat_ids(tok, "Count from one to ten.")
    ref = greedy_reference(target, ids, 13)

    class Oracle:  # block_log_probs(anchor): the next 3 greedy tokens, found by position in the reference
        horizon, token_map = 3, None

        def __init__(self):
            self.done = 0

        def reset(self):
            self.done = 0

        def append_context(self, hidden_states, keep=None):
            self.done += hidden_states[0].shape[1] if keep is None else len(keep)

        def block_log_probs(self, anchor):
            k = self.done - len(ids) + 1  # ref[k - 1] is the anchor
            rows = np.full((3, 49152), -30.0)
            rows[:, 5] = -1.0  # a decoy branch next to the right one
            for d in range(3):
                if k + d < len(ref):
                    rows[d, ref[k + d]] = -0.1
            return rows

    gen = Generator(target, Oracle(), 8)
    steps = list(gen.run(GenRequest(ids, 13)))
    assert [t for s in steps for t in s.tokens] == ref
    assert [len(s.tokens) for s in steps] == [1, 4, 4, 4]  # prefill, then 3 accepted drafts + bonus each


# -- the HTTP surface ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def app(demo):
    from dd_app import ServerState, create_app
    from dd_generate import Generator

    tok, target, head = demo
    return create_app(ServerState(Generator(target, head, 4), tok, "smollm2", frozenset({2}), 2048))


async def _stream(client, path: str, body: dict) -> list[dict]:
    chunks = []
    async with client.stream("POST", path, json=body) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    return chunks


async def _counter(client) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = (await client.get("/metrics")).text
    return next(s.value for f in text_string_to_metric_families(text) for s in f.samples
                if s.name == "ddtree_verify_steps_total")


@needs_models
def test_stream_carries_token_ids_usage_and_acceptance_that_agrees_with_the_counter(app):
    import httpx

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            before = await _counter(c)
            body = {"model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 7,
                    "temperature": 0, "stream": True, "ignore_eos": True,
                    "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
            chunks = await _stream(c, "/v1/chat/completions", body)
            after = await _counter(c)
            return chunks, after - before
    chunks, delta = asyncio.run(go())
    final = chunks[-1]
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == 7
    ids = [t for ch in chunks[:-1] for t in ch["choices"][0]["token_ids"]]
    assert len(ids) == 7 and chunks[-2]["choices"][0]["finish_reason"] == "length"
    dd = final["ddtree"]
    assert dd["verify_steps"] == delta == len(chunks) - 1  # one chunk per target forward
    assert dd["verify_steps"] + dd["accepted_tokens"] == 7
    assert math.isclose(dd["acceptance_length"], 7 / dd["verify_steps"])


@needs_models
def test_temperature_other_than_zero_is_refused_with_400(app):
    import httpx

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            r1 = await c.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 2, "temperature": 0.7})
            r2 = await c.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 2})  # OpenAI default: 1
            ok = await c.post("/v1/completions", json={"prompt": "Hi", "max_completion_tokens": 2,
                                                       "temperature": 0})
            return r1, r2, ok
    r1, r2, ok = asyncio.run(go())
    assert r1.status_code == 400 and "temperature 0.7 is not supported" in r1.json()["error"]["message"]
    assert r2.status_code == 400
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2
    assert len(ok.json()["choices"][0]["token_ids"]) == 2


@needs_models
def test_requests_are_served_one_at_a_time_in_arrival_order(app):
    """Three requests sent together: each one's first chunk comes after the previous one's last."""
    import httpx

    async def go():
        events: list[tuple[int, str]] = []
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            async def one(i: int):
                body = {"prompt": f"Request {i}", "max_tokens": 3, "temperature": 0, "stream": True,
                        "ignore_eos": True}
                async with c.stream("POST", "/v1/completions", json=body) as r:
                    async for line in r.aiter_lines():
                        if line.startswith("data: {"):
                            events.append((i, "chunk"))
                events.append((i, "end"))
            tasks = []
            for i in range(3):
                tasks.append(asyncio.create_task(one(i)))
                await asyncio.sleep(0)  # start each request before the next one is sent
                await asyncio.sleep(0)
            health = (await c.get("/health")).json()
            await asyncio.gather(*tasks)
        return events, health
    events, health = asyncio.run(go())
    order = [i for i, _ in events]
    assert order == sorted(order), events  # no interleaving, and in the order they were sent
    assert "one request at a time" in health["serving"]


@needs_models
def test_the_draft_cache_gives_the_same_drafts_and_projects_only_new_positions(demo):
    """The DFlash head's draft KV cache (issue 30, item 9): at every step the same block log-probabilities as
    recomputing every draft layer over the whole context, so the same steps; and each forward runs k_proj on
    the positions added since the last one plus the block, not on the whole context."""
    from dd_draft import DFlashHead
    from dd_generate import Generator, GenRequest

    tok, target, head = demo
    ids = chat_ids(tok, "Explain in two sentences why the sky is blue, then list three colours of sunsets.")
    runs = {}
    for cached in (True, False):
        h = DFlashHead(head.model, head.aux_offset, cache=cached)
        drafts: list[np.ndarray] = []
        rows: list[int] = []
        block = h.block_log_probs
        h.block_log_probs = lambda a, block=block, drafts=drafts: drafts.append(block(a)) or drafts[-1]
        hook = h.model.layers[0].self_attn.k_proj.register_forward_hook(
            lambda _m, args, _out, rows=rows: rows.append(args[0].shape[1]))
        try:
            steps = list(Generator(target, h, 16).run(GenRequest(ids, 24)))
        finally:
            hook.remove()
        runs[cached] = steps, drafts, rows
    (s1, d1, r1), (s0, d0, r0) = runs[True], runs[False]
    assert [(s.tokens, s.accepted_drafts, s.tree_nodes) for s in s1] == \
        [(s.tokens, s.accepted_drafts, s.tree_nodes) for s in s0]
    assert len(d1) == len(d0) > 10 and all(np.allclose(a, b, atol=1e-4) for a, b in zip(d1, d0))
    # k_proj runs twice per layer call (context, then block): cached, the context part is what was added
    ctx_rows = r1[0::2]
    assert ctx_rows[0] == len(ids) and max(ctx_rows[1:]) <= head.block_size
    assert sum(r0[0::2]) > 5 * sum(ctx_rows)  # the recomputation re-projects the whole context every step


def test_accepted_drafts_are_the_steps_tokens_minus_one_when_a_step_is_cut():
    """n = S + A for every response (issue 30, item 10): a step cut inside its accepted drafts (max_tokens)
    or at a stop token that is a draft emits only drafts, and one of them stands in for the bonus."""
    from dd_generate import Generator, GenRequest, Step

    cut = Generator._finish(Step([11, 12, 13, 14], 3, 8), GenRequest([1], max_new_tokens=3), emitted=1)
    assert cut.tokens == [11, 12] and cut.accepted_drafts == 1 and cut.stop
    stop = Generator._finish(Step([11, 2, 13, 14], 3, 8), GenRequest([1], 50, frozenset({2})), emitted=1)
    assert stop.tokens == [11, 2] and stop.accepted_drafts == 1 and stop.stop
    whole = Generator._finish(Step([11, 12, 13, 14], 3, 8), GenRequest([1], 50), emitted=1)
    assert whole.tokens == [11, 12, 13, 14] and whole.accepted_drafts == 3 and not whole.stop
    first = Generator._finish(Step([7], 0, 0), GenRequest([1], 50), emitted=0)
    assert first.accepted_drafts == 0


@needs_models
def test_a_client_that_disconnects_mid_stream_frees_the_server(demo):
    """Issue 30, item 11: a client that goes away after the first chunk of a 1,000-token request must not
    leave it generating (holding the one-at-a-time lock): the next request is served, and the server's
    token counter shows the first request stopped far short of its max_tokens. A real uvicorn server, so the
    disconnect is a closed socket."""
    import socket
    import threading

    import httpx
    import uvicorn
    from dd_app import ServerState, create_app
    from dd_generate import Generator
    from prometheus_client.parser import text_string_to_metric_families

    tok, target, head = demo
    app = create_app(ServerState(Generator(target, head, 4), tok, "smollm2", frozenset({2}), 2048))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    started = threading.Event()
    real_startup = server.startup

    async def startup(sockets=None):
        await real_startup(sockets)
        started.set()

    server.startup = startup
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"

    def generated() -> float:
        text = httpx.get(f"{url}/metrics", timeout=30).text
        return next(s.value for f in text_string_to_metric_families(text) for s in f.samples
                    if s.name == "ddtree_generation_tokens_total")

    try:
        assert started.wait(60)
        before = generated()
        long = {"prompt": "Tell a long story.", "max_tokens": 1000, "temperature": 0, "stream": True,
                "ignore_eos": True}
        with httpx.Client(timeout=60) as c, c.stream("POST", f"{url}/v1/completions", json=long) as r:
            first = next(line for line in r.iter_lines() if line.startswith("data: {"))
        assert json.loads(first[6:])["choices"][0]["token_ids"]  # the connection is closed here
        nxt = httpx.post(f"{url}/v1/completions", timeout=600,
                         json={"prompt": "Hi", "max_tokens": 3, "temperature": 0, "ignore_eos": True})
        assert nxt.status_code == 200 and nxt.json()["usage"]["completion_tokens"] == 3
        long_tokens = generated() - before - 3  # the first request's count is in before the lock passes on
        assert 1 <= long_tokens < 200, long_tokens
    finally:
        server.should_exit = True
        thread.join(30)

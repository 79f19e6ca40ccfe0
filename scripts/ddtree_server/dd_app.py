"""The OpenAI-compatible HTTP surface: /v1/chat/completions, /v1/completions (streamed or not), /v1/models,
/health, /metrics. Requests are served one at a time, in arrival order (a FIFO lock); generation runs in one
worker thread, so /health and /metrics answer while a request generates.

Per response (the last streamed chunk, the one carrying `usage`; or the non-streamed body):
    "ddtree": {"verify_steps": S, "accepted_tokens": A, "acceptance_length": n / S, "tree_budget": B}
S counts the target forwards that produced the response's n tokens (the prompt's prefill, which yields the
first token, included), A the accepted draft tokens, A = n - S (each step's tokens but one: a step cut
inside its drafts, or at a stop token that is a draft, counts its last draft as the bonus). The same S
feeds the Prometheus counter `ddtree_verify_steps_total`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from dd_generate import Generator, GenRequest, Step
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest


@dataclass
class ServerState:
    generator: Generator
    tokenizer: Any
    served_name: str
    eos_ids: frozenset[int]
    max_model_len: int


class BadRequest(Exception):
    pass


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.verify_steps = Counter("ddtree_verify_steps", "target forwards that produced tokens (prefill "
                                    "included)", registry=self.registry)
        self.accepted = Counter("ddtree_accepted_tokens", "accepted draft tokens", registry=self.registry)
        self.generated = Counter("ddtree_generation_tokens", "generated tokens", registry=self.registry)
        self.requests = Counter("ddtree_requests", "finished requests", registry=self.registry)


def parse_request(body: dict[str, Any], chat: bool, st: ServerState) -> tuple[GenRequest, bool, bool]:
    """(generation request, stream?, usage on every chunk?) or BadRequest naming the field."""
    temp = body.get("temperature", 1.0)  # OpenAI's default is 1: greedy must be asked for
    if not isinstance(temp, (int, float)) or temp != 0:
        raise BadRequest(f"temperature {temp!r} is not supported: this DDTree server verifies greedily "
                         f"(temperature 0) only")
    if body.get("n", 1) != 1:
        raise BadRequest("n must be 1")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", 16))
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise BadRequest(f"max_tokens must be a positive integer, got {max_tokens!r}")
    if chat:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest("messages must be a non-empty list")
        kwargs = body.get("chat_template_kwargs") or {}
        ids = st.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, **kwargs)
        ids = list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise BadRequest("prompt must be a non-empty string")
        ids = list(st.tokenizer(prompt)["input_ids"])
    if len(ids) + max_tokens > st.max_model_len:
        raise BadRequest(f"prompt ({len(ids)} tokens) + max_tokens ({max_tokens}) exceeds the model length "
                         f"{st.max_model_len}")
    stop = frozenset() if body.get("ignore_eos") else st.eos_ids
    opts = body.get("stream_options") or {}
    return GenRequest(ids, max_tokens, stop), bool(body.get("stream")), bool(opts.get("continuous_usage_stats"))


class Detok:
    """Incremental detokenization: the text delta of each new batch of tokens."""

    def __init__(self, tokenizer: Any) -> None:
        self.tok, self.ids, self.text = tokenizer, [], ""

    def add(self, ids: list[int]) -> str:
        self.ids += ids
        full = self.tok.decode(self.ids, skip_special_tokens=True)
        if full.endswith("\ufffd"):  # an incomplete UTF-8 sequence: wait for the next tokens
            return ""
        delta, self.text = full[len(self.text):], full
        return delta


def create_app(st: ServerState) -> FastAPI:
    app = FastAPI()
    lock = asyncio.Lock()  # asyncio.Lock wakes waiters in FIFO order: requests are served in arrival order
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ddtree")
    metrics = Metrics()
    waiting = {"n": 0}

    @contextlib.asynccontextmanager
    async def turn() -> AsyncIterator[None]:
        """Wait for the request's turn (FIFO), counted in /health's `waiting` while it waits."""
        waiting["n"] += 1
        try:
            await lock.acquire()
        finally:
            waiting["n"] -= 1
        try:
            yield
        finally:
            lock.release()

    def info(req: GenRequest, steps: list[Step]) -> dict[str, Any]:
        n = sum(len(s.tokens) for s in steps)
        acc = sum(s.accepted_drafts for s in steps)
        return {"verify_steps": len(steps), "accepted_tokens": acc,
                "acceptance_length": n / len(steps) if steps else None,
                "tree_budget": st.generator.tree_budget}

    def count(steps: list[Step]) -> None:
        metrics.verify_steps.inc(len(steps))
        metrics.accepted.inc(sum(s.accepted_drafts for s in steps))
        metrics.generated.inc(sum(len(s.tokens) for s in steps))
        metrics.requests.inc()

    async def steps_of(req: GenRequest) -> AsyncIterator[Step]:
        loop = asyncio.get_running_loop()
        it: Iterator[Step] = st.generator.run(req)
        while True:
            step = await loop.run_in_executor(pool, next, it, None)
            if step is None:
                return
            yield step

    def usage(req: GenRequest, n: int) -> dict[str, int]:
        return {"prompt_tokens": len(req.prompt_ids), "completion_tokens": n,
                "total_tokens": len(req.prompt_ids) + n}

    async def serve(request: Request, chat: bool) -> Any:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object")
            req, stream, continuous = parse_request(body, chat, st)
        except (BadRequest, ValueError) as exc:
            return JSONResponse({"error": {"message": str(exc), "type": "invalid_request_error", "code": 400}},
                                status_code=400)
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:16]}"
        obj = "chat.completion" if chat else "text_completion"
        created = int(time.time())

        def choice(text: str, ids: list[int], finish: str | None, final: bool) -> dict[str, Any]:
            c: dict[str, Any] = {"index": 0, "finish_reason": finish, "token_ids": ids}
            if chat:
                c["message" if final else "delta"] = {"role": "assistant", "content": text}
            else:
                c["text"] = text
            return c

        def finish_reason(req: GenRequest, steps: list[Step]) -> str:
            last = steps[-1].tokens if steps else []
            return "stop" if last and last[-1] in req.stop_ids else "length"

        if not stream:
            async with turn():
                steps = [s async for s in steps_of(req)]
            count(steps)
            ids = [t for s in steps for t in s.tokens]
            text = st.tokenizer.decode(ids, skip_special_tokens=True)
            return {"id": rid, "object": obj, "created": created, "model": st.served_name,
                    "choices": [choice(text, ids, finish_reason(req, steps), True)],
                    "usage": usage(req, len(ids)), "ddtree": info(req, steps)}

        async def events() -> AsyncIterator[str]:
            def sse(d: dict[str, Any]) -> str:
                return f"data: {json.dumps(d)}\n\n"
            detok, steps, n = Detok(st.tokenizer), [], 0
            try:
                async with turn():
                    async for step in steps_of(req):
                        steps.append(step)
                        n += len(step.tokens)
                        fin = finish_reason(req, steps) if step.stop else None
                        chunk: dict[str, Any] = {"id": rid, "object": obj + ".chunk", "created": created,
                                                 "model": st.served_name,
                                                 "choices": [choice(detok.add(step.tokens), step.tokens, fin, False)]}
                        if continuous:
                            chunk["usage"] = usage(req, n)
                        yield sse(chunk)
                        # a client gone mid-stream frees the server before the next step (Starlette also
                        # cancels the stream on an ASGI 2.3 server's disconnect; this holds on any server)
                        if await request.is_disconnected():
                            return
            finally:
                count(steps)  # the target ran these forwards even when the client went away
            yield sse({"id": rid, "object": obj + ".chunk", "created": created, "model": st.served_name,
                       "choices": [], "usage": usage(req, n), "ddtree": info(req, steps)})
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        return await serve(request, True)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        return await serve(request, False)

    @app.get("/v1/models")
    async def models() -> Any:
        return {"object": "list", "data": [{"id": st.served_name, "object": "model", "owned_by": "ddtree",
                                            "max_model_len": st.max_model_len}]}

    @app.get("/health")
    async def health() -> Any:
        return {"status": "ok", "serving": "one request at a time, in arrival order; the others wait",
                "busy": lock.locked(), "waiting": waiting["n"], "tree_budget": st.generator.tree_budget,
                "temperature": "0 only (greedy verification)"}

    @app.get("/metrics")
    async def prometheus() -> Any:
        return PlainTextResponse(generate_latest(metrics.registry).decode(), media_type=CONTENT_TYPE_LATEST)

    return app

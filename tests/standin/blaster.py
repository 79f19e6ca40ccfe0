"""A stand-in that costs almost nothing per chunk: `python -m tests.standin.blaster --port N [--processes P]`.

For the client-overhead benchmark's ceiling rows (benchmarks/client_overhead.py): the stand-in server
(tests/standin/server.py) renders and writes every chunk (~10 µs each), so one process of it tops out below
what two client processes can read. This one streams a response body rendered once per output length (vLLM's
chunk shape: one SSE event per HTTP chunk, continuous usage, token ids, the final usage chunk, [DONE]) in
64 KiB writes, with no delay. P processes accept on one port (SO_REUSEPORT), so the server is never the limit.
Non-streamed chat requests (the readiness probe) get a one-token completion; /metrics is empty.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import multiprocessing
import os
import signal
from typing import Any

from .httpserver import Request, Response, Stream, serve

WRITE = 1 << 16


@functools.lru_cache(maxsize=32)
def body(tokens: int, model: str) -> bytes:
    """The whole chunked body of a stream of `tokens` one-token chunks."""
    out = []
    for j in range(tokens):
        ev = {"id": "cmpl-blaster", "object": "chat.completion.chunk", "created": 0, "model": model,
              "choices": [{"index": 0, "delta": {"role": "assistant", "content": " x"}, "logprobs": None,
                           "finish_reason": "length" if j == tokens - 1 else None, "token_ids": [100 + j % 1000]}],
              "usage": {"prompt_tokens": 8, "completion_tokens": j + 1, "total_tokens": 9 + j}}
        out.append(json.dumps(ev).encode())
    out.append(json.dumps({"id": "cmpl-blaster", "object": "chat.completion.chunk", "created": 0, "model": model,
                           "choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": tokens,
                                                    "total_tokens": 8 + tokens}}).encode())
    out.append(b"[DONE]")
    events = (b"data: " + d + b"\n\n" for d in out)
    return b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


def handler(model: str) -> Any:
    async def handle(req: Request, stream: Stream) -> Response | None:
        if req.path == "/metrics":
            return Response.text("")
        if req.path == "/v1/models":
            return Response.json({"object": "list", "data": [{"id": model, "object": "model"}]})
        if req.path != "/v1/chat/completions":
            return Response(status=200 if req.path == "/health" else 404)
        spec = req.json()
        if not spec.get("stream"):
            return Response.json({"choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                                               "finish_reason": "length"}],
                                  "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9}})
        data = body(int(spec.get("max_tokens") or 16), model)
        await stream.start()
        w = stream._w
        for i in range(0, len(data), WRITE):
            w.write(data[i:i + WRITE])
            await w.drain()
        return None

    return handle


def run_one(port: int, model: str) -> None:
    async def main() -> None:
        server = await serve("127.0.0.1", port, handler(model), reuse_port=True)
        async with server:
            await server.serve_forever()

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--served-model-name", default="standin")
    p.add_argument("--processes", type=int, default=1)
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # the process group is stopped as a whole
    procs = [multiprocessing.Process(target=run_one, args=(args.port, args.served_model_name), daemon=True)
             for _ in range(args.processes - 1)]
    for pr in procs:
        pr.start()
    run_one(args.port, args.served_model_name)


if __name__ == "__main__":
    main()

"""The floor of any asyncio client: C streams whose bytes are read and dropped (benchmarks/client_overhead.py).

The same requests as specbench's rows (the vLLM engine's body, sent as one raw HTTP/1.1 write per stream), each
response read by an asyncio Protocol whose data_received only looks for the body's end. Its CPU per chunk is what
the event loop, the socket reads and the kernel's TCP work cost before a client parses anything: no client on
this loop and machine can cost less per chunk for the same arrival pattern.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from specbench.engines.base import Engine, RequestSpec

PROMPT = "Write a long story about a lighthouse keeper."


class _Drop(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[None]):
        self.done = done

    def data_received(self, data: bytes) -> None:
        if data.endswith(b"0\r\n\r\n") and not self.done.done():  # the chunked body's last chunk
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError("closed before the body's end"))


@dataclass(frozen=True)
class FloorRun:
    host: str
    port: int
    engine: Engine
    concurrency: int
    tokens: int


def request_bytes(run: FloorRun, seed: int) -> bytes:
    spec = RequestSpec(messages=[{"role": "user", "content": PROMPT}], prompt_text=PROMPT, max_tokens=run.tokens,
                       temperature=0.0, seed=seed)
    body = json.dumps(run.engine.request_body(spec)).encode()
    head = (f"POST {run.engine.request_path(spec)} HTTP/1.1\r\nHost: {run.host}:{run.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nAccept: text/event-stream\r\n\r\n")
    return head.encode() + body


async def measure(run: FloorRun) -> tuple[float, float]:
    """C streams at once, read and dropped: (CPU seconds, wall seconds) from the first send to the last end."""
    loop = asyncio.get_running_loop()
    conns = []
    for i in range(run.concurrency):
        done: asyncio.Future[None] = loop.create_future()
        transport, _ = await loop.create_connection(lambda d=done: _Drop(d), run.host, run.port)
        conns.append((transport, done, request_bytes(run, i)))
    c0, w0 = time.process_time(), time.perf_counter()
    for transport, _, req in conns:
        transport.write(req)
    await asyncio.gather(*(d for _, d, _ in conns))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    for transport, _, _ in conns:
        transport.close()
    return cpu, wall

"""The floor of a Python client: C streams whose bytes are read and dropped (benchmarks/client_overhead.py).

The same requests as specbench's rows (the vLLM engine's body, sent as one raw HTTP/1.1 write per stream), each
response read and dropped, only looking for the body's end, two ways:

- `measure`: by an asyncio Protocol (data_received). Its CPU per chunk is what the event loop, the socket reads
  and the kernel's TCP work cost before a client parses anything: no asyncio client on this machine can cost
  less per chunk for the same arrival pattern.
- `measure_epoll`: by a bare `select.epoll` loop with `recv_into` one reused buffer, no event loop at all: the
  floor of any client written in Python, whatever its I/O layer (what is left is the interpreter's few
  operations per read and the kernel's work: the wakeup, the copy, loopback TCP with its ACKs).
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
import time
from dataclasses import dataclass

from specbench.server.engines.base import Engine, RequestSpec

PROMPT = "Write a long story about a lighthouse keeper."


END = b"0\r\n\r\n"  # a chunked body's last chunk (the stand-in writes no trailers)


class _Drop(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[None]):
        self.done = done
        self.tail = b""  # the last bytes read: the end may come split across reads

    def data_received(self, data: bytes) -> None:
        self.tail = (self.tail + data[-5:])[-5:]
        if self.tail == END and not self.done.done():
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


def measure_epoll(run: FloorRun) -> tuple[float, float]:
    """C streams at once on a bare epoll loop, read and dropped: (CPU seconds, wall seconds) as `measure`."""
    ep = select.epoll()
    socks: dict[int, socket.socket] = {}
    try:
        for _ in range(run.concurrency):
            s = socket.create_connection((run.host, run.port))
            s.setblocking(False)
            socks[s.fileno()] = s
        reqs = [request_bytes(run, i) for i in range(run.concurrency)]
        buf = bytearray(256 * 1024)  # asyncio's read size
        c0, w0 = time.process_time(), time.perf_counter()
        for (fd, s), req in zip(socks.items(), reqs):
            s.sendall(req)
            ep.register(fd, select.EPOLLIN)
        left = len(socks)
        tails = dict.fromkeys(socks, b"")  # the last bytes read per stream: the end may come split across reads
        while left:
            for fd, _ in ep.poll():
                n = socks[fd].recv_into(buf)
                if n == 0:
                    raise ConnectionError("closed before the body's end")
                tails[fd] = tail = (tails[fd] + buf[max(0, n - 5):n])[-5:]
                if tail == END:
                    ep.unregister(fd)
                    left -= 1
        return time.process_time() - c0, time.perf_counter() - w0
    finally:
        ep.close()
        for s in socks.values():
            s.close()

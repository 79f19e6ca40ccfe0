"""A tiny asyncio HTTP/1.1 server (keep-alive, chunked streaming) with no dependencies, so faults such as a
truncated chunked body or a stalled stream can be produced exactly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error",
           503: "Service Unavailable"}


@dataclass
class Request:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, obj: Any, status: int = 200) -> Response:
        return cls(status=status, body=json.dumps(obj).encode())

    @classmethod
    def text(cls, text: str, status: int = 200) -> Response:
        return cls(status=status, body=text.encode(), content_type="text/plain; version=0.0.4")


class Stream:
    """A chunked text/event-stream response; the handler writes SSE events and may break the stream."""

    def __init__(self, writer: asyncio.StreamWriter):
        self._w = writer
        self.started = False

    async def start(self) -> None:
        self._w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                      b"transfer-encoding: chunked\r\n\r\n")
        self.started = True
        await self._w.drain()

    async def raw(self, data: bytes) -> None:
        self._w.write(b"%x\r\n%s\r\n" % (len(data), data))
        await self._w.drain()

    async def event(self, obj: Any) -> None:
        await self.raw(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")

    async def end(self) -> None:
        self._w.write(b"0\r\n\r\n")
        await self._w.drain()

    def abort(self) -> None:
        """Close the connection mid-body: the client sees an incomplete chunked message."""
        self._w.transport.abort()


Handler = Callable[[Request, Stream], Awaitable[Response | None]]


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(n) if n else b""
    path, _, query = target.partition("?")
    return Request(method=method.upper(), path=path, query=query, headers=headers, body=body)


def _write_response(writer: asyncio.StreamWriter, resp: Response) -> None:
    head = [f"HTTP/1.1 {resp.status} {REASONS.get(resp.status, 'Status')}",
            f"content-type: {resp.content_type}", f"content-length: {len(resp.body)}",
            *(f"{k}: {v}" for k, v in resp.headers.items())]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + resp.body)


async def serve(host: str, port: int, handler: Handler, reuse_port: bool = False) -> asyncio.AbstractServer:
    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                req = await _read_request(reader)
                if req is None:
                    break
                stream = Stream(writer)
                resp = await handler(req, stream)
                if stream.started:
                    if writer.transport.is_closing():
                        break
                    continue
                _write_response(writer, resp or Response(status=500))
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if not writer.transport.is_closing():
                writer.close()

    return await asyncio.start_server(on_client, host, port, reuse_address=True, reuse_port=reuse_port or None)

"""A message channel between the client's parent process and a shard worker: pickled frames (an 8-byte length,
then the pickle) over a non-blocking socket, driven by the running event loop in both directions."""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct
from collections.abc import Callable
from typing import Any


class Channel:
    """Pickled messages over a non-blocking socket, in both directions, driven by the running event loop:
    `send` queues the frame and never blocks (the loop writes it as the peer reads), and each complete
    message that arrives goes to `on_message`. Neither side ever waits on the other inside its loop, so a
    megabyte prompt going one way and a megabyte record the other cannot deadlock, nor stall the other
    streams' timestamps. `send_now`/`recv_now` (blocking, with a timeout) are for the start-up handshake,
    before any loop is attached."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._out = bytearray()
        self._in = bytearray()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writing = False
        self.on_message: Callable[[Any], None] = lambda msg: None
        self.on_eof: Callable[[], None] = lambda: None

    # -- blocking (the handshake)
    def send_now(self, obj: Any, timeout_s: float) -> None:
        self.sock.settimeout(timeout_s)
        self.sock.sendall(_frame(obj))

    def recv_now(self, timeout_s: float) -> Any:
        self.sock.settimeout(timeout_s)
        head = self._recv_exactly(_HEAD.size)
        return pickle.loads(self._recv_exactly(_HEAD.unpack(head)[0]))

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            part = self.sock.recv(n - len(buf))
            if not part:
                raise EOFError("the peer closed the connection")
            buf += part
        return bytes(buf)

    # -- on the event loop
    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.sock.setblocking(False)
        self._loop = loop
        loop.add_reader(self.sock.fileno(), self._readable)
        if self._out:
            self._want_write()

    def detach(self) -> None:
        """Stop reading and writing on the loop (what is queued stays queued for the next attach)."""
        if self._loop is not None:
            for remove in (self._loop.remove_reader, self._loop.remove_writer):
                try:
                    remove(self.sock.fileno())
                except (ValueError, OSError):
                    pass
            self._loop, self._writing = None, False

    def send(self, obj: Any) -> None:
        self._out += _frame(obj)
        if self._loop is not None and not self._writing:
            self._flush()

    def _want_write(self) -> None:
        if self._loop is not None and not self._writing:
            self._writing = True
            self._loop.add_writer(self.sock.fileno(), self._flush)

    def _flush(self) -> None:
        try:
            n = self.sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:  # the peer is gone: its reader sees the end, and so do we
            self._out.clear()
            n = 0
        del self._out[:n]
        if self._out:
            self._want_write()
        elif self._writing and self._loop is not None:
            self._loop.remove_writer(self.sock.fileno())
            self._writing = False

    def _readable(self) -> None:
        try:
            data = self.sock.recv(READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.detach()
            self.on_eof()
            return
        self._in += data
        while len(self._in) >= _HEAD.size:
            (n,) = _HEAD.unpack_from(self._in)
            if len(self._in) < _HEAD.size + n:
                break
            with memoryview(self._in) as view:  # released before the buffer is cut
                msg = pickle.loads(view[_HEAD.size:_HEAD.size + n])
            del self._in[:_HEAD.size + n]
            self.on_message(msg)
            if self._loop is None:  # detached by the handler
                return

    def close(self) -> None:
        self.detach()
        self.sock.close()


_HEAD = struct.Struct("!Q")
READ_BYTES = 1 << 20


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(len(data)) + data

"""A raw HTTP/1.1 stand-in for client tests: each request gets the next scripted reply, written as exact bytes.

Blocking sockets in threads (not the test's event loop), so a test can wait for the server to have done
something (closed a connection) while its own loop is held still, and a reply can be anything, malformed
included. Records every request body with the number of the connection it came on.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"


def chunked(*parts: bytes) -> list[bytes]:
    """`parts` as the chunks of a chunked body (one write each), then the last chunk."""
    return [b"%x\r\n%s\r\n" % (len(p), p) for p in parts] + [b"0\r\n\r\n"]


def sse_response(*parts: bytes, head: bytes = HEAD) -> list[bytes]:
    """A 200 event-stream response whose body is `parts`, one chunk each."""
    return [head + b"transfer-encoding: chunked\r\n\r\n", *chunked(*parts)]


@dataclass
class Reply:
    writes: list[bytes]  # written in order, one sendall each
    close: bool = False  # close the connection once written (without saying so in the head)
    hang_up: bool = False  # close it after reading the request, without a reply
    close_on: threading.Event | None = None  # close it once written and this is set (the test says when)


@dataclass
class RawServer:
    replies: list[Reply]
    requests: list[tuple[int, bytes]] = field(default_factory=list)  # (connection number, request body)
    closed: threading.Event = field(default_factory=threading.Event)  # set when the server closed a connection

    def __post_init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self._conns: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._lock = threading.Lock()
        self._threads[0].start()

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() (closing the socket alone does not)
        except OSError:
            pass
        self.sock.close()
        for c in self._conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        for t in self._threads:
            t.join(5)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._conns.append(conn)
                t = threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True)
                self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    got = conn.recv(65536)
                    if not got:
                        return
                    buf += got
                head, _, buf = buf.partition(b"\r\n\r\n")
                n = int(next(ln.split(b":")[1] for ln in head.split(b"\r\n")
                             if ln.lower().startswith(b"content-length")))
                while len(buf) < n:
                    got = conn.recv(65536)
                    if not got:
                        return
                    buf += got
                with self._lock:
                    self.requests.append((number, buf[:n]))
                    reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
                buf = buf[n:]
                if reply.hang_up:
                    break
                for w in reply.writes:
                    conn.sendall(w)
                if reply.close_on is not None:
                    reply.close_on.wait(10)
                    break
                if reply.close:
                    break
        except OSError:
            pass
        finally:
            conn.close()
            self.closed.set()

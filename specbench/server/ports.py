"""Who listens on a port: whether it is taken, by which process, every process listening where its traffic
goes. The session and preflight check the engine's port with these; EngineProcess waits for it to be free."""

from __future__ import annotations

import errno
import socket

import psutil


def port_in_use(host: str, port: int) -> bool:
    """True when something listens on host:port (or the address is otherwise taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def port_owner(port: int) -> str | None:
    """'PID 123 (python -m vllm...)' for the process listening on port, when visible."""
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, OSError):
        return None
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            try:
                cmd = " ".join(psutil.Process(c.pid).cmdline())[:120]
            except psutil.Error:
                cmd = "?"
            return f"PID {c.pid} ({cmd})"
    return None


WILDCARDS = ("0.0.0.0", "::", "")


def listening_pids(host: str, port: int) -> list[int | None] | None:
    """The processes with a socket listening where host:port traffic goes (host itself or a wildcard
    address); None for a socket whose process the OS does not show. None when sockets cannot be listed."""
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, OSError):
        return None
    local = {host, f"::ffff:{host}", *WILDCARDS}
    if host in ("localhost", "127.0.0.1", "::1"):
        local |= {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
    return [c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
            and c.laddr.ip in local]


def describe_pid(pid: int) -> str:
    try:
        return f"PID {pid} ({' '.join(psutil.Process(pid).cmdline())[:120]})"
    except psutil.Error:
        return f"PID {pid}"

"""One measurement window: counters before, the closed loop, counters after, the WindowRecord.

A window counts only once its WindowRecord is written (after its last request record), so a window cut
short by a crash, Ctrl-C or an engine death is measured again from scratch on resume.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any

import httpx
import psutil

from ..client import run_closed_loop
from ..environment import gpu_telemetry
from ..errors import EngineDiedError, ScrapeError
from ..plan import PlannedRequest
from ..records import RequestRecord, WindowRecord
from .session import VariantSession

SCRAPE_ATTEMPTS = 4


@dataclass
class ClientCheck:
    """The client's self-check over a window: its CPU time against the window's wall time. A share near 1
    means the event loop (one thread) was saturated and chunks waited for it (gate `client_saturated`)."""

    label: str  # the window id
    cpu0: float
    wall0: float
    workers: dict[int, float]  # client worker PID -> its CPU seconds at the start (client.processes > 1)

    @classmethod
    def start(cls, label: str, worker_pids: Sequence[int] = ()) -> ClientCheck:
        return cls(label, time.process_time(), time.perf_counter(),
                   {pid: cpu for pid in worker_pids if (cpu := _cpu_s(pid)) is not None})

    def stop(self) -> dict[str, float]:
        """CPU seconds and share of the window's wall time: of this process alone, or with worker processes,
        of the busiest one (each is one event loop: the busiest saturates first)."""
        wall = time.perf_counter() - self.wall0
        cpus = [time.process_time() - self.cpu0]
        cpus += [now - c0 for pid, c0 in self.workers.items() if (now := _cpu_s(pid)) is not None]
        busiest = max(cpus)
        out = {"cpu_s": round(sum(cpus), 4), "wall_s": round(wall, 4),
               "cpu_share": round(busiest / wall, 4) if wall > 0 else 0.0}
        if self.workers:
            out["processes"] = len(self.workers)
        return out


def _cpu_s(pid: int) -> float | None:
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return float(t.user + t.system)
SCRAPE_BACKOFF_S = (0.5, 1.0, 2.0)  # waits between attempts: a busy server gets ~3.5 s to answer


async def measure_window(session: VariantSession, planned: Sequence[PlannedRequest],
                         window_id: str) -> WindowRecord:
    """Measure one window on the session's engine and append its records (each fsynced) to the sink.

    Raises EngineDiedError when the engine exits during the window and ScrapeError when its counters
    cannot be read; the window then has no WindowRecord (resume measures it again)."""
    if not planned:
        raise ValueError(f"{window_id}: a window needs at least one request")
    first = planned[0].fields
    if any(p.fields["window_id"] != window_id for p in planned):
        raise ValueError(f"{window_id}: every planned request must belong to this window")
    engine = session.engine
    session.check_port()  # requests must reach the launched engine, and only it
    before = await read_counters(session, window_id) if engine.counter_acceptance else None
    t_start = time.time()
    check = ClientCheck.start(window_id, session.shards.pids if session.shards else [])

    # records are appended (and fsynced: ~5 ms each on this machine's disk) in the session's writer
    # thread, in order: an fsync on the event loop would stall every other stream being timed
    loop = asyncio.get_running_loop()
    written: list[asyncio.Future[None]] = []

    def on_record(rec: RequestRecord) -> None:
        written.append(loop.run_in_executor(session.writer, session.sink.request, rec))
        session.reporter.advance()

    if session.shards is not None:
        records = await session.shards.run_closed_loop(planned, first["concurrency"], on_record, window_id)
    else:
        records = await run_closed_loop(session.endpoint, planned, first["concurrency"], on_record)
    t_end = time.time()
    client = check.stop()
    await asyncio.gather(*written)  # every request record is on disk before the window's record
    proc = session.proc
    if proc is not None and not proc.alive():
        raise EngineDiedError(f"{session.name}: engine exited with code {proc.exit_code()} during "
                              f"{window_id}; see {proc.log_path}")
    session.check_port()
    counters, per_pos = None, None
    if before is not None:
        after = await read_counters(session, window_id)
        if after is not None:
            counters, per_pos = counter_delta(before, after)
    gpu = gpu_telemetry()  # clocks, power, temperature after the window (None without nvidia-smi)
    window = WindowRecord(
        window_id=window_id, variant=session.name, cell_id=first["cell_id"], point_id=first["point_id"],
        launch=first.get("launch", 1), repeat=first["repeat"], t_start=t_start, t_end=t_end,
        n_requests=len(records), counters=counters, per_position_accepted=per_pos,
        extra={"client": client, **({"gpu": gpu} if gpu else {})})
    session.sink.window(window)
    session.last_window = records
    return window


async def read_counters(session: VariantSession, window_id: str) -> dict[str, Any] | None:
    """The engine's counters, retried with a short backoff: a server busy with the window's last
    responses may miss one scrape. After the last attempt: ScrapeError, with the cause in one line."""
    for attempt in range(SCRAPE_ATTEMPTS):
        try:
            return await session.engine.read_counters(session.http, session.metrics_url)
        except (httpx.HTTPError, ValueError) as exc:  # ValueError: an unparsable metrics page
            error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:160] or 'no detail'}"
        if attempt < len(SCRAPE_BACKOFF_S):
            await asyncio.sleep(SCRAPE_BACKOFF_S[attempt])
    raise ScrapeError(f"{session.name}: cannot read the engine's counters at {session.metrics_url} "
                      f"({SCRAPE_ATTEMPTS} attempts, around {window_id}): {error}")


def counter_delta(before: dict[str, Any], after: dict[str, Any]) -> tuple[dict[str, float], list[float] | None]:
    """Counter increases over a window (server-wide totals are never used as a run metric)."""
    counters = {k: float(after[k]) - float(before.get(k) or 0.0) for k, v in after.items()
                if k != "per_position" and v is not None}
    pa, pb = after.get("per_position") or [], before.get("per_position") or []
    per_pos = [a - (pb[i] if i < len(pb) else 0.0) for i, a in enumerate(pa)] or None
    return counters, per_pos

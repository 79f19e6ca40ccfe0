"""One measurement window: counters before, the load (closed or open loop), counters after, the WindowRecord.

A window counts only once its WindowRecord is written (after its last request record), so a window cut
short by a crash, Ctrl-C or an engine death is measured again from scratch on resume.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import httpx

from ..environment import gpu_telemetry
from ..errors import EngineDiedError, ScrapeError
from ..load import Target, make_load
from ..plan import PlannedRequest
from ..records import RequestRecord, WindowRecord
from .session import VariantSession

SCRAPE_ATTEMPTS = 4
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
    before = await read_counters(session, window_id) if engine.counter_acceptance else None
    t_start = time.time()

    def on_record(rec: RequestRecord) -> None:
        session.sink.request(rec)
        session.reporter.advance()

    target = Target(engine, session.http, session.base_url, session.request_timeout_s, session.headers)
    records = await make_load(planned).send(target, planned, on_record)
    t_end = time.time()
    proc = session.proc
    if proc is not None and not proc.alive():
        raise EngineDiedError(f"{session.name}: engine exited with code {proc.exit_code()} during "
                              f"{window_id}; see {proc.log_path}")
    counters, per_pos = None, None
    if before is not None:
        after = await read_counters(session, window_id)
        if after is not None:
            counters, per_pos = counter_delta(before, after)
    gpu = gpu_telemetry()  # clocks, power, temperature after the window (None without nvidia-smi)
    extra: dict[str, Any] = {"gpu": gpu} if gpu else {}
    ramp = sum(1 for p in planned if p.fields["warmup"])
    if ramp:  # open loop: the counters cover these ramp-up requests too (no per-window reconciliation)
        extra["warmup_requests"] = ramp
    window = WindowRecord(
        window_id=window_id, variant=session.name, cell_id=first["cell_id"], point_id=first["point_id"],
        launch=first.get("launch", 1), repeat=first["repeat"], t_start=t_start, t_end=t_end,
        n_requests=len(records), counters=counters, per_position_accepted=per_pos,
        extra=extra)
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

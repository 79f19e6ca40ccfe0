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

from specbench.client.load import make_load
from specbench.plan.windows import PlannedRequest
from specbench.runner.enginestate import StateSampler
from specbench.runner.selfcheck import ClientCheck
from specbench.runner.session import VariantSession
from specbench.shared.environment import gpu_telemetry
from specbench.shared.errors import EngineDiedError, ScrapeError
from specbench.shared.schema import RequestRecord, WindowRecord

SCRAPE_ATTEMPTS = 4
ENGINE_EXIT_GRACE_S = 1.0  # after a window with broken connections: how long an engine's exit may take to show
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
    closed = all(p.at_s is None for p in planned)  # a closed loop keeps C in flight: the state sampler's reference
    state = StateSampler(engine, session.http, session.metrics_url, first["concurrency"] if closed else None,
                         len(planned))
    await state.start()
    t_start = session.now()  # the clock of every t_send (one clock: a wall-clock step cannot move an edge)
    check = ClientCheck.start(window_id, session.shards)

    # records are appended (and fsynced: ~5 ms each on this machine's disk) in the session's writer
    # thread, in order: an fsync on the event loop would stall every other stream being timed
    loop = asyncio.get_running_loop()
    written: list[asyncio.Future[None]] = []

    failed: list[OSError] = []

    def write(rec: RequestRecord) -> None:  # in the writer thread, one record after the other
        if failed:
            return  # the window is lost already (resume measures it again); let its requests finish
        try:
            session.sink.request(rec)
        except OSError as exc:  # a full disk: raised once the loop is over, never inside a worker task
            failed.append(exc)

    def on_record(rec: RequestRecord) -> None:
        state.finished()
        written.append(loop.run_in_executor(session.writer, write, rec))
        session.reporter.advance()

    load = make_load(planned, session.shards)
    try:
        records = await load.send(session.endpoint, planned, on_record)
    except BaseException:
        check.cancel()
        await state.cancel()
        raise
    t_end = session.now()
    engine_state = await state.stop()
    client = await check.stop()
    await asyncio.gather(*written)  # every request record is on disk before the window's record
    if failed:
        raise failed[0]
    proc = session.proc
    if proc is not None and proc.alive() and any(r.error and not r.error.startswith("HTTP ") for r in records):
        # a connection that broke may be the engine dying: its sockets close a moment before its exit can be
        # seen, so give the exit up to ENGINE_EXIT_GRACE_S to show (an engine that lives on costs that wait)
        deadline = time.monotonic() + ENGINE_EXIT_GRACE_S
        while proc.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
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
    extra: dict[str, Any] = {"client": client, **({"gpu": gpu} if gpu else {})}
    ramp = sum(1 for p in planned if p.fields["warmup"])
    if ramp:  # open loop: the counters cover these ramp-up requests too (no per-window reconciliation)
        extra["warmup_requests"] = ramp
    window = WindowRecord(
        window_id=window_id, variant=session.name, cell_id=first["cell_id"], point_id=first["point_id"],
        launch=first.get("launch", 1), repeat=first["repeat"], t_start=t_start, t_end=t_end,
        n_requests=len(records), counters=counters, per_position_accepted=per_pos, engine_state=engine_state,
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

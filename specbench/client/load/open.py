"""The open loop: each request is sent at its planned time (`PlannedRequest.at_s` after the window starts),
whatever is in flight, as production traffic arrives. Up to a safety cap: with `max_in_flight` requests
outstanding the next one waits for a slot, and is recorded as sent late (its `send_lag_s`), so a server that
falls behind cannot make specbench open unbounded connections.

Timing: asyncio sleeps until about SPIN_S before the send time (the event loop wakes with ~1 ms granularity),
then yields in a tight loop until the time comes; each record keeps its planned offset (`scheduled_s`) and
its lag (actual - planned send time, on the monotonic clock), reported as the send-time error (p50/p99).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.client.load.interface import OnRecord, Target, stream_planned
from specbench.plan.windows import PlannedRequest
from specbench.shared.schema import RequestRecord

SPIN_S = 0.0015  # the last 1.5 ms before a send are waited by yielding, not sleeping (timer granularity)


async def wait_until(deadline: float) -> None:
    """Return at (just after) `deadline` on time.perf_counter(), yielding to other tasks meanwhile."""
    while (left := deadline - time.perf_counter()) > SPIN_S:
        await asyncio.sleep(left - SPIN_S)
    while time.perf_counter() < deadline:
        await asyncio.sleep(0)


@dataclass(frozen=True)
class OpenLoop:
    max_in_flight: int

    async def send(self, target: Target, planned: Sequence[PlannedRequest],
                   on_record: OnRecord) -> list[RequestRecord]:
        order = sorted(planned, key=lambda p: p.at_s or 0.0)  # a trace may list ties in any order
        slots = asyncio.Semaphore(self.max_in_flight)
        records: list[RequestRecord] = []
        t0 = time.perf_counter()

        async def one(p: PlannedRequest, due: float) -> None:
            try:
                lag = time.perf_counter() - due
                rec = await stream_planned(target, p)
                rec.scheduled_s, rec.send_lag_s = p.at_s, lag
                records.append(rec)
                on_record(rec)
            finally:
                slots.release()

        tasks: list[asyncio.Task[None]] = []
        try:
            for p in order:
                due = t0 + (p.at_s or 0.0)
                await wait_until(due)
                await slots.acquire()  # the safety cap: beyond it, a send waits (and its lag says so)
                tasks.append(asyncio.create_task(one(p, due)))
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:  # cancelled (Ctrl-C, engine death): no request outlives the window
                t.cancel()
        return records

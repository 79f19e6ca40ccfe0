"""Samples the engine's state while a window runs (docs/metrics.md, "Engine state").

A task reads the engine's /metrics (`Engine.read_state`) once before the load starts, every SAMPLE_INTERVAL_S
while it runs, and once after it, and stops when the window's load is done (an event, never a fixed sleep: the
task waits on the event with the interval as its timeout). Each sample notes how many requests the client still
had in flight (closed loop: C until fewer than C remain). A scrape that fails is skipped: the state is a
diagnosis, never a reason to lose the window. One scrape every half second is a few milliseconds of the server's
time (vLLM renders its registry, ~100 series); an engine without state metrics is never scraped.
"""

from __future__ import annotations

import asyncio
import contextlib

import httpx

from specbench.metrics.engine_state import window_state
from specbench.server.engines import Engine

SAMPLE_INTERVAL_S = 0.5
SCRAPE_TIMEOUT_S = 5.0


class StateSampler:
    """`await start()`, `finished()` per completed request, `await stop()` -> the window's summary or None."""

    def __init__(self, engine: Engine, http: httpx.AsyncClient, metrics_url: str, concurrency: int | None,
                 n_requests: int, interval_s: float = SAMPLE_INTERVAL_S):
        self.engine, self.http, self.url = engine, http, metrics_url
        self.concurrency, self.n_requests, self.interval_s = concurrency, n_requests, interval_s
        self.done = 0
        self.samples: list[tuple[int | None, dict[str, float]]] = []
        self._before: dict[str, float] | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.active = bool(engine.state_metrics)

    async def _read(self) -> dict[str, float] | None:
        try:
            return await asyncio.wait_for(self.engine.read_state(self.http, self.url), SCRAPE_TIMEOUT_S)
        except (TimeoutError, httpx.HTTPError, ValueError):
            return None

    def _in_flight(self) -> int | None:
        if self.concurrency is None:
            return None
        return min(self.concurrency, self.n_requests - self.done)

    async def start(self) -> None:
        if not self.active:
            return
        self._before = await self._read()
        self._task = asyncio.create_task(self._run())

    def finished(self) -> None:
        self.done += 1

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), self.interval_s)
                return
            except TimeoutError:
                pass
            in_flight = self._in_flight()
            sample = await self._read()
            if sample is not None and not self._stop.is_set():
                self.samples.append((in_flight, sample))

    async def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def stop(self) -> dict[str, float] | None:
        if not self.active:
            return None
        self._stop.set()
        await self.cancel()  # a scrape under way belongs to the window's end: the read after it replaces it
        return window_state(self._before, self.samples, await self._read(), self.concurrency)

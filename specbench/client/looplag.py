"""How late the running event loop wakes a timer that asks to wake every LAG_TICK_S: a chunk that arrives
while the loop is busy (or its process descheduled) waits as long, so this bounds the timing error of the
TTFT / ITL samples taken on that loop. Used by the runner's self-check (runner/selfcheck.py) on its own loop
and by each client worker process (client_shards.py) on its loop, where its streams are timed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

LAG_TICK_S = 0.010


@dataclass
class LagTimer:
    lags_s: list[float] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    @classmethod
    def start(cls) -> LagTimer:
        """Start ticking on the running loop."""
        timer = cls()
        timer._task = asyncio.get_running_loop().create_task(timer._tick())
        return timer

    async def _tick(self) -> None:
        while True:
            due = time.perf_counter() + LAG_TICK_S
            await asyncio.sleep(LAG_TICK_S)
            self.lags_s.append(max(0.0, time.perf_counter() - due))

    def stop(self) -> list[float]:
        """Stop ticking; the lags measured, in seconds."""
        self.cancel()
        return self.lags_s

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None


def lag_summary(per_loop: Sequence[Sequence[float]]) -> dict[str, float]:
    """`loop_lag_p99_ms`: the largest p99 over the loops; `loop_lag_max_ms`: the largest lag of any loop
    (docs/metrics.md, client_saturated). Empty when no loop ticked."""
    loops = [lags for lags in per_loop if len(lags)]
    if not loops:
        return {}
    return {"loop_lag_p99_ms": round(1000 * max(float(np.percentile(lags, 99)) for lags in loops), 3),
            "loop_lag_max_ms": round(1000 * max(max(lags) for lags in loops), 3)}

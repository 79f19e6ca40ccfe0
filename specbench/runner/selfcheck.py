"""The client's self-check over one window: is specbench's own client the bottleneck?

Two figures per window, stored in `windows.jsonl` (`extra.client`):
- `cpu_share`: CPU time of the client process over the window's wall time (with client.processes > 1, of the
  busiest process, each being one event loop). At 0.9 or more the loop was saturated and chunks waited for it:
  the gate `client_saturated` (metrics/gates.py) blocks "adopt" for the cell.
- `loop_lag_p99_ms` / `loop_lag_max_ms`: how late a timer that asks to wake every 10 ms on the runner's event
  loop woke up. A chunk that arrives while the loop is busy (or the process is descheduled by other load) waits
  as long: this bounds the timing error of the window's TTFT / ITL samples, whatever the engine exposes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import psutil

LAG_TICK_S = 0.010


@dataclass
class ClientCheck:
    label: str  # the window id
    cpu0: float
    wall0: float
    workers: dict[int, float]  # client worker PID -> its CPU seconds at the start (client.processes > 1)
    lags_s: list[float] = field(default_factory=list)
    _ticker: asyncio.Task[None] | None = None

    @classmethod
    def start(cls, label: str, worker_pids: Sequence[int] = ()) -> ClientCheck:
        check = cls(label, time.process_time(), time.perf_counter(),
                    {pid: cpu for pid in worker_pids if (cpu := _cpu_s(pid)) is not None})
        check._ticker = asyncio.get_running_loop().create_task(check._tick())
        return check

    async def _tick(self) -> None:
        while True:
            due = time.perf_counter() + LAG_TICK_S
            await asyncio.sleep(LAG_TICK_S)
            self.lags_s.append(max(0.0, time.perf_counter() - due))

    def cancel(self) -> None:
        """The window failed: stop the lag timer (stop() is never called)."""
        if self._ticker is not None:
            self._ticker.cancel()

    async def stop(self) -> dict[str, float]:
        """CPU seconds, the busiest process's share of the window's wall time, and the loop's lag."""
        wall = time.perf_counter() - self.wall0
        cpus = [time.process_time() - self.cpu0]
        cpus += [now - c0 for pid, c0 in self.workers.items() if (now := _cpu_s(pid)) is not None]
        if self._ticker is not None:
            self._ticker.cancel()
            try:
                await self._ticker
            except asyncio.CancelledError:
                pass
        out = {"cpu_s": round(sum(cpus), 4), "wall_s": round(wall, 4),
               "cpu_share": round(max(cpus) / wall, 4) if wall > 0 else 0.0}
        if self.lags_s:
            out["loop_lag_p99_ms"] = round(1000 * float(np.percentile(self.lags_s, 99)), 3)
            out["loop_lag_max_ms"] = round(1000 * max(self.lags_s), 3)
        if self.workers:
            out["processes"] = len(self.workers)
        return out


def _cpu_s(pid: int) -> float | None:
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return float(t.user + t.system)

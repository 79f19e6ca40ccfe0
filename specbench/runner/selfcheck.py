"""The client's self-check over one window: is specbench's own client the bottleneck?

Two figures per window, stored in `windows.jsonl` (`extra.client`):
- `cpu_share`: CPU time of the client process over the window's wall time (with client.processes > 1, of the
  busiest process, each being one event loop). At 0.9 or more the loop was saturated and chunks waited for it:
  the gate `client_saturated` (metrics/gates.py) blocks "adopt" for the cell.
- `loop_lag_p99_ms` / `loop_lag_max_ms`: how late a timer that asks to wake every 10 ms woke up (looplag.py),
  on every event loop that timed streams: the runner's, and with client.processes > 1 each worker's (where
  the sharded window's timestamps are taken); the largest p99 and the largest lag over those loops. A chunk
  that arrives while a loop is busy (or its process is descheduled by other load) waits as long: this bounds
  the timing error of the window's TTFT / ITL samples, whatever the engine exposes. At a p99 of 50 ms or
  more the gate `client_lagging` (metrics/gates.py) blocks "adopt" for the cell: a starved client (other
  load on its cores) lags with a low CPU share, which `client_saturated` does not see.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psutil

from specbench.client.looplag import LagTimer, lag_summary
from specbench.client.shards import ShardedClient


@dataclass
class ClientCheck:
    label: str  # the window id
    cpu0: float
    wall0: float
    workers: dict[int, float]  # client worker PID -> its CPU seconds at the start (client.processes > 1)
    timer: LagTimer
    shards: ShardedClient | None = None

    @classmethod
    def start(cls, label: str, shards: ShardedClient | None = None) -> ClientCheck:
        pids = shards.pids if shards is not None else []
        if shards is not None:
            shards.last_lags_s = []  # a window the workers do not carry (the open loop) has no lags of theirs
        return cls(label, time.process_time(), time.perf_counter(),
                   {pid: cpu for pid in pids if (cpu := _cpu_s(pid)) is not None}, LagTimer.start(), shards)

    def cancel(self) -> None:
        """The window failed: stop the lag timer (stop() is never called)."""
        self.timer.cancel()

    async def stop(self) -> dict[str, float]:
        """CPU seconds, the busiest process's share of the window's wall time, and the loops' lag."""
        wall = time.perf_counter() - self.wall0
        cpus = [time.process_time() - self.cpu0]
        cpus += [now - c0 for pid, c0 in self.workers.items() if (now := _cpu_s(pid)) is not None]
        lags = [self.timer.stop(), *(self.shards.last_lags_s if self.shards is not None else [])]
        out = {"cpu_s": round(sum(cpus), 4), "wall_s": round(wall, 4),
               "cpu_share": round(max(cpus) / wall, 4) if wall > 0 else 0.0, **lag_summary(lags)}
        if self.workers:
            out["processes"] = len(self.workers)
        return out


def _cpu_s(pid: int) -> float | None:
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return float(t.user + t.system)

"""Open-loop arrival schedules: when each request of a window is sent, as offsets in seconds from the
window's start. Pure and seeded: the same (kind, n, rate, seed, burstiness) gives the same offsets on every
variant, launch and machine (numpy's PCG64), so every variant is offered the same traffic.

The gaps are drawn at rate 1 and divided by the rate, so one seed gives the same arrivals, time-scaled, at
every rate: a faster rate offers the same sequence compressed (common random numbers make the latency-vs-rate
curve smooth). As in vLLM's `bench serve`: poisson has exponential gaps; gamma has gamma gaps with shape
`burstiness` and mean 1/rate (burstiness 1 is poisson, < 1 is burstier, > 1 smoother); constant is 1/rate.
The first request is sent at offset 0.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

Arrival = Literal["poisson", "gamma", "constant"]


def unit_gaps(kind: Arrival, n: int, seed: int, burstiness: float = 1.0) -> np.ndarray:
    """n - 1 gaps between n arrivals at rate 1 (mean 1 s)."""
    if n < 1:
        return np.zeros(0)
    rng = np.random.default_rng(seed)
    if kind == "constant":
        return np.ones(n - 1)
    if kind == "poisson":
        return rng.exponential(1.0, n - 1)
    if kind == "gamma":
        if burstiness <= 0:
            raise ValueError("burstiness must be > 0")
        return rng.gamma(shape=burstiness, scale=1.0 / burstiness, size=n - 1)
    raise ValueError(f"unknown arrival process {kind!r}")


def arrival_offsets(kind: Arrival, n: int, rate: float, seed: int, burstiness: float = 1.0) -> list[float]:
    """Send offsets (s) of n requests offered at `rate` requests/s: 0, then the cumulative gaps / rate."""
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"rate must be a positive number, not {rate}")
    gaps = unit_gaps(kind, n, seed, burstiness) / rate
    return [0.0] + [float(x) for x in np.cumsum(gaps)] if n else []


@dataclass(frozen=True)
class TraceRequest:
    """One line of a trace file: when it arrived and, optionally, what it asked for."""

    t_s: float  # arrival offset from the trace's first request
    prompt_id: str | None = None
    input_len: int | None = None
    output_len: int | None = None


@dataclass(frozen=True)
class Trace:
    requests: list[TraceRequest]

    @property
    def rate(self) -> float:
        """The trace's own offered rate: (n - 1) / (last - first arrival); NaN for fewer than 2 or no span."""
        if len(self.requests) < 2:
            return math.nan
        span = self.requests[-1].t_s - self.requests[0].t_s
        return (len(self.requests) - 1) / span if span > 0 else math.nan

    def offsets(self, rate: float | None = None) -> list[float]:
        """Arrival offsets from the first request; time-scaled to `rate` when one is given."""
        t0 = self.requests[0].t_s if self.requests else 0.0
        scale = self.rate / rate if rate is not None else 1.0
        return [(r.t_s - t0) * scale for r in self.requests]


def _opt_int(line: dict, key: str, where: str) -> int | None:
    v = line.get(key)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{where}: {key} must be a positive integer, not {v!r}")
    return v


def load_trace(path: str | Path) -> Trace:
    """A JSONL trace: one request per line, `{"t": seconds, "prompt_id"?, "input_len"?, "output_len"?}`,
    arrival offsets non-decreasing. ValueError (one line, naming the line) on anything else."""
    p = Path(path)
    out: list[TraceRequest] = []
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"cannot read trace {p}: {exc.strerror or exc}") from None
    for i, text in enumerate(lines, 1):
        if not text.strip():
            continue
        where = f"{p.name} line {i}"
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"{where}: not a JSON object") from None
        if not isinstance(line, dict):
            raise ValueError(f"{where}: not a JSON object")
        t = line.get("t")
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t) or t < 0:
            raise ValueError(f"{where}: t must be a finite number of seconds >= 0, not {t!r}")
        if out and t < out[-1].t_s:
            raise ValueError(f"{where}: t goes back in time ({t} < {out[-1].t_s})")
        pid = line.get("prompt_id")
        out.append(TraceRequest(t_s=float(t), prompt_id=None if pid is None else str(pid),
                                input_len=_opt_int(line, "input_len", where),
                                output_len=_opt_int(line, "output_len", where)))
    if len(out) < 2:
        raise ValueError(f"{p.name}: a trace needs at least 2 requests")
    if not math.isfinite(Trace(out).rate):
        raise ValueError(f"{p.name}: every request arrives at the same time (no rate)")
    return Trace(out)

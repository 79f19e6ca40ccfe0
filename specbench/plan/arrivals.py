"""Open-loop arrival schedules: when each request of a window is sent, as offsets in seconds from the
window's start. Pure and seeded: the same (kind, n, rate, seed, burstiness) gives the same offsets on every
variant, launch and machine (numpy's PCG64), so every variant is offered the same traffic.

The gaps are drawn at rate 1 and divided by the rate, so one seed gives the same arrivals, time-scaled, at
every rate: a faster rate offers the same sequence compressed (common random numbers make the latency-vs-rate
curve smooth). As in vLLM's `bench serve`: poisson has exponential gaps; gamma has gamma gaps with shape
`burstiness` and mean 1/rate (burstiness 1 is poisson, < 1 is burstier, > 1 smoother); constant is 1/rate.
The first request is sent at offset 0.

A drawn schedule realizes the rate it was asked for exactly: the whole draw is rescaled by one factor so
that its realized rate (`rank_rate` of the offsets from `fit_from` on, i.e. of the measured requests) is
`rate`. Without it one unit-rate draw of 300 Poisson arrivals offered 0.878 x the nominal rate at every rate
(issue 33), and a capacity read off the nominal rates was 14% too high. The rescaling keeps the shape of
the gaps and the common random numbers (one factor per seed, the same at every rate).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
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


def rank_rate(times: Sequence[float]) -> float:
    """Events per second: 1 / the least-squares slope of the sorted event times against their rank. Unlike
    (n - 1) / (last - first), it does not hinge on the two end events. NaN for fewer than 3 finite times."""
    t = np.sort(np.asarray([x for x in times if math.isfinite(x)], dtype=float))
    if t.size < 3:
        return math.nan
    slope = float(np.polyfit(np.arange(t.size, dtype=float), t, 1)[0])
    return 1.0 / slope if slope > 0 else math.nan


def arrival_offsets(kind: Arrival, n: int, rate: float, seed: int, burstiness: float = 1.0,
                    fit_from: int = 0) -> list[float]:
    """Send offsets (s) of n requests offered at `rate` requests/s: 0, then the cumulative unit gaps, scaled
    so that the offsets from index `fit_from` on realize `rate` exactly (rank_rate; see the module docstring).
    Fewer than 3 offsets to fit: the gaps / rate."""
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"rate must be a positive number, not {rate}")
    if n < 1:
        return []
    if kind == "constant":  # exact already
        return [i / rate for i in range(n)]
    at = np.concatenate([[0.0], np.cumsum(unit_gaps(kind, n, seed, burstiness))])
    realized = rank_rate(list(at[fit_from:]))  # the unit draw's own rate (1 on average)
    scale = realized / rate if math.isfinite(realized) else 1.0 / rate
    return [float(x) * scale for x in at]


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

"""Open-loop statistics per point: SLOs, attainment, goodput, percentiles with intervals, saturation.

Definitions (docs/metrics.md, "Open loop and SLOs"):
- an SLO is (metric, percentile, threshold): "p90 TTFT <= 0.5 s". It holds at a point when the point is not
  saturated and the percentile of the metric over the point's measured requests is <= the threshold. A
  failed request counts as infinitely slow (it missed every threshold);
- a request is good when it meets every per-request threshold of the SLO set (vLLM's goodput definition:
  ttft <= t_ttft and tpot <= t_tpot and e2e <= t_e2e); attainment = good / measured requests;
  goodput = good requests / window span (first send to last finish), good tokens/s likewise;
- saturation: the achieved completion rate falls short of the offered rate, or waiting (TTFT) grows through
  the window.
Pure: numbers in, numbers out; undefined is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.stats

from .common import NAN

METRIC_NAMES = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_s": "e2e latency"}
SATURATION_RATE_RATIO = 0.9  # achieved completion rate below 90% of the offered rate: the server fell behind
WAIT_GROWTH_RATIO = 3.0  # median TTFT of the window's last third over its first third ...
WAIT_GROWTH_MIN_S = 0.05  # ... and by at least 50 ms (a 1 ms TTFT doubling to 2 ms is jitter, not a backlog)
CONFIDENCE = 0.95
_INF_STANDIN = 1e300  # a failed request's latency inside numpy's percentile (inf would interpolate to NaN)


@dataclass(frozen=True)
class SLO:
    metric: str  # ttft_s | tpot_s | e2e_s
    percentile: float  # 50 .. 99.9
    threshold_s: float

    @property
    def key(self) -> str:
        """Stable text id: `ttft_s:p90`."""
        return f"{self.metric}:p{self.percentile:g}"

    @property
    def label(self) -> str:
        """As the verdict words it: `p90 TTFT <= 0.5 s`."""
        return f"p{self.percentile:g} {METRIC_NAMES[self.metric]} <= {self.threshold_s:g} s"


def parse_slos(slo: Mapping[str, Mapping[str, float]] | None) -> list[SLO]:
    """The config's `slo:` mapping ({ttft_s: {p90: 0.5}}) as SLOs, in a stable order."""
    out = [SLO(metric=m, percentile=float(str(k).removeprefix("p")), threshold_s=float(v))
           for m, pcts in (slo or {}).items() for k, v in pcts.items()]
    return sorted(out, key=lambda s: (list(METRIC_NAMES).index(s.metric), s.percentile))


@dataclass(frozen=True)
class RequestLatency:
    """One measured request as the SLOs see it (NaN where undefined)."""

    ok: bool
    ttft_s: float
    tpot_s: float  # NaN for fewer than 2 output tokens
    e2e_s: float
    n_out: float

    def value(self, metric: str) -> float:
        """The metric as an SLO compares it: a failed request is infinitely slow; a TPOT undefined for a
        one-token answer is 0 (it waited for no second token; vLLM's goodput does the same)."""
        if not self.ok:
            return math.inf
        v = {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s}[metric]
        if metric == "tpot_s" and math.isnan(v):
            return 0.0
        return math.inf if math.isnan(v) else v

    def meets(self, slos: Sequence[SLO]) -> bool:
        """Good (vLLM's goodput): every per-request threshold met."""
        return all(self.value(s.metric) <= s.threshold_s for s in slos)


@dataclass(frozen=True)
class Quantile:
    """A percentile with its distribution-free 95% interval (order statistics; inf = not bounded)."""

    estimate: float
    low: float
    high: float


def quantile_ci(values: Sequence[float], q: float, confidence: float = CONFIDENCE) -> Quantile:
    """The q-th percentile (numpy linear) and the order-statistic interval [x_(l), x_(u)], 1-based ranks
    l = B^-1(a/2; n, q/100), u = B^-1(1 - a/2; n, q/100) + 1 of the binomial B: it covers the true quantile
    with probability >= confidence whatever the distribution. A rank outside 1..n is unbounded (-inf / inf).
    Infinite values (failed requests) are allowed; NaN values are dropped."""
    arr = np.sort(np.asarray([v for v in values if not math.isnan(v)], dtype=float))
    n = arr.size
    if n == 0:
        return Quantile(NAN, NAN, NAN)
    finite = np.where(np.isinf(arr), _INF_STANDIN, arr)
    est = float(np.percentile(finite, q))
    est = math.inf if est >= _INF_STANDIN / 10 else est
    p, a = q / 100.0, (1 - confidence) / 2
    lo_rank = int(scipy.stats.binom.ppf(a, n, p))
    hi_rank = int(scipy.stats.binom.ppf(1 - a, n, p)) + 1
    low = float(arr[lo_rank - 1]) if lo_rank >= 1 else -math.inf
    high = float(arr[hi_rank - 1]) if hi_rank <= n else math.inf
    return Quantile(est, low, high)


def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n; (NaN, NaN) for n = 0."""
    if n <= 0:
        return NAN, NAN
    z = float(scipy.stats.norm.ppf(0.5 + confidence / 2))
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


@dataclass(frozen=True)
class WindowTiming:
    """One open-loop window's requests in schedule order: planned offsets, finish offsets (NaN if failed),
    TTFTs (NaN if failed)."""

    scheduled_s: Sequence[float]
    finish_s: Sequence[float]
    ttft_s: Sequence[float]


@dataclass(frozen=True)
class Saturation:
    offered_req_s: float  # the schedule's own rate: 1 / least-squares slope of planned send times by rank
    achieved_req_s: float  # successful completions: 1 / slope of their finish times by rank
    wait_growth: float  # median TTFT of the window's last third / of its first third
    saturated: bool
    reason: str  # "" | "rate" | "waiting" | "rate+waiting"


def rank_rate(times: Sequence[float]) -> float:
    """Events per second: 1 / the least-squares slope of the sorted event times against their rank. Unlike
    (n - 1) / (last - first), it does not hinge on the two end events. NaN for fewer than 3 finite times."""
    t = np.sort(np.asarray([x for x in times if math.isfinite(x)], dtype=float))
    if t.size < 3:
        return NAN
    slope = float(np.polyfit(np.arange(t.size, dtype=float), t, 1)[0])
    return 1.0 / slope if slope > 0 else NAN


def saturation(w: WindowTiming) -> Saturation:
    """Is the server keeping up with the offered rate? Saturated when successful requests complete at less
    than SATURATION_RATE_RATIO x the rate they were offered at (both rank_rate, the offered one from the
    schedule itself, so a short Poisson window's own randomness is not a shortfall), or when the median TTFT
    of the window's last third exceeds WAIT_GROWTH_RATIO x its first third's and by WAIT_GROWTH_MIN_S.
    A failed request counts as never finishing (and as an infinite TTFT)."""
    offered = rank_rate(w.scheduled_s)
    n_ok = sum(1 for x in w.finish_s if math.isfinite(x))
    achieved = rank_rate(w.finish_s) if n_ok >= 3 else (0.0 if len(w.scheduled_s) >= 3 else NAN)
    ttft = np.asarray(w.ttft_s, dtype=float)
    third = ttft.size // 3
    growth, slow_wait = NAN, False
    if third >= 1:
        first_med = float(np.median(np.where(np.isnan(ttft[:third]), math.inf, ttft[:third])))
        last_med = float(np.median(np.where(np.isnan(ttft[-third:]), math.inf, ttft[-third:])))
        growth = last_med / first_med if 0 < first_med < math.inf else NAN
        slow_wait = last_med > WAIT_GROWTH_RATIO * first_med and last_med - first_med > WAIT_GROWTH_MIN_S
    short = math.isfinite(offered) and math.isfinite(achieved) and achieved < SATURATION_RATE_RATIO * offered
    reason = "+".join(r for r, hit in (("rate", short), ("waiting", slow_wait)) if hit)
    return Saturation(offered, achieved, growth, bool(reason), reason)


@dataclass(frozen=True)
class Goodput:
    attainment: float  # good / measured
    attainment_low: float
    attainment_high: float
    req_s: float  # good requests / span
    req_s_low: float
    req_s_high: float
    tok_s: float  # output tokens of good requests / span
    tok_s_low: float
    tok_s_high: float


def goodput(reqs: Sequence[RequestLatency], slos: Sequence[SLO], span_s: float) -> Goodput:
    """Attainment (Wilson interval) and goodput over `span_s` seconds of measurement. The intervals carry
    the binomial uncertainty of attainment only (the span and tokens per good request are taken as known)."""
    n = len(reqs)
    good = [r for r in reqs if r.meets(slos)]
    k = len(good)
    if n == 0 or not span_s > 0:
        return Goodput(*([NAN] * 9))
    f = k / n
    lo, hi = wilson(k, n)
    req_s = k / span_s
    tok = float(sum(r.n_out for r in good if math.isfinite(r.n_out)))
    tok_s = tok / span_s
    per_good = tok / k if k else NAN  # good tokens scale with good requests
    tok_lo, tok_hi = ((lo * n * per_good / span_s, hi * n * per_good / span_s) if k else (0.0, NAN))
    return Goodput(f, lo, hi, req_s, lo * n / span_s, hi * n / span_s, tok_s, tok_lo, tok_hi)

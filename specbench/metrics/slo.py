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

from specbench.metrics.common import NAN
from specbench.plan.arrivals import rank_rate

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


BATCHES_PER_WINDOW = 5  # batch means: a window's requests in schedule order, cut into 5 consecutive batches
MIN_BATCH = 10  # ... of at least 10 requests each (fewer batches in a short window)
HALF_BATCHES = 5  # the steady-state check: 5 batches in each half of a window


def _batches(windows: Sequence[Sequence[float]], per_window: int) -> list[np.ndarray]:
    """Consecutive batches of each window's values (schedule order, NaN dropped); batches never span windows."""
    out = []
    for w in windows:
        x = np.asarray([v for v in w if not math.isnan(v)], dtype=float)
        k = min(per_window, x.size // MIN_BATCH)
        out += [b for b in np.array_split(x, k)] if k >= 1 else []
    return out


def _cdf_se(batches: Sequence[np.ndarray], at: float) -> tuple[float, int]:
    """(SE of the fraction of the values <= `at`, its df) from the batch means of the indicator 1{x <= at}:
    SD of the batch means / sqrt(batches), df = batches - 1. (NaN, 0) with fewer than 2 batches."""
    if len(batches) < 2:
        return NAN, 0
    means = np.array([float(np.mean(b <= at)) for b in batches])
    return float(np.std(means, ddof=1)) / math.sqrt(len(batches)), len(batches) - 1


def _t(df: int, confidence: float) -> float:
    """The two-sided critical value: Student t with df degrees of freedom, the normal one for df 0 (no batches)."""
    a = 0.5 + confidence / 2
    return float(scipy.stats.t.ppf(a, df)) if df >= 1 else float(scipy.stats.norm.ppf(a))


def batch_quantile_ci(windows: Sequence[Sequence[float]], q: float, confidence: float = CONFIDENCE) -> Quantile:
    """The q-th percentile of every window's values pooled, with a 95% interval that holds when consecutive
    requests are correlated (they share the queue): the fraction F of values below the estimate has the
    batch-means SE of `_cdf_se` (5 consecutive batches per window, t with batches - 1 df); the interval is
    the order statistics at ranks floor(n (p - t SE)) and ceil(n (p + t SE)) + 1, widened to contain the
    independent-requests interval of `quantile_ci` (it is never narrower; it is that interval under 20
    requests). Windows are independent (each its
    own schedule and its own start), so several windows (repeats, launches) add batches of their own."""
    pooled = [v for w in windows for v in w]
    iid = quantile_ci(pooled, q, confidence)
    arr = np.sort(np.asarray([v for v in pooled if not math.isnan(v)], dtype=float))
    n, p = arr.size, q / 100.0
    if n == 0 or math.isnan(iid.estimate):
        return iid
    se, df = _cdf_se(_batches(windows, BATCHES_PER_WINDOW), iid.estimate)
    if math.isnan(se):
        return iid  # fewer than 2 batches (under 20 requests): the independent-requests interval
    half = _t(df, confidence) * se
    lo_rank, hi_rank = math.floor(n * (p - half)), math.ceil(n * (p + half)) + 1
    low = float(arr[lo_rank - 1]) if lo_rank >= 1 else -math.inf
    high = float(arr[hi_rank - 1]) if hi_rank <= n else math.inf
    return Quantile(iid.estimate, min(low, iid.low), max(high, iid.high))


RISING, FALLING = "rising", "falling"  # the second halves slower / faster than the first halves


@dataclass(frozen=True)
class Halves:
    """The steady-state check of one percentile: its estimate over each window's first and second half."""

    first: float
    second: float
    trend: str  # "" (the halves agree) | RISING | FALLING


def halves(windows: Sequence[Sequence[float]], q: float, confidence: float = CONFIDENCE) -> Halves:
    """Do the two halves of the windows (schedule order) agree on the q-th percentile? With x the pooled
    estimate, F1 and F2 the fractions of the first and second halves' values <= x, each with the batch-means
    SE of `_cdf_se` (5 batches per half-window): they disagree when |F1 - F2| > max(t SE, z SE_iid),
    SE = sqrt(SE1^2 + SE2^2), t of Student with the batches' df (95%, two-sided), SE_iid the binomial
    sqrt(p (1 - p) (1/n1 + 1/n2)) of independent requests (a floor). F1 > F2: the second half is slower
    (RISING: the queue still filling, from the empty server the window started on); F1 < F2: FALLING."""
    split = [(list(w[: len(w) // 2]), list(w[len(w) // 2:])) for w in windows]
    first, second = [a for a, _ in split], [b for _, b in split]
    x = quantile_ci([v for w in windows for v in w], q).estimate
    q1, q2 = (quantile_ci([v for w in first for v in w], q).estimate,
              quantile_ci([v for w in second for v in w], q).estimate)
    if math.isnan(x) or math.isinf(x):
        return Halves(q1, q2, "")
    p = q / 100.0
    b1, b2 = _batches(first, HALF_BATCHES), _batches(second, HALF_BATCHES)
    if len(b1) < 2 or len(b2) < 2:
        return Halves(q1, q2, "")  # too short to tell
    n1, n2 = sum(b.size for b in b1), sum(b.size for b in b2)
    (se1, df1), (se2, df2) = _cdf_se(b1, x), _cdf_se(b2, x)
    f1 = float(np.mean(np.concatenate(b1) <= x))
    f2 = float(np.mean(np.concatenate(b2) <= x))
    iid = math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2))  # the floor: independent requests
    limit = max(_t(df1 + df2, confidence) * math.hypot(se1, se2), _t(0, confidence) * iid)
    trend = RISING if f1 - f2 > limit else FALLING if f2 - f1 > limit else ""
    return Halves(q1, q2, trend)


SEND_LAG_FRACTION = 0.1  # a point counts only when its p99 send lag <= 10% of the tightest SLO threshold


def send_lag_bound(slos: Sequence[SLO], configured: float | None = None) -> float:
    """The send-lag gate's bound (s): `sweep.load.max_send_lag_s` when set, else SEND_LAG_FRACTION x the
    smallest SLO threshold (NaN without SLOs). A sender later than this has bunched the arrivals the server
    saw, so the point is not the offered process."""
    if configured is not None:
        return configured
    return SEND_LAG_FRACTION * min(s.threshold_s for s in slos) if slos else NAN


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

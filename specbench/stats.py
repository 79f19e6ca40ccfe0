"""Small pure statistics: percentiles, bootstrap intervals, outliers, break-even.

Every function takes arrays and returns numbers: no I/O, no printing, no plotting. Undefined results
are None (scalars handed to callers) or NaN (values bound for a DataFrame column), never 0.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

import numpy as np
import scipy.stats

ArrayLike = Sequence[float] | np.ndarray
CIMethod = Literal["BCa", "percentile", "basic"]
Interval = tuple[float | None, float | None]

# Modified Z = 0.6745 * (x - median) / MAD (Iglewicz & Hoaglin 1993); outlier cut-offs below.
# 0.6745 is the 0.75 quantile of N(0,1), so 0.6745 / MAD = 1 / (1.4826 * MAD) = 1 / robust sigma.
MAD_TO_Z = 0.6745
OUTLIER_Z = 10.0  # hyperfine's cut-off: 10 robust standard deviations
OUTLIER_MIN_REL = 0.10  # and at least 10% from the median: a tight cell's 1% wobble is not an outlier


def _clean(values: ArrayLike) -> np.ndarray:
    """Finite values as float64 (NaN and None dropped)."""
    arr = np.asarray(values, dtype=float).ravel()
    return arr[np.isfinite(arr)]


def percentile(values: ArrayLike, q: float) -> float:
    """q-th percentile (0..100), numpy's linear interpolation (as vLLM and SGLang use); NaN if empty."""
    arr = _clean(values)
    return float(np.percentile(arr, q)) if arr.size else math.nan


def percentiles(values: ArrayLike, qs: Sequence[float] = (50, 90, 99)) -> dict[float, float]:
    arr = _clean(values)
    return {q: (float(np.percentile(arr, q)) if arr.size else math.nan) for q in qs}


def mean(values: ArrayLike) -> float:
    arr = _clean(values)
    return float(arr.mean()) if arr.size else math.nan


def coefficient_of_variation(values: ArrayLike) -> float:
    """cv = sample std (ddof=1) / mean; NaN with fewer than 2 values or a zero mean."""
    arr = _clean(values)
    if arr.size < 2 or arr.mean() == 0:
        return math.nan
    return float(arr.std(ddof=1) / arr.mean())


def _run_bootstrap(
    data: tuple[np.ndarray, ...],
    statistic: Callable[..., Any],
    *,
    paired: bool,
    n_resamples: int,
    confidence: float,
    seed: int,
    method: CIMethod,
) -> Interval:
    """scipy.stats.bootstrap with BCa -> percentile fallback; degenerate samples give a zero-width interval."""
    for m in (method, "percentile") if method != "percentile" else ("percentile",):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DegenerateDataWarning, divide-by-zero in resamples
            res = scipy.stats.bootstrap(
                data,
                statistic,
                n_resamples=n_resamples,
                confidence_level=confidence,
                method=m,
                paired=paired,
                rng=np.random.default_rng(seed),
            )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return lo, hi
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        point = float(statistic(*data, axis=-1))
    # Every resample equal (all samples identical): the interval collapses onto the estimate.
    return (point, point) if math.isfinite(point) else (None, None)


def bootstrap_ci(
    samples: ArrayLike,
    statistic: Callable[..., float] = np.mean,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    method: CIMethod = "BCa",
) -> Interval:
    """Two-sided bootstrap interval of `statistic` (a numpy reduction taking `axis`) over i.i.d. samples.

    Fewer than 2 finite samples -> (None, None). BCa falls back to percentile when it is undefined.
    """
    arr = _clean(samples)
    if arr.size < 2:
        return None, None
    if np.ptp(arr) == 0:
        v = float(statistic(arr, axis=-1))
        return v, v
    return _run_bootstrap(
        (arr,), statistic, paired=False, n_resamples=n_resamples, confidence=confidence, seed=seed, method=method
    )


def ratio_of_means(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """mean(x) / mean(y) (equal to sum(x) / sum(y) for paired samples)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mean(x, axis=axis) / np.mean(y, axis=axis)


def paired_ratio_ci(
    numerator: ArrayLike,
    denominator: ArrayLike,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    method: CIMethod = "BCa",
) -> Interval:
    """Paired bootstrap interval of mean(numerator) / mean(denominator).

    numerator[i] and denominator[i] belong to the same key (same repeat, or same (repeat, index)) and
    are resampled together, so what the two share (prompt, run-to-run drift) cancels in the ratio.
    Pairs with a non-finite member are dropped; fewer than 2 pairs -> (None, None).
    """
    x = np.asarray(numerator, dtype=float).ravel()
    y = np.asarray(denominator, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 2 or y.sum() == 0:
        return None, None
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        v = float(ratio_of_means(x, y))
        return v, v
    return _run_bootstrap(
        (x, y), ratio_of_means, paired=True, n_resamples=n_resamples, confidence=confidence, seed=seed, method=method
    )


def mad_outliers(values: ArrayLike, threshold: float = OUTLIER_Z,
                 min_rel_deviation: float = OUTLIER_MIN_REL) -> list[int]:
    """Indices (into `values`) whose modified Z-score |0.6745 (x - median) / MAD| exceeds `threshold`.

    MAD = median(|x - median(x)|). As in hyperfine, a zero MAD is replaced by machine epsilon, so with
    most samples identical any differing sample is an outlier, and the cut-off is 10 robust standard
    deviations (|x - median| / MAD > 14.826, i.e. modified Z > 10). Iglewicz & Hoaglin's textbook 3.5
    flagged a third of the demo's cells. Requests of one closed-loop wave can agree to 0.1%, so a MAD
    rule alone flags a 1% deviation: a sample must also lie `min_rel_deviation` (10%) from the median.
    Non-finite values are never flagged; fewer than 3 finite values -> [].
    """
    arr = np.asarray(values, dtype=float).ravel()
    finite = np.isfinite(arr)
    if finite.sum() < 3:
        return []
    med = float(np.median(arr[finite]))
    mad = float(np.median(np.abs(arr[finite] - med)))
    mad = mad if mad > 0 else float(np.finfo(float).eps)
    z = MAD_TO_Z * (arr - med) / mad
    far = np.abs(arr - med) > min_rel_deviation * abs(med)
    return [int(i) for i in np.flatnonzero(finite & (np.abs(z) > threshold) & far)]


BreakEvenStatus = Literal["pays_up_to", "pays_everywhere", "never_pays", "inconclusive", "no_data"]


@dataclass(frozen=True)
class BreakEven:
    """Where a speedup-vs-concurrency curve crosses 1.0.

    break_even_concurrency: interpolated crossing (None unless status == 'pays_up_to').
    uncertain_from: first measured level whose interval contains or lies below 1.0 (None: none did,
    or no intervals). last_confident: the level before it (interval entirely above 1.0).
    """

    status: BreakEvenStatus
    break_even_concurrency: float | None
    uncertain_from: int | None
    last_confident: int | None
    verdict: str


def _fmt_c(c: float) -> str:
    return f"{c:.0f}" if c >= 10 else f"{c:.1f}"


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def break_even(
    concurrency: Sequence[int],
    speedup: Sequence[float],
    ci_low: Sequence[float | None] | None = None,
    ci_high: Sequence[float | None] | None = None,
) -> BreakEven:
    """Concurrency at which the speedup first drops below 1.0, interpolated in log2(concurrency).

    Between measured levels (c0, s0 >= 1) and (c1, s1 < 1):
        log2 C* = log2 c0 + (s0 - 1) / (s0 - s1) * (log2 c1 - log2 c0)
    Levels with a non-finite speedup are skipped. Status:
      inconclusive  the lowest level's interval contains 1.0 (cannot say it pays even there);
      never_pays    speedup < 1 at the lowest level;
      pays_everywhere speedup >= 1 at every level (the break-even lies beyond the sweep);
      pays_up_to    the first downward crossing, C*.
    """
    n = len(concurrency)
    lo_in = list(ci_low) if ci_low is not None else [None] * n
    hi_in = list(ci_high) if ci_high is not None else [None] * n
    if not (len(speedup) == len(lo_in) == len(hi_in) == n):
        raise ValueError("concurrency, speedup and interval bounds must have the same length")
    pts = sorted(
        (int(c), float(s), lo_in[i], hi_in[i])
        for i, (c, s) in enumerate(zip(concurrency, speedup))
        if _finite(s) and c >= 1
    )
    if not pts:
        return BreakEven("no_data", None, None, None, "no data: no valid speedup at any level")

    # First level whose interval contains or lies below 1.0 (needs a finite lower bound).
    uncertain_from: int | None = None
    last_confident: int | None = None
    for c, _s, lo, _hi in pts:
        if not _finite(lo):
            continue
        if lo <= 1.0:  # type: ignore[operator]
            uncertain_from = c
            break
        last_confident = c
    interval_note = _interval_note(uncertain_from, last_confident, any(_finite(p[2]) for p in pts))

    c0, s0, lo0, hi0 = pts[0]
    if _finite(lo0) and _finite(hi0) and lo0 <= 1.0 <= hi0:  # type: ignore[operator]
        return BreakEven(
            "inconclusive", None, uncertain_from, None, f"inconclusive: interval contains 1.0 at C={c0}"
        )
    if s0 < 1.0:
        return BreakEven("never_pays", None, uncertain_from, None, f"never pays (speedup {s0:.2f} at C={c0})")

    for (ca, sa, _, _), (cb, sb, _, _) in zip(pts, pts[1:]):
        if sa >= 1.0 > sb:
            xa, xb = math.log2(ca), math.log2(cb)
            c_star = 2.0 ** (xa + (sa - 1.0) / (sa - sb) * (xb - xa))
            later = [c for c, s, _, _ in pts if c > cb and s >= 1.0]
            tail = f"; not monotone: >= 1.0 again at C={later[0]}" if later else ""
            return BreakEven(
                "pays_up_to",
                c_star,
                uncertain_from,
                last_confident,
                f"pays up to C≈{_fmt_c(c_star)} ({interval_note}){tail}",
            )
    return BreakEven(
        "pays_everywhere",
        None,
        uncertain_from,
        last_confident,
        f"pays at every measured level (beyond the sweep; {interval_note})",
    )


def _interval_note(uncertain_from: int | None, last_confident: int | None, any_interval: bool) -> str:
    if not any_interval:
        return "no interval"
    if uncertain_from is None:
        return "interval above 1.0 at every level with an interval"
    if last_confident is None:
        return f"interval contains 1.0 from C={uncertain_from}"
    return f"interval crosses 1.0 between {last_confident} and {uncertain_from}"

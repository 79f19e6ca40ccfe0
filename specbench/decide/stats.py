"""Small pure statistics: percentiles, t intervals, outliers (break-even concurrency: `breakeven.py`).

Every function takes arrays and returns numbers: no I/O, no printing, no plotting. Undefined results
are None (scalars handed to callers) or NaN (values bound for a DataFrame column), never 0.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.special
import scipy.stats

ArrayLike = Sequence[float] | np.ndarray
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


def mean(values: ArrayLike) -> float:
    arr = _clean(values)
    return float(arr.mean()) if arr.size else math.nan


def coefficient_of_variation(values: ArrayLike) -> float:
    """cv = sample std (ddof=1) / mean; NaN with fewer than 2 values or a zero mean."""
    arr = _clean(values)
    if arr.size < 2 or arr.mean() == 0:
        return math.nan
    return float(arr.std(ddof=1) / arr.mean())


# ---------------------------------------------------------------------------------------------------
# t intervals over independent units (launches or repeats). Their coverage is checked by simulation in
# benchmarks/interval_coverage.py; docs/metrics.md holds the table. Every figure the report prints with
# an interval is positive, so each of those intervals is taken on the log scale (positive_mean_ci,
# ratio_ci, ratio_estimator_ci); mean_ci, on the natural scale, serves the adaptive stopping rule.


@dataclass(frozen=True)
class TInterval:
    """A two-sided Student-t interval and the degrees of freedom it used; all None when undefined."""

    low: float | None
    high: float | None
    df: float | None

    @property
    def bounds(self) -> Interval:
        return self.low, self.high


UNDEFINED_T = TInterval(None, None, None)
# An extra variance component: (variance, its degrees of freedom), e.g. a calibrated between-launch variance.
Component = tuple[float, float]


def satterthwaite_df(components: Sequence[Component]) -> float | None:
    """Welch-Satterthwaite degrees of freedom of a sum of independent variance estimates v_i with df_i:
    df = (sum v_i)^2 / sum(v_i^2 / df_i). A component whose df is not positive and finite counts as
    known exactly: it adds variance but no term to the denominator (none left: df = inf). None when the
    total variance is not positive."""
    total = sum(v for v, _ in components)
    if not total > 0:
        return None
    denom = sum(v * v / d for v, d in components if v > 0 and d > 0 and math.isfinite(d))
    return math.inf if denom == 0 else total * total / denom


def _t_bounds(center: float, variance: float, df: float | None, confidence: float,
              log: bool = False) -> TInterval:
    """center +- t_{df} sqrt(variance) (on the log scale, then exponentiated, when `log`)."""
    if df is None or not (variance >= 0 and math.isfinite(variance) and math.isfinite(center)):
        return UNDEFINED_T
    half = float(scipy.special.stdtrit(df, 0.5 + confidence / 2)) * math.sqrt(variance)  # = t.ppf, faster
    lo, hi = center - half, center + half
    if not log:
        return TInterval(lo, hi, df)
    # a spread so wide that exp overflows (a near-zero unit next to normal ones) bounds nothing above
    return TInterval(math.exp(lo), math.exp(hi) if hi < _MAX_EXP else math.inf, df)


_MAX_EXP = math.log(sys.float_info.max)


def log_components_ci(log_center: float, components: Sequence[Component], confidence: float = 0.95) -> TInterval:
    """exp(log_center +- t_df sqrt(sum v_i)) from independent variance components (v_i, df_i) of a log
    estimate, df by Welch-Satterthwaite (`satterthwaite_df`); all None without a positive variance."""
    variance = sum(v for v, _ in components)
    return _t_bounds(log_center, variance, satterthwaite_df(components), confidence, log=True)


def _units(values: ArrayLike, min_units: int) -> np.ndarray | None:
    arr = _clean(values)
    return arr if arr.size >= min_units else None


def mean_ci(values: ArrayLike, confidence: float = 0.95, *, point: float | None = None,
            extra: Sequence[Component] = (), min_units: int = 2) -> TInterval:
    """Student-t interval of a mean over independent units: point +- t_{n-1} s / sqrt(n).

    `point` (default: the units' mean) lets a pooled estimate (e.g. a median over all requests) be
    centred while the units' spread sets the width. `extra` adds variance components of the mean (for
    example a calibrated between-launch variance) with their df; the df then follow Welch-Satterthwaite.
    Fewer than `min_units` finite units -> all None.
    """
    arr = _units(values, min_units)
    if arr is None:
        return UNDEFINED_T
    n = arr.size
    comps = [(float(arr.var(ddof=1)) / n, float(n - 1)), *extra]
    center = float(arr.mean()) if point is None else float(point)
    variance = sum(v for v, _ in comps)
    df = satterthwaite_df(comps) if variance > 0 else float(n - 1)
    return _t_bounds(center, variance, df, confidence)


def _log_component(arr: np.ndarray, center: float) -> Component:
    """Variance of the log of a mean over the units `arr` (delta method: var(log m) = var(m) / m^2, with
    var(m) = s^2 / n), taken at `center`, and its n - 1 df. `center` must be positive."""
    return float(arr.var(ddof=1)) / (arr.size * center * center), float(arr.size - 1)


def positive_mean_ci(values: ArrayLike, confidence: float = 0.95, *, point: float | None = None,
                     extra_log: Sequence[Component] = (), min_units: int = 2) -> TInterval:
    """Student-t interval of a positive mean over independent units, on the log scale, so it stays
    positive (throughput, speed, TPOT):

        log m +- t_df sqrt(s^2 / (n m^2) + extra),   bounds m exp(+-t_df sqrt(...)),

    m = `point` (default: the units' mean; a pooled estimate, e.g. a median over all requests, is centred
    while the units' spread sets the width). `extra_log` adds variance components of log m (a calibrated
    between-launch variance, CV^2) with their df; the df then follow Welch-Satterthwaite. Fewer than
    `min_units` finite units, or a centre that is not positive -> all None."""
    arr = _units(values, min_units)
    if arr is None:
        return UNDEFINED_T
    center = float(arr.mean()) if point is None else float(point)
    if not center > 0:
        return UNDEFINED_T
    comps = [_log_component(arr, center), *extra_log]
    variance = sum(v for v, _ in comps)
    df = satterthwaite_df(comps) if variance > 0 else float(arr.size - 1)
    return _t_bounds(math.log(center), variance, df, confidence, log=True)


def ratio_ci(numerator: ArrayLike, denominator: ArrayLike, confidence: float = 0.95, *,
             extra_log: Sequence[Component] = (), min_units: int = 2) -> TInterval:
    """Welch t interval of mean(numerator) / mean(denominator) for two INDEPENDENT samples of units.

    On the log scale (delta method): log R = log xbar - log ybar, with
        var(log R) = s_x^2 / (n_x xbar^2) + s_y^2 / (n_y ybar^2)   (+ `extra_log` components)
    and Welch-Satterthwaite df; the bounds are exp(log R +- t_df sqrt(var)). Nothing is paired: units of
    the two samples come from separate launches and share no drift. Fewer than `min_units` finite units
    on either side, or a non-positive mean -> all None.
    """
    x, y = _units(numerator, min_units), _units(denominator, min_units)
    if x is None or y is None:
        return UNDEFINED_T
    mx, my = float(x.mean()), float(y.mean())
    if not (mx > 0 and my > 0):
        return UNDEFINED_T
    comps = [_log_component(x, mx), _log_component(y, my), *extra_log]
    variance = sum(v for v, _ in comps)
    df = satterthwaite_df(comps) if variance > 0 else float(min(x.size, y.size) - 1)
    return _t_bounds(math.log(mx / my), variance, df, confidence, log=True)


def pooled_ratio_ci(numerator: ArrayLike, denominator: ArrayLike, prior: Component, confidence: float = 0.95,
                    ) -> TInterval:
    """Pooled-variance t interval of mean(numerator) / mean(denominator) for two independent samples of
    units that share one relative unit variance, known also from earlier runs (`prior` = (v_p, df_p), e.g.
    the variance history's launch-mean variance):
        v = (df_p v_p + (n_x - 1) v_x + (n_y - 1) v_y) / (df_p + n_x + n_y - 2),  v_x = s_x^2 / xbar^2
        var(log R) = v (1/n_x + 1/n_y),  df = df_p + n_x + n_y - 2
    so df add up across runs and t falls towards z. Fewer than 2 finite units on either side, a
    non-positive mean or a prior without df -> all None."""
    x, y = _units(numerator, 2), _units(denominator, 2)
    vp, dfp = prior
    if x is None or y is None or not (dfp > 0 and vp >= 0 and math.isfinite(vp)):
        return UNDEFINED_T
    mx, my = float(x.mean()), float(y.mean())
    if not (mx > 0 and my > 0):
        return UNDEFINED_T
    df = dfp + x.size + y.size - 2
    v = (dfp * vp + float(x.var(ddof=1)) / mx**2 * (x.size - 1) + float(y.var(ddof=1)) / my**2 * (y.size - 1)) / df
    return _t_bounds(math.log(mx / my), v * (1 / x.size + 1 / y.size), df, confidence, log=True)


def ratio_estimator_ci(numerator: ArrayLike, denominator: ArrayLike, confidence: float = 0.95, *,
                       min_units: int = 2) -> TInterval:
    """t interval of a positive pooled ratio R = sum(num) / sum(den) over n independent units (e.g. tokens
    and target steps per window: the acceptance length), on the log scale so it stays positive, with the
    linearised (ratio-estimator) variance
        var(R) = sum (num_i - R den_i)^2 / ((n - 1) n mean(den)^2),   var(log R) = var(R) / R^2
    and n - 1 df: bounds R exp(+-t_{n-1} sqrt(var(log R))). Units with a non-finite member are dropped;
    fewer than `min_units`, or R not positive -> all None."""
    x = np.asarray(numerator, dtype=float).ravel()
    y = np.asarray(denominator, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"ratio units differ in length: {x.size} vs {y.size}")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    n = x.size
    if n < min_units or not y.sum() > 0:
        return UNDEFINED_T
    r = float(x.sum() / y.sum())
    if not r > 0:
        return UNDEFINED_T
    variance = float(((x - r * y) ** 2).sum()) / ((n - 1) * n * float(y.mean()) ** 2)
    return _t_bounds(math.log(r), variance / (r * r), float(n - 1), confidence, log=True)


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
    mad = mad if mad > 0 else sys.float_info.epsilon
    z = MAD_TO_Z * (arr - med) / mad
    far = np.abs(arr - med) > min_rel_deviation * abs(med)
    return [int(i) for i in np.flatnonzero(finite & (np.abs(z) > threshold) & far)]

"""A cell against the baseline's cell of the same point: speedup, per-user speedup and TPOT speedup, with
their intervals (Welch t on the log ratio of the units, or the variance history's components where the
cells are too small to estimate their own)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specbench.decide import stats
from specbench.decide.decision import Components, Design, Estimate, component_interval
from specbench.decide.intervals import LaunchVariance, launch_components, unit_means
from specbench.metrics.common import NAN, interval_or_nan, safe_ratio
from specbench.metrics.requests import MeasuredRequest
from specbench.metrics.warnings import CellWarning


@dataclass
class MeasuredCell:
    """One cell while it is computed: its row so far, its measured requests, its units' figures."""

    row: dict[str, Any]
    reqs: list[MeasuredRequest]
    window_tp: dict[tuple[int, int], float] = field(default_factory=dict)  # (launch, repeat) -> throughput
    # (launch, repeat) -> whether the closed-loop window had a measured interval (metrics/steady.py)
    steady_windows: dict[tuple[int, int], bool] = field(default_factory=dict)
    in_flight: list[float] = field(default_factory=list)  # per window: its effective concurrency
    unit_per_user: list[float] = field(default_factory=list)  # per unit: mean per-user speed
    n_launches: int = 1
    reconciliation: list[CellWarning] = field(default_factory=list)  # from the window cross-checks
    cell_id: str = ""


Windows = Mapping[tuple[int, int], float]  # (launch, repeat) -> the window's throughput


def speedups(cell: MeasuredCell, base: MeasuredCell, calibration: LaunchVariance | None) -> dict[str, float]:
    """Speedups with Welch t intervals on the log ratio. Variant and baseline ran in different launches
    at different times, so nothing is paired: the two samples of units are independent."""
    row, brow = cell.row, base.row
    # speedup = output_throughput(variant) / output_throughput(baseline), same point_id
    out = _with_interval(safe_ratio(row["output_throughput_tok_s"], brow["output_throughput_tok_s"]),
                         cell.window_tp, base.window_tp, calibration)
    single = cell.n_launches < 2 or base.n_launches < 2
    extra = launch_components(calibration if single else None, n_variants=2)

    # per-user speedup = per_user_tok_s(variant) / per_user_tok_s(baseline); units as for speedup
    out["per_user_speedup"] = safe_ratio(row["per_user_tok_s"], brow["per_user_tok_s"])
    ci = stats.ratio_ci(cell.unit_per_user, base.unit_per_user, extra_log=extra)
    out["per_user_speedup_ci_low"], out["per_user_speedup_ci_high"] = interval_or_nan(ci.bounds)

    # TPOT speedup = TPOT p50(baseline) / TPOT p50(variant): a latency, so the ratio is inverted
    out["tpot_speedup"] = safe_ratio(brow["tpot_p50_s"], row["tpot_p50_s"])
    return out


def speedup_columns(windows: Windows, base_windows: Windows, calibration: LaunchVariance | None) -> dict[str, float]:
    """`speedup` and its interval (`speedup_ci_low/_high/_df`) of a cell from the two sides' window
    throughputs alone (the mean of each side's windows; simulations build cells with it)."""
    speedup = safe_ratio(stats.mean(list(windows.values())), stats.mean(list(base_windows.values())))
    return _with_interval(speedup, windows, base_windows, calibration)


def _with_interval(speedup: float, windows: Windows, base_windows: Windows,
                   calibration: LaunchVariance | None) -> dict[str, float]:
    out: dict[str, float] = {"speedup": speedup}
    if math.isfinite(speedup):
        ci = speedup_ci(windows, base_windows, calibration, speedup)
        out["speedup_ci_low"], out["speedup_ci_high"] = interval_or_nan(ci.bounds)
        out["speedup_ci_df"] = NAN if ci.df is None else ci.df
    return out


def _n_launches(windows: Windows) -> int:
    return len({la for la, _ in windows})


def speedup_ci(variant: Windows, base: Windows, calibration: LaunchVariance | None,
               speedup: float) -> stats.TInterval:
    """The 95% speedup interval of one point from the two cells' window throughputs (the rule of
    docs/metrics.md, "Intervals"): launch means pooled with the history's launch-mean variance when both
    sides ran 2+ launches and the history has both components (launch+history), else Welch over units
    with the calibrated launch variance added when either side ran once, else, too few units, the
    history's components alone (history). `speedup` is the point estimate (ratio of the cells' means).
    benchmarks/decision_cost.py and benchmarks/interval_coverage.py simulate this very function."""
    single = _n_launches(variant) < 2 or _n_launches(base) < 2
    extra = launch_components(calibration if single else None, n_variants=2)
    prior = None if single else _history_prior(variant, calibration)
    if prior is not None:  # launches measured here and in the history: one pooled launch-mean variance
        ci = stats.pooled_ratio_ci(unit_means(dict(variant)), unit_means(dict(base)), prior)
    else:
        ci = stats.ratio_ci(unit_means(dict(variant)), unit_means(dict(base)), extra_log=extra)
    if ci.df is None and single and math.isfinite(speedup):  # too few units: the history's components
        ci = _component_ci(speedup, variant, base, calibration)
    return ci


def _history_prior(windows: Windows, cal: LaunchVariance | None) -> stats.Component | None:
    """The history's variance of one launch mean of this cell, s_L^2 + s_R^2 / r (r = its windows per
    launch), with the launch component's df; None without both components."""
    if cal is None or not (cal.df > 0 and cal.repeat_df > 0 and math.isfinite(cal.repeat_rel_var)
                           and cal.rel_var >= 0):
        return None
    r = max(1, len(windows) // max(1, _n_launches(windows)))
    return cal.rel_var + cal.repeat_rel_var / r, cal.df


def _component_ci(speedup: float, variant: Windows, base: Windows, cal: LaunchVariance | None) -> stats.TInterval:
    """The speedup interval of cells too small to estimate their own variance (one launch, one repeat),
    from the history's pooled launch and repeat components (decision.component_interval)."""
    if cal is None or not (cal.repeat_df > 0 and math.isfinite(cal.repeat_rel_var) and cal.rel_var >= 0):
        return stats.UNDEFINED_T
    comps = Components(Estimate(cal.rel_var, cal.df), Estimate(cal.repeat_rel_var, cal.repeat_df))
    lo, hi, df = component_interval(speedup, comps, Design(_n_launches(variant), max(1, len(variant))),
                                    Design(_n_launches(base), max(1, len(base))))
    return stats.TInterval(lo, hi, df) if math.isfinite(lo) else stats.UNDEFINED_T

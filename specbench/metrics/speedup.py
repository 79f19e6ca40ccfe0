"""A cell against the baseline's cell of the same point: speedup, per-user speedup and TPOT speedup, with
their intervals (Welch t on the log ratio of the units, or the variance history's components where the
cells are too small to estimate their own)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .. import stats
from .common import NAN, interval_or_nan, safe_ratio
from .decision import Components, Design, Estimate, component_interval
from .intervals import LaunchVariance, launch_components, unit_means
from .requests import MeasuredRequest
from .warnings import CellWarning


@dataclass
class MeasuredCell:
    """One cell while it is computed: its row so far, its measured requests, its units' figures."""

    row: dict[str, Any]
    reqs: list[MeasuredRequest]
    window_tp: dict[tuple[int, int], float] = field(default_factory=dict)  # (launch, repeat) -> throughput
    unit_per_user: list[float] = field(default_factory=list)  # per unit: mean per-user speed
    n_launches: int = 1
    reconciliation: list[CellWarning] = field(default_factory=list)  # from the window cross-checks
    cell_id: str = ""


def speedups(cell: MeasuredCell, base: MeasuredCell, calibration: LaunchVariance | None) -> dict[str, float]:
    """Speedups with Welch t intervals on the log ratio. Variant and baseline ran in different launches
    at different times, so nothing is paired: the two samples of units are independent."""
    row, brow = cell.row, base.row
    out: dict[str, float] = {}
    single = cell.n_launches < 2 or base.n_launches < 2
    extra = launch_components(calibration if single else None, n_variants=2)
    # speedup = output_throughput(variant) / output_throughput(baseline), same point_id
    out["speedup"] = safe_ratio(row["output_throughput_tok_s"], brow["output_throughput_tok_s"])
    prior = None if single else _history_prior(cell, calibration)
    if prior is not None:  # launches measured here and in the history: one pooled launch-mean variance
        ci = stats.pooled_ratio_ci(unit_means(cell.window_tp), unit_means(base.window_tp), prior)
    else:
        ci = stats.ratio_ci(unit_means(cell.window_tp), unit_means(base.window_tp), extra_log=extra)
    if ci.df is None and single and math.isfinite(out["speedup"]):  # too few units: the history's components
        ci = _component_ci(out["speedup"], cell, base, calibration)
    if math.isfinite(out["speedup"]):
        out["speedup_ci_low"], out["speedup_ci_high"] = interval_or_nan(ci.bounds)
        out["speedup_ci_df"] = NAN if ci.df is None else ci.df

    # per-user speedup = per_user_tok_s(variant) / per_user_tok_s(baseline); units as for speedup
    out["per_user_speedup"] = safe_ratio(row["per_user_tok_s"], brow["per_user_tok_s"])
    ci = stats.ratio_ci(cell.unit_per_user, base.unit_per_user, extra_log=extra)
    out["per_user_speedup_ci_low"], out["per_user_speedup_ci_high"] = interval_or_nan(ci.bounds)

    # TPOT speedup = TPOT p50(baseline) / TPOT p50(variant): a latency, so the ratio is inverted
    out["tpot_speedup"] = safe_ratio(brow["tpot_p50_s"], row["tpot_p50_s"])
    return out


def _history_prior(cell: MeasuredCell, cal: LaunchVariance | None) -> stats.Component | None:
    """The history's variance of one launch mean of this cell, s_L^2 + s_R^2 / r (r = its windows per
    launch), with the launch component's df; None without both components."""
    if cal is None or not (cal.df > 0 and cal.repeat_df > 0 and math.isfinite(cal.repeat_rel_var)
                           and cal.rel_var >= 0):
        return None
    r = max(1, len(cell.window_tp) // max(1, cell.n_launches))
    return cal.rel_var + cal.repeat_rel_var / r, cal.df


def _component_ci(speedup: float, cell: MeasuredCell, base: MeasuredCell,
                  cal: LaunchVariance | None) -> stats.TInterval:
    """The speedup interval of cells too small to estimate their own variance (one launch, one repeat),
    from the history's pooled launch and repeat components (decision.component_interval)."""
    if cal is None or not (cal.repeat_df > 0 and math.isfinite(cal.repeat_rel_var) and cal.rel_var >= 0):
        return stats.UNDEFINED_T
    comps = Components(Estimate(cal.rel_var, cal.df), Estimate(cal.repeat_rel_var, cal.repeat_df))
    lo, hi, df = component_interval(speedup, comps, Design(cell.n_launches, max(1, len(cell.window_tp))),
                                    Design(base.n_launches, max(1, len(base.window_tp))))
    return stats.TInterval(lo, hi, df) if math.isfinite(lo) else stats.UNDEFINED_T

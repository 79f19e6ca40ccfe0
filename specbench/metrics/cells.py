"""The cells table: one row per variant x sweep point. compute_cells groups the measured requests
into cells, summarises each (throughput, per-user speed, latency percentiles, acceptance), compares
it with the baseline's cell of the same point (speedups, losslessness) and attaches its warnings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import stats
from .acceptance import _acceptance
from .common import MIN_REPEATS_FOR_INTERVAL, NAN, BootstrapSettings, _bs, _ci, _key_nan, _safe_ratio
from .lossless import _lossless
from .reconcile import acceptance_checks, cell_reconciliation, reconciliation_warnings, timing_checks
from .requests import _Req, _to_reqs, measured_requests, request_itls, request_tpot, window_throughput_arrays
from .warnings import CellWarning, cell_warnings, encode_warnings

KEY_COLUMNS = ["variant", "category", "input_len", "output_len", "concurrency", "temperature", "point_id"]
CELL_COLUMNS = KEY_COLUMNS + [
    "is_baseline",
    "n_requests",
    "n_errors",
    "error_rate",
    "valid",
    "repeats",
    "output_throughput_tok_s",
    "output_throughput_ci_low",
    "output_throughput_ci_high",
    "per_user_tok_s",
    "per_user_tok_s_ci_low",
    "per_user_tok_s_ci_high",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p50_s_ci_low",
    "tpot_p50_s_ci_high",
    "tpot_p90_s",
    "itl_p50_s",
    "e2e_p50_s",
    "acceptance_length",
    "acceptance_length_ci_low",
    "acceptance_length_ci_high",
    "draft_acceptance_length",
    "acceptance_rate",
    "acceptance_per_position",
    "acceptance_source",
    "acceptance_length_request_mean",
    "acceptance_length_request_p10",
    "acceptance_length_request_p90",
    "acceptance_windows_checked",
    "acceptance_windows_mismatched",
    "client_ttft_mean_s",
    "server_ttft_mean_s",
    "client_e2e_mean_s",
    "server_e2e_mean_s",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "per_user_speedup",
    "per_user_speedup_ci_low",
    "per_user_speedup_ci_high",
    "tpot_speedup",
    "lossless_match_rate",
    "lossless_any_match_rate",
    "lossless_prefix_mean",
    "outlier_count",
    "throughput_cv",
    "warnings",
]
# An invalid cell (error rate above max_error_rate, or nothing succeeded) has no throughput or speedup.
INVALID_BLANKED = [
    "output_throughput_tok_s",
    "output_throughput_ci_low",
    "output_throughput_ci_high",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "per_user_speedup",
    "per_user_speedup_ci_low",
    "per_user_speedup_ci_high",
    "tpot_speedup",
]


@dataclass
class _Cell:
    row: dict[str, Any]
    reqs: list[_Req]
    window_tp: dict[int, float] = field(default_factory=dict)  # repeat -> window throughput
    reconciliation: list[CellWarning] = field(default_factory=list)  # from the window cross-checks


def _summarize_cell(
    key: dict[str, Any],
    reqs: list[_Req],
    windows: pd.DataFrame,
    *,
    is_baseline: bool,
    max_error_rate: float,
    bs: BootstrapSettings,
) -> _Cell:
    row: dict[str, Any] = {c: NAN for c in CELL_COLUMNS}
    row.update(key)
    ok = [r for r in reqs if r.ok]
    n, n_err = len(reqs), len(reqs) - len(ok)
    error_rate = n_err / n if n else NAN
    valid = bool(ok) and error_rate <= max_error_rate
    repeats = sorted({r.repeat for r in reqs})
    row.update(
        is_baseline=is_baseline,
        n_requests=n,
        n_errors=n_err,
        error_rate=error_rate,
        valid=valid,
        repeats=len(repeats),
        acceptance_per_position=None,
        acceptance_source="none",
        outlier_count=0,
        warnings="",
    )
    cell = _Cell(row=row, reqs=reqs)

    for rep in repeats:
        rs = [r for r in reqs if r.repeat == rep]
        cell.window_tp[rep] = window_throughput_arrays(
            np.array([r.t_send for r in rs]),
            np.array([r.e2e for r in rs]),
            np.array([r.n_out for r in rs]),
            np.array([r.ok for r in rs]),
        )
    wt = [cell.window_tp[rep] for rep in repeats]
    row["throughput_cv"] = stats.coefficient_of_variation(wt)
    if valid:
        # cell throughput = mean over repeats of the window throughput
        row["output_throughput_tok_s"] = stats.mean(wt)
        if sum(math.isfinite(x) for x in wt) >= MIN_REPEATS_FOR_INTERVAL:
            lo, hi = _ci(stats.bootstrap_ci(wt, np.mean, **_bs(bs)))
            row["output_throughput_ci_low"], row["output_throughput_ci_high"] = lo, hi

    per_user = [r.per_user for r in ok]
    row["per_user_tok_s"] = stats.mean(per_user)  # mean over requests of n_out / e2e
    row["per_user_tok_s_ci_low"], row["per_user_tok_s_ci_high"] = _ci(stats.bootstrap_ci(per_user, np.mean, **_bs(bs)))
    row["outlier_count"] = len(stats.mad_outliers(per_user))

    ttft = [r.ttft for r in ok]
    row["ttft_p50_s"], row["ttft_p90_s"], row["ttft_p99_s"] = (stats.percentile(ttft, q) for q in (50, 90, 99))
    tpot = [request_tpot(r.e2e, r.ttft, r.n_out) for r in ok]
    row["tpot_p50_s"] = stats.percentile(tpot, 50)
    row["tpot_p90_s"] = stats.percentile(tpot, 90)
    row["tpot_p50_s_ci_low"], row["tpot_p50_s_ci_high"] = _ci(stats.bootstrap_ci(tpot, np.median, **_bs(bs)))
    itl = [g for r in ok for g in request_itls(r.chunk_offsets, r.chunk_tokens)]
    row["itl_p50_s"] = stats.percentile(itl, 50)
    row["e2e_p50_s"] = stats.percentile([r.e2e for r in ok], 50)

    row.update(_acceptance(reqs, windows, is_baseline, bs))
    acc, timing = acceptance_checks(reqs, windows), timing_checks(reqs, windows)
    row.update(cell_reconciliation(acc, timing))
    cell.reconciliation = reconciliation_warnings(acc, timing)
    return cell


# ---------------------------------------------------------------------------------------------------
# Comparisons against the baseline


def _speedups(cell: _Cell, base: _Cell, bs: BootstrapSettings) -> dict[str, float]:
    row, brow = cell.row, base.row
    out: dict[str, float] = {}
    # speedup = output_throughput(variant) / output_throughput(baseline), same point_id
    out["speedup"] = _safe_ratio(row["output_throughput_tok_s"], brow["output_throughput_tok_s"])
    reps = [
        r for r in sorted(cell.window_tp)
        if r in base.window_tp and math.isfinite(cell.window_tp[r]) and math.isfinite(base.window_tp[r])
    ]
    lo = hi = NAN
    if len(reps) >= MIN_REPEATS_FOR_INTERVAL and math.isfinite(out["speedup"]):
        lo, hi = _ci(
            stats.paired_ratio_ci([cell.window_tp[r] for r in reps], [base.window_tp[r] for r in reps], **_bs(bs))
        )
    out["speedup_ci_low"], out["speedup_ci_high"] = lo, hi

    # per-user speedup = per_user_tok_s(variant) / per_user_tok_s(baseline); interval paired by (repeat, index)
    out["per_user_speedup"] = _safe_ratio(row["per_user_tok_s"], brow["per_user_tok_s"])
    bmap = {(r.repeat, r.index): r.per_user for r in base.reqs if r.ok}
    pairs = [(r.per_user, bmap[(r.repeat, r.index)]) for r in cell.reqs if r.ok and (r.repeat, r.index) in bmap]
    lo, hi = _ci(stats.paired_ratio_ci([p[0] for p in pairs], [p[1] for p in pairs], **_bs(bs)))
    out["per_user_speedup_ci_low"], out["per_user_speedup_ci_high"] = lo, hi

    # TPOT speedup = TPOT p50(baseline) / TPOT p50(variant): a latency, so the ratio is inverted
    out["tpot_speedup"] = _safe_ratio(brow["tpot_p50_s"], row["tpot_p50_s"])
    return out


def compute_cells(
    requests: pd.DataFrame,
    windows: pd.DataFrame,
    baseline: str,
    *,
    max_error_rate: float = 0.0,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per variant x sweep point with the columns in CELL_COLUMNS (see docs/metrics.md)."""
    bs = BootstrapSettings(n_resamples=n_resamples, confidence=confidence, seed=seed)
    req = measured_requests(requests, windows)
    if req.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)

    cells: list[_Cell] = []
    for cell_id, df in req.groupby("cell_id", sort=True):
        first = df.iloc[0]
        key = {c: (_key_nan(first[c]) if c in first else None) for c in KEY_COLUMNS}
        win = windows[windows["window_id"].isin(set(df["window_id"]))]
        cells.append(
            _summarize_cell(
                key,
                _to_reqs(df),
                win,
                is_baseline=key["variant"] == baseline,
                max_error_rate=max_error_rate,
                bs=bs,
            )
        )

    base_cells = {c.row["point_id"]: c for c in cells if c.row["is_baseline"]}
    base_by_prompt: dict[tuple[Any, ...], list[_Req]] = {}
    for c in sorted(base_cells.values(), key=lambda c: c.row["concurrency"]):
        if c.row["temperature"] == 0:
            for r in c.reqs:
                if r.ok:
                    same = (r.prompt_id, _key_nan(c.row["input_len"]), c.row["output_len"])
                    base_by_prompt.setdefault(same, []).append(r)

    for c in cells:
        row = c.row
        base = base_cells.get(row["point_id"])
        has_base = base is not None and bool(base.row["valid"])
        if row["is_baseline"]:
            row.update(speedup=1.0, per_user_speedup=1.0, tpot_speedup=1.0)  # the baseline against itself
        elif has_base and row["valid"]:
            row.update(_speedups(c, base, bs))  # type: ignore[arg-type]
        if not row["is_baseline"] and row["temperature"] == 0:
            (row["lossless_match_rate"], row["lossless_any_match_rate"],
             row["lossless_prefix_mean"]) = _lossless(
                 c.reqs, (_key_nan(c.row["input_len"]), c.row["output_len"]), base.reqs if base else None,
                 base_by_prompt)
        if not row["valid"]:
            for col in INVALID_BLANKED:
                row[col] = NAN
        ws = cell_warnings(
            is_baseline=row["is_baseline"],
            valid=row["valid"],
            repeats=row["repeats"],
            window_throughputs=[c.window_tp[k] for k in sorted(c.window_tp)],
            n_requests=row["n_requests"],
            n_errors=row["n_errors"],
            outlier_count=row["outlier_count"],
            throughput_cv=row["throughput_cv"],
            acceptance_length=row["acceptance_length"],
            acceptance_source=row["acceptance_source"],
            lossless_match_rate=row["lossless_match_rate"],
            lossless_any_match_rate=row["lossless_any_match_rate"],
            concurrency=row["concurrency"],
            has_baseline=has_base,
        ) + c.reconciliation
        row["warnings"] = encode_warnings(ws)

    out = pd.DataFrame([c.row for c in cells], columns=CELL_COLUMNS)
    return out.sort_values(["variant", "category", "output_len", "temperature", "concurrency"], kind="stable").reset_index(
        drop=True
    )

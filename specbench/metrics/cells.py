"""The cells table: one row per variant x sweep point. compute_cells groups the measured requests
into cells, summarises each (throughput, per-user speed, latency percentiles, acceptance), compares
it with the baseline's cell of the same point (speedups, losslessness) and attaches its warnings."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .. import stats
from . import gates
from .acceptance import cell_acceptance
from .decision import Components, Design, Estimate, component_interval
from .common import NAN, interval_or_nan, key_nan, safe_ratio
from .intervals import LaunchVariance, group_units, launch_components, unit_key, unit_means, variance_levels
from .lossless import cell_lossless, output_digest
from .reconcile import acceptance_checks, cell_reconciliation, reconciliation_warnings, timing_checks
from .requests import MeasuredRequest, request_itls_array, request_tpot, to_measured_requests, window_throughput_arrays
from .source import OUTPUT_COLUMNS, SUMMARY_COLUMNS, CellSource, FrameSource
from .warnings import CellSummary, CellWarning, cell_warnings, encode_warnings

# rate: an open-loop point's offered requests/s (NaN in a closed loop, whose load is `concurrency`)
KEY_COLUMNS = ["variant", "category", "input_len", "output_len", "concurrency", "temperature", "rate", "point_id"]
CELL_COLUMNS = KEY_COLUMNS + [
    "is_baseline",
    "n_requests",
    "n_errors",
    "error_rate",
    "valid",
    "repeats",
    "launches",
    "interval_unit",
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
    "full_accept_fraction",
    "acceptance_unknown_windows",
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
    "speedup_ci_df",
    "per_user_speedup",
    "per_user_speedup_ci_low",
    "per_user_speedup_ci_high",
    "tpot_speedup",
    "lossless_match_rate",
    "lossless_any_match_rate",
    "lossless_prefix_mean",
    "outlier_count",
    "throughput_cv",
    "launch_cv",
    "repeat_cv",
    "request_cv",
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
    "speedup_ci_df",
    "per_user_speedup",
    "per_user_speedup_ci_low",
    "per_user_speedup_ci_high",
    "tpot_speedup",
]


@dataclass(frozen=True)
class CellOptions:
    """How compute_cells reads the records of a run.

    `baseline`: the variant the others are compared with. `max_error_rate`: above it a cell is invalid.
    `calibration`: a between-launch variance measured earlier on this hardware, added to the intervals of
    cells whose variant ran in a single launch. `run_gates`: per variant, gate warnings found outside the
    records (e.g. eager launch flags); they are attached to every cell of that variant. `plain`: variants
    that decode without drafting besides the baseline (an A/A check's second name): acceptance 1.0 by
    definition, and no acceptance gate applies to them."""

    baseline: str
    max_error_rate: float = 0.0
    calibration: LaunchVariance | None = None
    run_gates: Mapping[str, list[CellWarning]] = field(default_factory=dict)
    plain: frozenset[str] = frozenset()


@dataclass
class _Cell:
    row: dict[str, Any]
    reqs: list[MeasuredRequest]
    window_tp: dict[tuple[int, int], float] = field(default_factory=dict)  # (launch, repeat) -> throughput
    unit_per_user: list[float] = field(default_factory=list)  # per unit: mean per-user speed
    n_launches: int = 1
    reconciliation: list[CellWarning] = field(default_factory=list)  # from the window cross-checks
    cell_id: str = ""


def _summarize_cell(key: dict[str, Any], reqs: list[MeasuredRequest], windows: pd.DataFrame,
                    opts: CellOptions) -> _Cell:
    """One cell's row (all but the comparisons with the baseline) from its requests and windows."""
    is_baseline = key["variant"] == opts.baseline
    is_plain = is_baseline or key["variant"] in opts.plain
    calibration = opts.calibration
    row: dict[str, Any] = {c: NAN for c in CELL_COLUMNS}
    row.update(key)
    ok = [r for r in reqs if r.ok]
    n, n_err = len(reqs), len(reqs) - len(ok)
    error_rate = n_err / n  # a cell is a group of at least one request
    valid = bool(ok) and error_rate <= opts.max_error_rate
    windows_seen = sorted({(r.launch, r.repeat) for r in reqs})
    n_launches = len({la for la, _ in windows_seen})
    row.update(
        is_baseline=is_baseline,
        n_requests=n,
        n_errors=n_err,
        error_rate=error_rate,
        valid=valid,
        repeats=len(windows_seen),
        launches=n_launches,
        interval_unit=_interval_unit(n_launches, calibration),
    )
    cell = _Cell(row=row, reqs=reqs, n_launches=n_launches)
    extra = calibration if n_launches < 2 else None  # measured launches need no calibration

    for w in windows_seen:
        rs = [r for r in reqs if (r.launch, r.repeat) == w]
        cell.window_tp[w] = window_throughput_arrays(
            np.array([r.t_send for r in rs]),
            np.array([r.e2e for r in rs]),
            np.array([r.n_out for r in rs]),
            np.array([r.ok for r in rs]),
        )
    wt = [cell.window_tp[w] for w in windows_seen]
    row["throughput_cv"] = stats.coefficient_of_variation(wt)
    row.update(variance_levels(cell.window_tp, [[r.per_user for r in reqs if r.ok and (r.launch, r.repeat) == w]
                                                for w in windows_seen]))
    if n_launches < 2 and calibration is not None:
        row["launch_cv"] = math.sqrt(calibration.rel_var)  # not measured here: the calibration's figure
    if valid:
        # cell throughput = mean over windows of the window throughput
        row["output_throughput_tok_s"] = m = stats.mean(wt)
        ci = stats.positive_mean_ci(unit_means(cell.window_tp), point=m, extra_log=launch_components(extra))
        row["output_throughput_ci_low"], row["output_throughput_ci_high"] = interval_or_nan(ci.bounds)

    by_unit = group_units(ok, lambda r: unit_key(r.launch, r.repeat, n_launches))
    per_user = [r.per_user for r in ok]
    row["per_user_tok_s"] = m = stats.mean(per_user)  # mean over requests of n_out / e2e
    cell.unit_per_user = [stats.mean([r.per_user for r in u]) for u in by_unit]
    ci = stats.positive_mean_ci(cell.unit_per_user, point=m, extra_log=launch_components(extra))
    row["per_user_tok_s_ci_low"], row["per_user_tok_s_ci_high"] = interval_or_nan(ci.bounds)
    row["outlier_count"] = len(stats.mad_outliers(per_user))

    ttft = [r.ttft for r in ok]
    row["ttft_p50_s"], row["ttft_p90_s"], row["ttft_p99_s"] = (stats.percentile(ttft, q) for q in (50, 90, 99))
    tpot = [request_tpot(r.e2e, r.ttft, r.n_out) for r in ok]
    row["tpot_p50_s"] = m = stats.percentile(tpot, 50)
    row["tpot_p90_s"] = stats.percentile(tpot, 90)
    unit_tpot = [stats.percentile([request_tpot(r.e2e, r.ttft, r.n_out) for r in u], 50) for u in by_unit]
    ci = stats.positive_mean_ci(unit_tpot, point=m, extra_log=launch_components(extra))
    row["tpot_p50_s_ci_low"], row["tpot_p50_s_ci_high"] = interval_or_nan(ci.bounds)
    itl = np.concatenate([np.empty(0)] + [request_itls_array(r.chunk_offsets, r.chunk_tokens) for r in ok])
    row["itl_p50_s"] = stats.percentile(itl, 50)
    row["e2e_p50_s"] = stats.percentile([r.e2e for r in ok], 50)

    row.update(cell_acceptance(reqs, windows, is_plain, n_launches))
    acc, timing = acceptance_checks(reqs, windows), timing_checks(reqs, windows)
    row.update(cell_reconciliation(acc, timing))
    cell.reconciliation = reconciliation_warnings(acc, timing)
    return cell


def _interval_unit(n_launches: int, calibration: LaunchVariance | None) -> str:
    """What the cell's intervals treat as independent: launches, or repeats (plus a calibrated launch
    variance when one applies)."""
    if n_launches >= 2:
        return "launch+history" if calibration is not None and calibration.df > 0 and calibration.repeat_df > 0 \
            else "launch"
    return "repeat+calibration" if calibration is not None else "repeat"


def _mark_history_intervals(row: dict[str, Any]) -> None:
    """A speedup interval from the history's components alone (a single window per side)."""
    if row["interval_unit"] == "repeat+calibration" and row["repeats"] == 1 and math.isfinite(row["speedup_ci_low"]):
        row["interval_unit"] = "history"


# ---------------------------------------------------------------------------------------------------
# Comparisons against the baseline


def _speedups(cell: _Cell, base: _Cell, calibration: LaunchVariance | None) -> dict[str, float]:
    """Speedups with Welch t intervals on the log ratio. Variant and baseline ran in different launches
    at different times, so nothing is paired: the two samples of units are independent."""
    row, brow = cell.row, base.row
    out: dict[str, float] = {}
    single = cell.n_launches < 2 or base.n_launches < 2
    extra = launch_components(calibration if single else None, n_variants=2)
    # speedup = output_throughput(variant) / output_throughput(baseline), same point_id
    out["speedup"] = safe_ratio(row["output_throughput_tok_s"], brow["output_throughput_tok_s"])
    ci = speedup_ci(cell.window_tp, base.window_tp, calibration, out["speedup"])
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


Windows = Mapping[tuple[int, int], float]  # (launch, repeat) -> the window's throughput


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
        ci = stats.pooled_ratio_ci(unit_means(variant), unit_means(base), prior)
    else:
        ci = stats.ratio_ci(unit_means(variant), unit_means(base), extra_log=extra)
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


def _variant_gates(cells: list[_Cell], windows: pd.DataFrame, opts: CellOptions) -> dict[str, list[CellWarning]]:
    """Gate warnings that concern a whole variant: drafter inactive, GPU drift, and those given."""
    out: dict[str, list[CellWarning]] = {v: list(ws) for v, ws in opts.run_gates.items()}
    by_variant: dict[str, list[tuple[float, float]]] = {}
    for c in cells:
        if c.row["variant"] not in opts.plain and not c.row["is_baseline"] and c.row["acceptance_source"] != "none":
            tokens = float(sum(r.n_out for r in c.reqs if r.ok and math.isfinite(r.n_out)))
            by_variant.setdefault(c.row["variant"], []).append((tokens, c.row["acceptance_length"]))
    for variant, pairs in by_variant.items():
        if (w := gates.drafter_inactive(pairs)) is not None:
            out.setdefault(variant, []).append(w)
    for variant, w in gates.gpu_drift(windows, opts.baseline).items():
        out.setdefault(variant, []).append(w)
    return out


def _lengths(c: _Cell) -> tuple[Any, Any]:
    return key_nan(c.row["input_len"]), c.row["output_len"]


def _lossless(cells: list[_Cell], source: CellSource) -> dict[str, tuple[float, float, float]]:
    """Lossless rates of every drafter cell at temperature 0, one category and length group at a time. In
    memory at once: the drafter cell's outputs, its baseline cell's, and the first baseline output of each
    prompt of the group (the rest of the group's baseline outputs only as digests, for the any-match)."""
    out: dict[str, tuple[float, float, float]] = {}
    # a prompt belongs to one category (prompts.py), so a category's drafter cells need only that category's
    # baseline outputs; if some prompt id shows up in two categories, the whole length group is read at once
    categories: dict[str, set[Any]] = {}
    for c in cells:
        if c.row["is_baseline"]:
            categories.setdefault(c.row["category"], set()).update(r.prompt_id for r in c.reqs)
    by_category = sum(map(len, categories.values())) == len(set().union(*categories.values()))

    def group_key(c: _Cell) -> tuple[Any, ...]:
        return (*_lengths(c), c.row["category"] if by_category else None)

    groups: dict[tuple[Any, ...], list[_Cell]] = {}
    for c in cells:
        if not c.row["is_baseline"] and c.row["temperature"] == 0:
            groups.setdefault(group_key(c), []).append(c)
    for gkey, group in groups.items():
        lengths = gkey[:2]
        bases = sorted((c for c in cells if c.row["is_baseline"] and c.row["temperature"] == 0
                        and group_key(c) == gkey), key=lambda c: c.row["concurrency"])
        base_by_prompt: dict[tuple[Any, ...], list[MeasuredRequest]] = {}
        for c in bases:
            for r in to_measured_requests(source.cell_frame(c.cell_id, OUTPUT_COLUMNS)):
                if r.ok:
                    same = base_by_prompt.setdefault((r.prompt_id, *lengths), [])
                    if same:  # only the first of a prompt is compared whole; the others only for equality
                        r.digest, r.token_ids, r.text = output_digest(r.token_ids, r.text), None, None
                    same.append(r)
        base_cells = {c.row["point_id"]: c for c in bases}
        for c in group:
            reqs = to_measured_requests(source.cell_frame(c.cell_id, OUTPUT_COLUMNS))
            b = base_cells.get(c.row["point_id"])
            base = to_measured_requests(source.cell_frame(b.cell_id, OUTPUT_COLUMNS)) if b else None
            out[c.cell_id] = cell_lossless(reqs, lengths, base, base_by_prompt)
    return out


def compute_cells(requests: pd.DataFrame | CellSource, windows: pd.DataFrame, opts: CellOptions) -> pd.DataFrame:
    """One row per variant x sweep point with the columns in CELL_COLUMNS (see docs/metrics.md).

    `requests`: a records frame, or a CellSource (the columnar store) read one cell at a time: a cell's
    per-chunk lists are let go once it is summarised, and outputs are read only to compare them."""
    source = FrameSource(requests, windows) if isinstance(requests, pd.DataFrame) else requests
    cells: list[_Cell] = []
    for cell_id in source.cell_ids():
        df = source.cell_frame(cell_id, SUMMARY_COLUMNS)
        if df.empty:
            continue
        first = df.iloc[0]
        key = {c: (key_nan(first[c]) if c in first else None) for c in KEY_COLUMNS}
        win = windows[windows["window_id"].isin(set(df["window_id"]))]
        cell = _summarize_cell(key, to_measured_requests(df), win, opts)
        cell.cell_id = cell_id
        for r in cell.reqs:
            r.chunk_offsets = r.chunk_tokens = ()  # ITL is done; the rest reads scalars
        cells.append(cell)
    if not cells:
        return pd.DataFrame(columns=CELL_COLUMNS)

    base_cells = {c.row["point_id"]: c for c in cells if c.row["is_baseline"]}
    lossless = _lossless(cells, source)
    variant_gates = _variant_gates(cells, windows, opts)
    saturated = gates.client_saturated(windows)
    for c in cells:
        row = c.row
        base = base_cells.get(row["point_id"])
        has_base = base is not None and bool(base.row["valid"])
        if row["is_baseline"]:
            row.update(speedup=1.0, per_user_speedup=1.0, tpot_speedup=1.0)  # the baseline against itself
        elif has_base and row["valid"]:
            row.update(_speedups(c, base, opts.calibration))  # type: ignore[arg-type]
            _mark_history_intervals(row)
        if c.cell_id in lossless:
            row["lossless_match_rate"], row["lossless_any_match_rate"], row["lossless_prefix_mean"] = lossless[c.cell_id]
        if not row["valid"]:
            for col in INVALID_BLANKED:
                row[col] = NAN
        impossible = gates.impossible_acceptance(row)  # a gate, never a figure
        if impossible is not None:
            for col in gates.ACCEPTANCE_FIGURES:
                row[col] = NAN
        ws = cell_warnings(CellSummary(
            is_baseline=row["is_baseline"],
            valid=row["valid"],
            repeats=c.n_launches if c.n_launches >= 2 else row["repeats"],  # independent units
            # a slow first repeat is a warmup effect inside one launch: compare the first launch's windows
            window_throughputs=[c.window_tp[k] for k in sorted(c.window_tp) if k[0] == min(c.window_tp)[0]],
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
            full_accept_fraction=row["full_accept_fraction"],
            # only where that leaves the cell without acceptance (per-request data may still give it)
            unknown_acceptance_windows=(0 if row["variant"] in opts.plain or row["acceptance_source"] != "none"
                                        else int(row["acceptance_unknown_windows"] or 0)),
        )) + c.reconciliation + variant_gates.get(row["variant"], [])
        if impossible is not None:
            ws.append(impossible)
        if (sat := saturated.get(f"{row['variant']}|{row['point_id']}")) is not None:  # the cell_id
            ws.append(sat)
        row["warnings"] = encode_warnings(ws)

    out = pd.DataFrame([c.row for c in cells], columns=CELL_COLUMNS)
    # every key column but point_id (which they determine): no two cells tie
    return out.sort_values(["variant", "category", "input_len", "output_len", "temperature", "concurrency",
                            "rate"]).reset_index(
        drop=True)

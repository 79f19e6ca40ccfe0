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

from specbench.decide import stats
from specbench.decide.intervals import (
    LaunchVariance,
    group_units,
    launch_components,
    unit_key,
    unit_means,
    variance_levels,
)
from specbench.decide.sampling import SubsetSampling
from specbench.metrics import gates
from specbench.metrics.acceptance import cell_acceptance
from specbench.metrics.columns import CELL_COLUMNS, INVALID_BLANKED, KEY_COLUMNS
from specbench.metrics.common import NAN, interval_or_nan, key_nan
from specbench.metrics.engine_state import server_running_mean, state_warnings
from specbench.metrics.eos import past_eos_share
from specbench.metrics.lossless import drafter_losslessness
from specbench.metrics.mix import add_mix_columns
from specbench.metrics.reconcile import acceptance_checks, cell_reconciliation, reconciliation_warnings, timing_checks
from specbench.metrics.requests import (
    MeasuredRequest,
    request_itls_array,
    request_tpot,
    to_measured_requests,
    window_throughput_arrays,
)
from specbench.metrics.source import SUMMARY_COLUMNS, CellSource, FrameSource
from specbench.metrics.speedup import MeasuredCell, speedups
from specbench.metrics.steady import WindowRequests, concurrency_warning, steady_window
from specbench.metrics.warnings import CellSummary, CellWarning, cell_warnings, encode_warnings


# rate: an open-loop point's offered requests/s (NaN in a closed loop, whose load is `concurrency`)
@dataclass(frozen=True)
class CellOptions:
    """How compute_cells reads the records of a run.

    `baseline`: the variant the others are compared with. `max_error_rate`: above it a cell is invalid.
    `calibration`: a between-launch variance measured earlier on this hardware, added to the intervals of
    cells whose variant ran in a single launch. `run_gates`: per variant, gate warnings found outside the
    records (e.g. eager launch flags); they are attached to every cell of that variant. `plain`: variants
    that decode without drafting besides the baseline (an A/A check's second name): acceptance 1.0 by
    definition, and no acceptance gate applies to them. `forced`: variants whose acceptance the engine forces
    (`specbench surface`): their outputs are not the target's, so losslessness is not checked and no gate on
    the acceptance's value (inactive drafter, degenerate workload) applies."""

    baseline: str
    max_error_rate: float = 0.0
    calibration: LaunchVariance | None = None
    run_gates: Mapping[str, list[CellWarning]] = field(default_factory=dict)
    plain: frozenset[str] = frozenset()
    forced: frozenset[str] = frozenset()
    eos_ids: tuple[int, ...] = ()  # the model's EOS token ids (model.json): past_eos_share; () unknown
    stop_at_eos: bool = False  # sweep.stop_at_eos: losslessness compares the shorter output of a pair
    subset: SubsetSampling | None = None  # sweep.subset: its sampling variance in the mix intervals


def _summarize_cell(key: dict[str, Any], reqs: list[MeasuredRequest], windows: pd.DataFrame,
                    opts: CellOptions) -> MeasuredCell:
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
        interval_unit=interval_unit(n_launches, calibration),
    )
    cell = MeasuredCell(row=row, reqs=reqs, n_launches=n_launches)
    extra = calibration if n_launches < 2 else None  # measured launches need no calibration

    closed = key_nan(key.get("rate")) is None  # a closed loop: its windows' measured intervals
    steady: set[int] = set()  # id() of the requests whose latency figures count
    for w in windows_seen:
        rs = [r for r in reqs if (r.launch, r.repeat) == w]
        arrays = (np.array([r.t_send for r in rs]), np.array([r.e2e for r in rs]), np.array([r.ok for r in rs]))
        if not closed:
            cell.window_tp[w] = window_throughput_arrays(arrays[0], arrays[1], np.array([r.n_out for r in rs]),
                                                         arrays[2])
            steady.update(id(r) for r in rs)
            continue
        sw = steady_window(int(key["concurrency"]),
                           WindowRequests(*arrays, np.array([r.n_out for r in rs]), [r.chunk_offsets for r in rs],
                                          [r.chunk_tokens for r in rs]))
        cell.window_tp[w], cell.steady_windows[w] = sw.throughput, sw.interval
        cell.in_flight.append(sw.effective_concurrency)
        steady.update(id(r) for r, s in zip(rs, sw.steady) if s)
    row["steady_requests"] = len(steady)
    row["effective_concurrency"] = stats.mean(cell.in_flight) if cell.in_flight else NAN
    row["server_running_mean"] = server_running_mean(windows)
    ok = [r for r in reqs if r.ok and id(r) in steady]  # the latency figures: requests inside the measured interval
    wt = [cell.window_tp[w] for w in windows_seen]
    row["throughput_cv"] = stats.coefficient_of_variation(wt)
    row.update(variance_levels(cell.window_tp, [[r.per_user for r in ok if (r.launch, r.repeat) == w]
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
    row["past_eos_share"] = past_eos_share(ok, opts.eos_ids)

    # acceptance counts every request, ramp and drain included: a request's tokens per step are its prompt's and
    # the drafter's, not the load's; whole passes weigh every prompt the same; the counters cover whole windows
    row.update(cell_acceptance(reqs, windows, is_plain, n_launches))
    acc, timing = acceptance_checks(reqs, windows), timing_checks(reqs, windows)
    row.update(cell_reconciliation(acc, timing))
    cell.reconciliation = reconciliation_warnings(acc, timing)
    return cell


def interval_unit(n_launches: int, calibration: LaunchVariance | None) -> str:
    """What the cell's intervals treat as independent: launches, or repeats (plus a calibrated launch
    variance when one applies)."""
    if n_launches >= 2:
        return "launch+history" if calibration is not None and calibration.df > 0 and calibration.repeat_df > 0 \
            else "launch"
    return "repeat+calibration" if calibration is not None else "repeat"


def mark_history_intervals(row: dict[str, Any]) -> None:
    """A speedup interval from the history's components alone (a single window per side)."""
    if row["interval_unit"] == "repeat+calibration" and row["repeats"] == 1 and math.isfinite(row["speedup_ci_low"]):
        row["interval_unit"] = "history"


def _variant_gates(cells: list[MeasuredCell], windows: pd.DataFrame, opts: CellOptions) -> dict[str, list[CellWarning]]:
    """Gate warnings that concern a whole variant: drafter inactive, GPU drift, and those given."""
    out: dict[str, list[CellWarning]] = {v: list(ws) for v, ws in opts.run_gates.items()}
    by_variant: dict[str, list[tuple[float, float]]] = {}
    for c in cells:
        if (c.row["variant"] not in opts.plain | opts.forced and not c.row["is_baseline"]
                and c.row["acceptance_source"] != "none"):
            tokens = float(sum(r.n_out for r in c.reqs if r.ok and math.isfinite(r.n_out)))
            by_variant.setdefault(c.row["variant"], []).append((tokens, c.row["acceptance_length"]))
    for variant, pairs in by_variant.items():
        if (w := gates.drafter_inactive(pairs)) is not None:
            out.setdefault(variant, []).append(w)
    for variant, w in gates.gpu_drift(windows, opts.baseline).items():
        out.setdefault(variant, []).append(w)
    return out


def _states(windows: pd.DataFrame, cell_id: str) -> list[dict[str, float]]:
    """The engine_state summaries of a cell's windows (those that have one)."""
    if windows.empty or "engine_state" not in windows:
        return []
    return [s for s in windows.loc[windows["cell_id"] == cell_id, "engine_state"] if isinstance(s, dict)]


def compute_cells(requests: pd.DataFrame | CellSource, windows: pd.DataFrame, opts: CellOptions) -> pd.DataFrame:
    """One row per variant x sweep point with the columns in CELL_COLUMNS (see docs/metrics.md).

    `requests`: a records frame, or a CellSource (the columnar store) read one cell at a time: a cell's
    per-chunk lists are let go once it is summarised, and outputs are read only to compare them."""
    source = FrameSource(requests, windows) if isinstance(requests, pd.DataFrame) else requests
    cells: list[MeasuredCell] = []
    for cell_id in source.cell_ids():
        df = source.cell_frame(cell_id, SUMMARY_COLUMNS + (("token_ids",) if opts.eos_ids else ()))
        if df.empty:
            continue
        first = df.iloc[0]
        key = {c: (key_nan(first[c]) if c in first else None) for c in KEY_COLUMNS}
        win = windows[windows["window_id"].isin(set(df["window_id"]))]
        cell = _summarize_cell(key, to_measured_requests(df), win, opts)
        cell.cell_id = cell_id
        for r in cell.reqs:
            r.chunk_offsets, r.chunk_tokens, r.token_ids = (), (), None  # ITL and past_eos_share are done
        cells.append(cell)
    if not cells:
        return pd.DataFrame(columns=CELL_COLUMNS)

    base_cells = {c.row["point_id"]: c for c in cells if c.row["is_baseline"]}
    lossless = drafter_losslessness(cells, source, opts.forced, opts.stop_at_eos)
    variant_gates = _variant_gates(cells, windows, opts)
    engine_states = state_warnings(windows)
    client = gates.client_gates(windows)  # client_saturated, client_lagging
    top: dict[str, int] = {}  # category -> its largest closed-loop concurrency in the run
    for c in cells:
        if key_nan(c.row["rate"]) is None:
            top[str(c.row["category"])] = max(top.get(str(c.row["category"]), 0), int(c.row["concurrency"]))
    for c in cells:
        row = c.row
        distinct = None if key_nan(row["rate"]) is not None else len({r.prompt_id for r in c.reqs})
        base = base_cells.get(row["point_id"])
        has_base = base is not None and bool(base.row["valid"])
        if row["is_baseline"]:
            row.update(speedup=1.0, per_user_speedup=1.0, tpot_speedup=1.0)  # the baseline against itself
        elif has_base and row["valid"]:
            row.update(speedups(c, base, opts.calibration))  # type: ignore[arg-type]
            mark_history_intervals(row)
        if c.cell_id in lossless:
            match, any_match, prefix = lossless[c.cell_id]
            row["lossless_match_rate"], row["lossless_any_match_rate"] = match, any_match
            row["lossless_prefix_mean"] = prefix
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
            category=str(row["category"]),
            distinct_prompts=distinct,
            top_concurrency=top.get(str(row["category"]), 0),
            past_eos_share=row["past_eos_share"],
            has_baseline=has_base,
            full_accept_fraction=NAN if row["variant"] in opts.forced else row["full_accept_fraction"],
            forced=row["variant"] in opts.forced,
            # only where that leaves the cell without acceptance (per-request data may still give it)
            unknown_acceptance_windows=(0 if row["variant"] in opts.plain or row["acceptance_source"] != "none"
                                        else int(row["acceptance_unknown_windows"] or 0)),
        )) + c.reconciliation + variant_gates.get(row["variant"], [])
        if impossible is not None:
            ws.append(impossible)
        ws += engine_states.get(f"{row['variant']}|{row['point_id']}", [])
        ws += client.get(f"{row['variant']}|{row['point_id']}", [])  # by cell_id
        if distinct is not None and (below := concurrency_warning(
                int(row["concurrency"]), c.in_flight, sum(not v for v in c.steady_windows.values()), distinct,
                row["server_running_mean"], _states(windows, c.cell_id))) is not None:
            ws.append(below)
        row["warnings"] = encode_warnings(ws)

    add_mix_columns(cells, base_cells, opts.calibration, opts.subset)
    out = pd.DataFrame([c.row for c in cells], columns=CELL_COLUMNS)
    # every key column but point_id (which they determine): no two cells tie
    return out.sort_values(["variant", "category", "input_len", "output_len", "temperature", "concurrency",
                            "rate"]).reset_index(
        drop=True)

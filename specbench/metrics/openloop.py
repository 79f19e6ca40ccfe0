"""Open-loop tables from the raw records: one row per variant x offered rate (open_loop.csv: saturation,
latency percentiles, each SLO's percentile with its interval, attainment, goodput, send-time error) and one
row per variant x SLO (capacity.csv: capacity with its interval and the gain over the baseline).
Formulas live in metrics.slo and metrics.capacity; this module only groups records. Pure."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .. import stats
from .capacity import MEASURED, Capacity, RatePoint, capacity, capacity_gain
from .common import NAN, as_float, as_list, key_nan, opt_str
from .requests import measured_requests, request_output_tokens, request_tpot
from .slo import SLO, RequestLatency, WindowTiming, goodput, quantile_ci, saturation
from .warnings import decode_warnings

GROUP = ["variant", "category", "input_len", "output_len", "temperature"]  # one latency-vs-rate curve
CAPACITY_COLUMNS = ["variant", "slo", "capacity_req_s", "capacity_ci_low", "capacity_ci_high", "status",
                    "gain", "gain_ci_low", "gain_ci_high", "category", "input_len", "output_len", "temperature",
                    "rates_measured"]
ALL = "all"  # the SLO set at once: every SLO holds


def slo_column(s: SLO) -> str:
    """Column stem of an SLO's percentile in open_loop.csv: `p90_ttft_s`."""
    return f"p{s.percentile:g}_{s.metric}"


def _latency(r: dict[str, Any]) -> RequestLatency:
    """A request's latencies as its SLOs see them: TTFT and e2e from its planned arrival, i.e. its send-time
    error added (a request held back by the safety cap, or sent late by a busy client, waited that long too:
    measuring from the actual send would hide it, the "coordinated omission" of closed-loop clients)."""
    ok = opt_str(r.get("error")) is None
    n_out = request_output_tokens(r.get("output_tokens"), as_list(r.get("chunk_tokens")))
    lag = as_float(r.get("send_lag_s"))
    late = lag if math.isfinite(lag) and lag > 0 else 0.0
    ttft, e2e = as_float(r.get("ttft_s")) + late, as_float(r.get("e2e_s")) + late
    return RequestLatency(ok=ok, ttft_s=ttft if ok else NAN, tpot_s=request_tpot(e2e, ttft, n_out) if ok else NAN,
                          e2e_s=e2e if ok else NAN, n_out=n_out if ok else NAN)


def _window(rows: list[dict[str, Any]]) -> tuple[WindowTiming, float]:
    """A window's timing in schedule order, and its span (first send to last finish, s)."""
    rows = sorted(rows, key=lambda r: as_float(r.get("scheduled_s")))
    send = np.array([as_float(r.get("t_send")) for r in rows])
    e2e = np.array([as_float(r.get("e2e_s")) if opt_str(r.get("error")) is None else NAN for r in rows])
    finish = send + e2e
    ttft = [as_float(r.get("ttft_s")) if opt_str(r.get("error")) is None else NAN for r in rows]
    timing = WindowTiming([as_float(r.get("scheduled_s")) for r in rows], list(finish), ttft)
    ends = np.concatenate([finish[np.isfinite(finish)], send])
    return timing, float(np.nanmax(ends) - np.nanmin(send))


def _point_row(rows: list[dict[str, Any]], slos: Sequence[SLO]) -> dict[str, Any]:
    first = rows[0]
    row: dict[str, Any] = {c: first.get(c) for c in GROUP}
    row.update(rate=as_float(first.get("rate")), point_id=first.get("point_id"))
    reqs = [_latency(r) for r in rows]
    ok = [r for r in reqs if r.ok]
    row.update(n_requests=len(reqs), n_errors=len(reqs) - len(ok))
    by_window: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for r in rows:
        by_window.setdefault((r.get("launch"), r.get("repeat")), []).append(r)
    sats, span = [], 0.0
    for ws in by_window.values():
        timing, window_span = _window(ws)
        sats.append(saturation(timing))
        span += window_span
    growth = [x.wait_growth for x in sats if math.isfinite(x.wait_growth)]
    row.update(windows=len(sats), offered_req_s=stats.mean([x.offered_req_s for x in sats]),
               achieved_req_s=stats.mean([x.achieved_req_s for x in sats]),
               wait_growth=max(growth) if growth else NAN,
               saturated=any(x.saturated for x in sats),  # a point is saturated when any of its windows is
               saturation_reason="+".join(sorted({p for x in sats for p in x.reason.split("+") if p})))
    for metric in ("ttft_s", "tpot_s", "e2e_s"):
        vals = [getattr(r, metric) for r in ok]
        for q in (50, 90, 99):
            row[f"{metric.removesuffix('_s')}_p{q}_s"] = stats.percentile(vals, q)
    for s in slos:
        qc = quantile_ci([r.value(s.metric) for r in reqs], s.percentile)
        col = slo_column(s)
        row.update({col: qc.estimate, f"{col}_ci_low": qc.low, f"{col}_ci_high": qc.high,
                    f"{col}_met": bool(qc.estimate <= s.threshold_s and not row["saturated"])})
    g = goodput(reqs, slos, span)
    row.update(attainment=g.attainment, attainment_ci_low=g.attainment_low, attainment_ci_high=g.attainment_high,
               goodput_req_s=g.req_s, goodput_req_s_ci_low=g.req_s_low, goodput_req_s_ci_high=g.req_s_high,
               goodput_tok_s=g.tok_s, goodput_tok_s_ci_low=g.tok_s_low, goodput_tok_s_ci_high=g.tok_s_high)
    lags = [as_float(r.get("send_lag_s")) for r in rows]
    row.update(send_lag_p50_s=stats.percentile(lags, 50), send_lag_p99_s=stats.percentile(lags, 99),
               send_lag_max_s=max((x for x in lags if math.isfinite(x)), default=NAN))
    return row


def open_loop_table(requests: pd.DataFrame, windows: pd.DataFrame, slos: Sequence[SLO]) -> pd.DataFrame:
    """open_loop.csv: one row per variant x open-loop point (measured requests of completed windows)."""
    req = measured_requests(requests, windows)
    if req.empty or "rate" not in req or req["rate"].isna().all():
        return pd.DataFrame()
    req = req[req["rate"].notna()]
    rows = [_point_row([{str(k): v for k, v in r.items()} for r in g.to_dict("records")], slos)
            for _, g in req.groupby("cell_id", sort=True)]
    return pd.DataFrame(rows).sort_values(GROUP[:1] + GROUP[1:] + ["rate"], na_position="first").reset_index(drop=True)


def rate_points(points: pd.DataFrame, slo: SLO | None, slos: Sequence[SLO]) -> list[RatePoint]:
    """One curve's rows as RatePoints for one SLO, or for ALL of them (slo None): then each value is the
    worst SLO's percentile over its threshold, against a threshold of 1."""
    out = []
    for _, r in points.sort_values("rate").iterrows():
        if slo is not None:
            c = slo_column(slo)
            vals = (r[c], r[f"{c}_ci_low"], r[f"{c}_ci_high"])
        else:
            ratios = [[r[f"{slo_column(s)}{suffix}"] / s.threshold_s for s in slos] for suffix in ("", "_ci_low",
                                                                                                "_ci_high")]
            vals = (max(ratios[0]), max(ratios[1]), max(ratios[2]))
        out.append(RatePoint(rate=float(r["rate"]), estimate=float(vals[0]), low=float(vals[1]), high=float(vals[2]),
                             saturated=bool(r["saturated"]), valid=int(r["n_requests"]) > int(r["n_errors"])))
    return out


def slo_sets(slos: Sequence[SLO]) -> list[tuple[str, SLO | None, float]]:
    """(label, slo, threshold) per row of capacity.csv: each SLO, then all of them at once (when several)."""
    out: list[tuple[str, SLO | None, float]] = [(s.label, s, s.threshold_s) for s in slos]
    if len(slos) > 1:
        out.append((f"{ALL}: " + " and ".join(s.label for s in slos), None, 1.0))
    return out


def capacity_table(points: pd.DataFrame, slos: Sequence[SLO], baseline: str) -> pd.DataFrame:
    """capacity.csv: per variant, curve and SLO, the capacity (req/s) with its interval and the gain over
    the baseline's capacity on the same curve and SLO."""
    if points.empty or not slos:
        return pd.DataFrame(columns=CAPACITY_COLUMNS)
    rows = []
    caps: dict[tuple[Any, ...], Capacity] = {}
    for key, g in points.groupby(GROUP, dropna=False, sort=True):
        key = tuple(key_nan(k) for k in key)
        for label, slo, thr in slo_sets(slos):
            cap = capacity(rate_points(g, slo, slos), thr)
            caps[(*key, label)] = cap
            rows.append(dict(zip(GROUP, key)) | {"slo": label, "capacity_req_s": cap.value,
                                                  "capacity_ci_low": cap.low, "capacity_ci_high": cap.high,
                                                  "status": cap.status, "rates_measured": len(g)})
    for row in rows:
        base = caps.get((baseline, *[row[c] for c in GROUP[1:]], row["slo"]))
        mine = caps[(*[row[c] for c in GROUP], row["slo"])]
        gain = capacity_gain(mine, base) if base and row["variant"] != baseline else None
        if row["variant"] == baseline:  # the baseline against itself
            row.update(gain=1.0 if mine.status == MEASURED else NAN, gain_ci_low=NAN, gain_ci_high=NAN)
            continue
        row.update(gain=gain.value if gain else NAN, gain_ci_low=gain.low if gain else NAN,
                   gain_ci_high=gain.high if gain else NAN)
    return pd.DataFrame(rows, columns=CAPACITY_COLUMNS)


# Cell warnings about closed-loop comparisons that do not apply at an offered rate: a search rate exists for one
# variant only (no baseline cell), and a rate's figures have order-statistic intervals from its requests.
NOT_OPEN_LOOP = frozenset({"no_baseline", "single_repeat"})


def open_loop_warnings(encoded: str) -> str:
    """A cells.csv `warnings` value without the codes that do not apply to an open-loop cell."""
    kept = [w for w in decode_warnings(encoded) if w["code"] not in NOT_OPEN_LOOP]
    return json.dumps(kept, separators=(",", ":")) if kept else ""

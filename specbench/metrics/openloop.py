"""Open-loop tables from the raw records: one row per variant x offered rate (open_loop.csv: saturation,
latency percentiles, each SLO's percentile with its interval, attainment, goodput, send-time error) and one
row per variant x SLO (capacity.csv: capacity with its interval and the gain over the baseline).
Formulas live in metrics.slo and metrics.capacity; this module only groups records. Pure."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from specbench.decide import stats
from specbench.metrics.capacity import MEASURED, Capacity, Gain, RatePoint, capacity, capacity_gain, decide
from specbench.metrics.common import NAN, as_float, as_list, key_nan, opt_str
from specbench.metrics.requests import measured_requests, request_output_tokens, request_tpot
from specbench.metrics.slo import (
    SLO,
    RequestLatency,
    WindowTiming,
    batch_quantile_ci,
    goodput,
    halves,
    saturation,
    send_lag_bound,
)
from specbench.metrics.warnings import decode_warnings

GROUP = ["variant", "category", "input_len", "output_len", "temperature"]  # one latency-vs-rate curve
CAPACITY_COLUMNS = ["variant", "slo", "capacity_offered_req_s", "missed_offered_req_s", "crossing_offered_req_s",
                    "status", "undecided_rates", "excluded_rates", "gain", "gain_ci_low", "gain_ci_high",
                    "launches", "capacity_by_launch", "launches_agreeing", "category", "input_len", "output_len",
                    "temperature", "rates_measured", "crossing_bound", "crossing_bound_offered_req_s"]
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


def _trend(row: dict[str, Any], slos: Sequence[SLO]) -> str:
    """The steady-state trends of a row's SLO percentiles, joined (`rising`, `falling`, both, or "")."""
    return "+".join(sorted({str(row[f"{slo_column(s)}_trend"]) for s in slos} - {"", "nan"}))


def _point_row(rows: list[dict[str, Any]], slos: Sequence[SLO], lag_bound_s: float | None) -> dict[str, Any]:
    first = rows[0]
    row: dict[str, Any] = {c: first.get(c) for c in GROUP}
    row.update(rate=as_float(first.get("rate")), point_id=first.get("point_id"))
    by_window: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for r in rows:
        by_window.setdefault((r.get("launch"), r.get("repeat")), []).append(r)
    ordered = [sorted(ws, key=lambda r: as_float(r.get("scheduled_s"))) for _, ws in sorted(by_window.items())]
    per_window = [[_latency(r) for r in ws] for ws in ordered]  # schedule order: the batches are consecutive
    reqs = [x for w in per_window for x in w]
    ok = [r for r in reqs if r.ok]
    row.update(n_requests=len(reqs), n_errors=len(reqs) - len(ok))
    sats, span = [], 0.0
    for ws in ordered:
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
    lags = [as_float(r.get("send_lag_s")) for r in rows]
    bound = send_lag_bound(slos, lag_bound_s)
    row.update(send_lag_p50_s=stats.percentile(lags, 50), send_lag_p99_s=stats.percentile(lags, 99),
               send_lag_max_s=max((x for x in lags if math.isfinite(x)), default=NAN), send_lag_bound_s=bound)
    row["send_lag_ok"] = not (row["send_lag_p99_s"] > bound)  # NaN (no lags recorded, no SLO) passes
    for s in slos:
        values = [[r.value(s.metric) for r in w] for w in per_window]
        qc, hv = batch_quantile_ci(values, s.percentile), halves(values, s.percentile)
        col = slo_column(s)
        row.update({col: qc.estimate, f"{col}_ci_low": qc.low, f"{col}_ci_high": qc.high,
                    f"{col}_first_half": hv.first, f"{col}_second_half": hv.second, f"{col}_trend": hv.trend})
        row[f"{col}_decision"] = decide(_rate_point(row, s, slos), s.threshold_s)
    row["steady"] = not _trend(row, slos)
    g = goodput(reqs, slos, span)
    row.update(attainment=g.attainment, attainment_ci_low=g.attainment_low, attainment_ci_high=g.attainment_high,
               goodput_req_s=g.req_s, goodput_req_s_ci_low=g.req_s_low, goodput_req_s_ci_high=g.req_s_high,
               goodput_tok_s=g.tok_s, goodput_tok_s_ci_low=g.tok_s_low, goodput_tok_s_ci_high=g.tok_s_high)
    return row


def open_loop_table(requests: pd.DataFrame, windows: pd.DataFrame, slos: Sequence[SLO],
                    by_launch: bool = False, lag_bound_s: float | None = None) -> pd.DataFrame:
    """open_loop.csv: one row per variant x open-loop point (measured requests of completed windows); with
    `by_launch`, one per variant x point x launch (column `launch`), for the capacity of each launch.
    `lag_bound_s`: the send-lag gate's configured bound (None: the default, metrics.slo.send_lag_bound)."""
    req = measured_requests(requests, windows)
    if req.empty or "rate" not in req or req["rate"].isna().all():
        return pd.DataFrame()
    req = req[req["rate"].notna()]
    keys = ["cell_id", "launch"] if by_launch else ["cell_id"]
    rows = []
    for key, g in req.groupby(keys, sort=True):
        row = _point_row([{str(k): v for k, v in r.items()} for r in g.to_dict("records")], slos, lag_bound_s)
        rows.append(row | ({"launch": int(str(key[1]))} if by_launch else {}))
    order = GROUP + (["launch"] if by_launch else []) + ["rate"]
    return pd.DataFrame(rows).sort_values(order, na_position="first").reset_index(drop=True)


def _rate_point(r: Mapping[str, Any], slo: SLO | None, slos: Sequence[SLO]) -> RatePoint:
    """One open_loop.csv row as a RatePoint for one SLO, or for ALL of them (slo None): then each value is the
    worst SLO's percentile over its threshold, against a threshold of 1. The rate is the realized offered rate
    (`offered_req_s`; the nominal `rate` where it is undefined)."""
    if slo is not None:
        c = slo_column(slo)
        vals = (r[c], r[f"{c}_ci_low"], r[f"{c}_ci_high"])
        trend = str(r[f"{c}_trend"])
    else:
        ratios = [[r[f"{slo_column(s)}{suffix}"] / s.threshold_s for s in slos]
                  for suffix in ("", "_ci_low", "_ci_high")]
        vals = (max(ratios[0]), max(ratios[1]), max(ratios[2]))
        trend = _trend(dict(r), slos)
    nominal, offered = as_float(r["rate"]), as_float(r.get("offered_req_s"))
    return RatePoint(rate=offered if math.isfinite(offered) else nominal, estimate=float(vals[0]),
                     low=float(vals[1]), high=float(vals[2]), saturated=bool(r["saturated"]),
                     valid=int(r["n_requests"]) > int(r["n_errors"]), trend="" if trend == "nan" else trend,
                     counted=bool(r["send_lag_ok"]), nominal=nominal)


def rate_points(points: pd.DataFrame, slo: SLO | None, slos: Sequence[SLO]) -> list[RatePoint]:
    """One curve's rows as RatePoints for one SLO, or for ALL of them (slo None); see `_rate_point`."""
    return [_rate_point({str(k): v for k, v in r.items()}, slo, slos) for _, r in points.sort_values("rate").iterrows()]


def slo_sets(slos: Sequence[SLO]) -> list[tuple[str, SLO | None, float]]:
    """(label, slo, threshold) per row of capacity.csv: each SLO, then all of them at once (when several)."""
    out: list[tuple[str, SLO | None, float]] = [(s.label, s, s.threshold_s) for s in slos]
    if len(slos) > 1:
        out.append((f"{ALL}: " + " and ".join(s.label for s in slos), None, 1.0))
    return out


def _capacities(points: pd.DataFrame, slos: Sequence[SLO], keys: list[str]) -> dict[tuple[Any, ...], Capacity]:
    """(*keys, SLO label) -> the capacity of that curve (and launch, with `launch` in keys)."""
    out: dict[tuple[Any, ...], Capacity] = {}
    for key, g in points.groupby(keys, dropna=False, sort=True):
        key = tuple(key_nan(k) for k in key)
        for label, slo, thr in slo_sets(slos):
            out[(*key, label)] = capacity(rate_points(g, slo, slos), thr)
    return out


def _rates_measured(points: pd.DataFrame) -> dict[tuple[Any, ...], int]:
    return {tuple(key_nan(k) for k in key): len(g) for key, g in points.groupby(GROUP, dropna=False, sort=True)}


def _agreeing(gains: Sequence[Gain], pooled: Gain) -> int:
    """How many launches' gain intervals exclude 1 on the side the pooled one does (0 when it does not)."""
    if pooled.low > 1:
        return sum(1 for g in gains if g.low > 1)
    if pooled.high < 1:
        return sum(1 for g in gains if g.high < 1)
    return 0


def capacity_table(points: pd.DataFrame, slos: Sequence[SLO], baseline: str,
                   launch_points: pd.DataFrame | None = None) -> pd.DataFrame:
    """capacity.csv: per variant, curve and SLO, the capacity (realized offered req/s) with its bracket and the
    gain over the baseline's capacity on the same curve and SLO. `launch_points` (open_loop_table by launch):
    the capacity of each launch too, and how many launches' own gains agree with the pooled one."""
    if points.empty or not slos:
        return pd.DataFrame(columns=CAPACITY_COLUMNS)
    caps, n_rates = _capacities(points, slos, GROUP), _rates_measured(points)
    per_launch = (_capacities(launch_points, slos, GROUP + ["launch"])
                  if launch_points is not None and len(launch_points) else {})
    rows = []
    for (*key, label), cap in caps.items():
        curve = dict(zip(GROUP, key))
        mine = {k[-2]: c for k, c in per_launch.items() if list(k[:len(GROUP)]) == key and k[-1] == label}
        row = curve | {"slo": label, "capacity_offered_req_s": cap.value, "missed_offered_req_s": cap.high,
                       "crossing_offered_req_s": cap.estimate, "status": cap.status,
                       "crossing_bound": cap.bound, "crossing_bound_offered_req_s": cap.bound_rate,
                       "undecided_rates": cap.undecided, "excluded_rates": cap.excluded,
                       "launches": max(1, len(mine)), "rates_measured": n_rates[tuple(key)],
                       "capacity_by_launch": "; ".join(f"{lx}: {c.value:.4g}" for lx, c in sorted(mine.items()))}
        base = caps.get((baseline, *key[1:], label))
        if row["variant"] == baseline:  # the baseline against itself
            row.update(gain=1.0 if cap.status == MEASURED else NAN, gain_ci_low=NAN, gain_ci_high=NAN,
                       launches_agreeing=0)
        else:
            gain = capacity_gain(cap, base) if base else Gain(NAN, NAN, NAN)
            base_l = {k[-2]: c for k, c in per_launch.items()
                      if list(k[:len(GROUP)]) == [baseline, *key[1:]] and k[-1] == label}
            gains = [capacity_gain(c, base_l[lx]) for lx, c in mine.items() if lx in base_l]
            row.update(gain=gain.value, gain_ci_low=gain.low, gain_ci_high=gain.high,
                       launches_agreeing=_agreeing(gains, gain))
        rows.append(row)
    return pd.DataFrame(rows, columns=CAPACITY_COLUMNS)


# Cell warnings about closed-loop comparisons that do not apply at an offered rate: a search rate exists for one
# variant only (no baseline cell), and a rate's figures have order-statistic intervals from its requests.
NOT_OPEN_LOOP = frozenset({"no_baseline", "single_repeat"})


def open_loop_warnings(encoded: str) -> str:
    """A cells.csv `warnings` value without the codes that do not apply to an open-loop cell."""
    kept = [w for w in decode_warnings(encoded) if w["code"] not in NOT_OPEN_LOOP]
    return json.dumps(kept, separators=(",", ":")) if kept else ""

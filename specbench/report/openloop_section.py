"""The open-loop report: a verdict sentence per SLO, the capacity table, the per-rate table and the three
plots (latency percentiles vs offered rate, goodput vs rate, capacity per variant). RunData -> blocks.

The sentence per drafter and SLO reads capacity.csv: "at p90 TTFT <= 0.5 s, eagle3 raises capacity: 5.0 req/s
offered (met at 4.8, missed at 5.5) against the baseline's 2.5 (met at 2.4, missed at 2.7) (x2.00 [1.75,
2.29])". It says "raises" / "lowers" only when the gain's whole interval is above / below 1 (the variant
meets the SLO at a rate the baseline misses, or the reverse), and calls it indicative unless at least two
launches each decide the same way (one launch has no launch-to-launch variation in its intervals).
"""

from __future__ import annotations

import math

import pandas as pd

from specbench.metrics.capacity import AT_LEAST, AT_MOST, BELOW, BEYOND, MEASURED
from specbench.report.derived import RunData
from specbench.report.document import Block, Bullets, Heading, Image, Inline, Paragraph, Strong, Table, Tone
from specbench.report.fmt import UNDEFINED, fmt, fmt_len, fmt_output_len, fmt_pct, num
from specbench.report.slo_plots import capacity_bars, goodput_vs_rate, latency_vs_rate


def is_open_loop(data: RunData) -> bool:
    load = (data.config.get("sweep") or {}).get("load") or {}
    return load.get("kind") == "open" or len(data.open_loop) > 0


def _rate(x: object) -> str:
    v = num(x)
    return UNDEFINED if math.isnan(v) else f"{v:.3g}"


def _curve(row: pd.Series, several: bool) -> str:
    if not several:
        return ""
    inp = "" if math.isnan(num(row["input_len"])) else f" in {fmt_len(row['input_len'])}"
    return f" ({row['category']}{inp}, output {fmt_output_len(row['output_len'])}, t={num(row['temperature']):g})"


def _gain_text(row: pd.Series) -> str:
    """`x1.87 [1.47, 2.30]`; an end the measured rates do not bound shows as `open`."""
    v, lo, hi = num(row["gain"]), num(row["gain_ci_low"]), num(row["gain_ci_high"])
    if math.isnan(lo) and math.isnan(hi):
        return "x" + fmt(v)
    ends = ["open" if math.isnan(x) else fmt(x) for x in (lo, hi)]
    return f"x{fmt(v)} [{ends[0]}, {ends[1]}]"


def crossing_text(row: pd.Series) -> str:
    """The estimate (where the percentile estimates cross the limit), or, when they do not cross inside the
    measured rates, the bound capacity.csv writes in `crossing_bound_offered_req_s`: `at least 4` / `at most 1`."""
    side, at = str(row.get("crossing_bound", "") or ""), num(row.get("crossing_bound_offered_req_s"))
    if side in (AT_LEAST, AT_MOST) and math.isfinite(at):
        return f"{side.replace('_', ' ')} {fmt(at)}"
    return fmt(row["crossing_offered_req_s"])


def bracket_text(row: pd.Series) -> str:
    """A capacity in words, from its decided bracket (capacity.csv; offered req/s)."""
    status, met, missed = str(row["status"]), row["capacity_offered_req_s"], row["missed_offered_req_s"]
    if status == MEASURED:
        return (f"{_rate(row['crossing_offered_req_s'])} req/s offered (met at {_rate(met)}, missed at "
                f"{_rate(missed)})")
    if status == BEYOND:
        return f"at least {_rate(met)} req/s offered (met there; no rate decided missed)"
    if status == BELOW:
        return f"below {_rate(missed)} req/s offered (missed there; no lower rate decided met)"
    est, side = num(row["crossing_offered_req_s"]), str(row.get("crossing_bound", "") or "")
    at = num(row.get("crossing_bound_offered_req_s"))
    guess = (f"estimate {_rate(est)} req/s offered; " if math.isfinite(est) else
             f"the estimates cross {side.replace('_', ' ')} {_rate(at)} req/s offered; "
             if side in (AT_LEAST, AT_MOST) and math.isfinite(at) else "")
    return f"undecided at every measured rate ({guess}each interval straddles the limit)"


def _indicative(row: pd.Series) -> str:
    """Why a raises/lowers verdict is only indicative ("" when at least two launches each decide it)."""
    launches, agree = int(num(row.get("launches", 1)) or 1), int(num(row.get("launches_agreeing", 0)) or 0)
    if launches < 2:
        return "indicative: one launch, so the variation between engine launches is in no interval"
    if agree < launches:
        return f"indicative: {agree} of {launches} launches decide it on their own"
    return ""


def slo_sentence(row: pd.Series, base: pd.Series | None) -> tuple[str, Tone]:
    """One drafter's capacity under one SLO against the baseline's, in words (the verdict per SLO)."""
    v, slo = str(row["variant"]), str(row["slo"])
    if base is None:
        return f"at {slo}, {v}'s capacity is {bracket_text(row)} (no baseline capacity to compare)", ""
    mine, theirs = bracket_text(row), bracket_text(base)
    lo, hi = num(row["gain_ci_low"]), num(row["gain_ci_high"])
    if lo > 1 or hi < 1:
        verb = "raises" if lo > 1 else "lowers"
        tone_: Tone = "good" if lo > 1 else "bad"
        text = f"at {slo}, {v} {verb} capacity: {mine} against the baseline's {theirs} ({_gain_text(row)})"
        why = _indicative(row)
        return (text + f"; {why}", "note") if why else (text, tone_)
    if math.isnan(lo) and math.isnan(hi) and math.isnan(num(row["gain"])):
        return f"at {slo}, {v}: {mine}; the baseline: {theirs}; no gain can be decided", "warn"
    return (f"at {slo}, {v}'s capacity {mine} against the baseline's {theirs}: no decided difference "
            f"({_gain_text(row)})"), ""


def open_loop_warnings_text(points: pd.DataFrame) -> list[str]:
    """A line per open-loop point that fails the steady-state check or the send-lag gate (open_loop.csv)."""
    out = []
    for _, r in points.iterrows():
        where = f"{r['variant']} at {_rate(r['rate'])} req/s"
        if "send_lag_ok" in r and not bool(r["send_lag_ok"]):
            out.append(f"{where}: the sender ran late (p99 send lag {fmt(num(r['send_lag_p99_s']) * 1000, 1)} ms > "
                       f"{fmt(num(r['send_lag_bound_s']) * 1000, 1)} ms): the point is not counted; rerun on a "
                       "quieter machine or with fewer rates at once")
        if "steady" in r and not bool(r["steady"]):
            trends = {str(r[c]) for c in r.index if str(c).endswith("_trend")} - {"", "nan"}
            out.append(f"{where}: no steady state (the window's halves disagree: {', '.join(sorted(trends))}); "
                       "its decision keeps only what the trend cannot overturn. More warmup_requests or "
                       "requests_per_rate")
    return out


def slo_verdict(data: RunData) -> list[Block]:
    """A sentence per drafter and SLO (and per curve, when the sweep has several)."""
    cap = data.capacity
    if not len(cap):
        return [Heading("Verdict per SLO"),
                Paragraph(["No capacity was computed (no `slo:` in the config, or no open-loop point measured)."],
                          tone="note")]
    several = cap.groupby(["category", "input_len", "output_len", "temperature"], dropna=False).ngroups > 1
    items: list[list[Inline]] = []
    tones: list[Tone] = []
    for _, row in cap[cap["variant"] != data.baseline].iterrows():
        same = cap[(cap["variant"] == data.baseline) & (cap["slo"] == row["slo"]) &
                   (cap["category"] == row["category"]) & (cap["output_len"] == row["output_len"])]
        text, row_tone = slo_sentence(row, same.iloc[0] if len(same) else None)
        items.append([Strong(str(row["variant"])), ": " + text + _curve(row, several)])
        tones.append(row_tone)
    note = ("Capacity (realized offered req/s): a rate is decided met when the percentile's 95% interval "
            "(batch means over consecutive requests) lies below the limit, missed when above it (or saturated), "
            "else undecided; the capacity is the highest rate met below the lowest missed, and the estimate the "
            "crossing of the percentiles between them. The gain interval is the range the two brackets allow "
            "(docs/metrics.md, \"Capacity\").")
    tone: Tone = "bad" if "bad" in tones else ""
    warns = open_loop_warnings_text(data.open_loop) if len(data.open_loop) else []
    out: list[Block] = [Heading("Verdict per SLO"), Bullets(items, tone=tone), Paragraph([note], tone="note")]
    if warns:
        out.append(Bullets([[w] for w in warns], tone="warn"))
    return out


def capacity_section(data: RunData) -> list[Block]:
    cap = data.capacity
    if not len(cap) or "capacity_offered_req_s" not in cap:
        return []
    rows = [[str(r["variant"]), str(r["slo"]), fmt(r["capacity_offered_req_s"]), fmt(r["missed_offered_req_s"]),
             crossing_text(r), str(r["status"]).replace("_", " "),
             fmt_len(r["undecided_rates"]), fmt_len(r["excluded_rates"]),
             _gain_text(r) if not (math.isnan(num(r["gain"])) and math.isnan(num(r["gain_ci_low"]))) else UNDEFINED,
             fmt_len(r["launches"]), fmt_len(r["rates_measured"])] for _, r in cap.iterrows()]
    return [Heading("Capacity under the SLO"),
            Table(["variant", "SLO", "met req/s", "missed req/s", "estimate req/s", "status", "undecided",
                   "excluded", "gain vs baseline", "launches", "rates"], rows,
                  caption="capacity.csv (realized offered rates)", numeric=frozenset({2, 3, 4, 6, 7, 8, 9, 10}))]


def _decisions(r: pd.Series) -> str:
    return ", ".join(str(r[c]) for c in r.index if str(c).endswith("_decision"))


def points_section(data: RunData) -> list[Block]:
    pts = data.open_loop
    if not len(pts):
        return []
    rows = []
    for _, r in pts.iterrows():
        sat = "SATURATED (" + str(r["saturation_reason"]) + ")" if r["saturated"] else "no"
        lag = f"{fmt(num(r['send_lag_p50_s']) * 1000, 2)} / {fmt(num(r['send_lag_p99_s']) * 1000, 2)}"
        rows.append([str(r["variant"]), fmt(r["rate"], 3), fmt(r["offered_req_s"]), fmt(r["achieved_req_s"]), sat,
                     fmt(r["ttft_p50_s"], 3), fmt(r["ttft_p90_s"], 3), fmt(r["ttft_p99_s"], 3),
                     fmt(num(r["tpot_p50_s"]) * 1000, 1),
                     fmt_pct(r["attainment"]),
                     _decisions(r) or "-", "yes" if bool(r.get("steady", True)) else "NO",
                     lag + ("" if bool(r.get("send_lag_ok", True)) else " (LATE)"),
                     f"{fmt_len(r['n_requests'])}/{fmt_len(r['n_errors'])}"])
    cols = ["variant", "rate req/s", "offered", "achieved", "saturated", "TTFT p50 s", "TTFT p90 s", "TTFT p99 s",
            "TPOT p50 ms", "attainment", "SLO decision", "steady", "send error p50/p99 ms", "req/err"]
    lags = pd.to_numeric(pts["send_lag_p99_s"], errors="coerce")
    note = (f"Send-time error (actual - planned send, specbench's own timing): worst p99 over rates "
            f"{fmt(lags.max() * 1000, 2)} ms; a point whose p99 exceeds 10% of the tightest SLO threshold is "
            "marked LATE and not counted. A saturated rate is not a steady state: its latencies only say the "
            "server fell behind; \"steady\" is the check that the window's halves agree.")
    return [Heading("Open-loop points"),
            Table(cols, rows, caption=f"open_loop.csv ({len(rows)} rows)",
                  numeric=frozenset({1, 2, 3, 5, 6, 7, 8, 9, 13})),
            Paragraph([note], tone="note")]


def slo_plots(data: RunData) -> list[Block]:
    specs = [
        ("Latency percentiles vs offered rate", latency_vs_rate(data.open_loop, data.baseline),
         "TTFT and TPOT p50/p90/p99 against offered rate per variant; saturated rates drawn as crosses"),
        ("Goodput vs offered rate", goodput_vs_rate(data.open_loop, data.baseline),
         "Good requests per second against offered rate per variant with 95% bands"),
        ("Capacity per variant", capacity_bars(data.capacity, data.baseline),
         "Capacity under each SLO per variant with 95% intervals"),
    ]
    out: list[Block] = [Image(t, png, alt) for t, png, alt in specs if png is not None]
    return ([Heading("Plots")] + out) if out else []


def open_loop_context(data: RunData) -> Paragraph:
    load = (data.config.get("sweep") or {}).get("load") or {}
    arrival = "a trace replay" if load.get("trace") else str(load.get("arrival", "poisson")) + " arrivals"
    if load.get("arrival") == "gamma":
        arrival += f" (burstiness {load.get('burstiness', 1)})"
    exact = "" if load.get("trace") else ", each rate realized exactly"
    slo = data.config.get("slo") or {}
    # seconds; the config file writes a threshold above 10 s as "30.0s" (config.sweep.slo_for_yaml)
    slos = ", ".join(f"{k} {m} <= {float(str(v).removesuffix('s')):g} s" for m, ps in slo.items()
                     for k, v in ps.items()) or "none"
    return Paragraph([f"Open loop: requests sent at their planned times ({arrival}) whatever is in flight "
                      f"(safety cap {load.get('max_in_flight', '-')}), {load.get('requests_per_rate', '-')} "
                      f"measured requests per rate after {load.get('warmup_requests', '-')} warmup requests; "
                      f"the same schedule for every variant{exact}. SLOs: {slos}. Capacities are in realized offered "
                      "requests/s."])


def open_loop_sections(data: RunData, *, plots: bool = True) -> list[Block]:
    """Everything the report says about an open-loop run, in reading order."""
    return ([open_loop_context(data)] + slo_verdict(data) + (slo_plots(data) if plots else [])
            + capacity_section(data) + points_section(data))

"""The open-loop report: a verdict sentence per SLO, the capacity table, the per-rate table and the three
plots (latency percentiles vs offered rate, goodput vs rate, capacity per variant). RunData -> blocks.

The sentence per drafter and SLO reads capacity.csv: "at p90 TTFT <= 0.5 s, eagle3 raises capacity from 2.5
to 5.0 req/s (x2.00 [1.60, 2.50])". It says "raises" / "lowers" only when the gain's whole interval is
above / below 1; otherwise the two capacities are reported as not measurably different.
"""

from __future__ import annotations

import math

import pandas as pd

from ..metrics.capacity import BELOW, BEYOND, MEASURED
from .document import Block, Bullets, Heading, Image, Inline, Paragraph, Strong, Table, Tone
from .fmt import UNDEFINED, fmt, fmt_interval, fmt_len, fmt_pct, num
from .load import RunData
from .slo_plots import capacity_bars, goodput_vs_rate, latency_vs_rate


def is_open_loop(data: RunData) -> bool:
    load = (data.config.get("sweep") or {}).get("load") or {}
    return load.get("kind") == "open" or len(data.open_loop) > 0


def _rate(x: object) -> str:
    v = num(x)
    return UNDEFINED if math.isnan(v) else f"{v:.3g} req/s"


def _curve(row: pd.Series, several: bool) -> str:
    if not several:
        return ""
    inp = "" if math.isnan(num(row["input_len"])) else f" in {fmt_len(row['input_len'])}"
    return f" ({row['category']}{inp}, output {fmt_len(row['output_len'])}, t={num(row['temperature']):g})"


def _gain_text(row: pd.Series) -> str:
    """`x1.87 [1.47, 2.30]`; an end the measured rates do not bound shows as `open`."""
    v, lo, hi = num(row["gain"]), num(row["gain_ci_low"]), num(row["gain_ci_high"])
    if math.isnan(v) or (math.isnan(lo) and math.isnan(hi)):
        return "x" + fmt(v)
    ends = ["open" if math.isnan(x) else fmt(x) for x in (lo, hi)]
    return f"x{fmt(v)} [{ends[0]}, {ends[1]}]"


def slo_sentence(row: pd.Series, base: pd.Series | None) -> tuple[str, Tone]:
    """One drafter's capacity under one SLO against the baseline's, in words (the verdict per SLO)."""
    v, slo = str(row["variant"]), str(row["slo"])
    status = str(row["status"])
    if base is None:
        return f"at {slo}, {v}'s capacity is {_rate(row['capacity_req_s'])} (no baseline capacity to compare)", ""
    bstatus = str(base["status"])
    if status == BELOW and bstatus == BELOW:
        return f"at {slo}, neither {v} nor the baseline meets the SLO at any measured rate", "warn"
    if status == BELOW:
        return (f"at {slo}, {v} misses the SLO at every measured rate, where the baseline holds it up to "
                f"{_rate(base['capacity_req_s'])}"), "bad"
    if status == BEYOND and bstatus == BEYOND:
        return (f"at {slo}, {v} and the baseline both hold the SLO at every measured rate (up to "
                f"{_rate(row['capacity_req_s'])}): add higher rates to compare capacities"), "note"
    if status == BEYOND:
        return (f"at {slo}, {v} holds the SLO at every measured rate (at least {_rate(row['capacity_req_s'])}), "
                f"the baseline up to {_rate(base['capacity_req_s'])}"), "good"
    if bstatus != MEASURED:
        where = "at no measured rate" if bstatus == BELOW else f"beyond {_rate(base['capacity_req_s'])}"
        return f"at {slo}, {v}'s capacity is {_rate(row['capacity_req_s'])}; the baseline's is {where}", ""
    lo, hi = num(row["gain_ci_low"]), num(row["gain_ci_high"])
    frm, to = _rate(base["capacity_req_s"]).removesuffix(" req/s"), _rate(row["capacity_req_s"])
    if lo > 1:
        return f"at {slo}, {v} raises capacity from {frm} to {to} ({_gain_text(row)})", "good"
    if hi < 1:
        return f"at {slo}, {v} lowers capacity from {frm} to {to} ({_gain_text(row)})", "bad"
    return (f"at {slo}, {v}'s capacity {to} against the baseline's {frm} req/s: no measurable difference "
            f"({_gain_text(row)})"), ""


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
    note = ("Capacity: the highest offered rate at which the SLO holds (interpolated between measured rates; "
            "a saturated rate never holds it), with its 95% interval from the percentiles' order-statistic "
            "intervals; the gain is the ratio of capacities (docs/metrics.md, \"Capacity\"). The intervals "
            "hold the sampling uncertainty within this run, not the variation between engine launches.")
    tone: Tone = "bad" if "bad" in tones else ""
    return [Heading("Verdict per SLO"), Bullets(items, tone=tone),
            Paragraph([note], tone="note")]


def capacity_section(data: RunData) -> list[Block]:
    cap = data.capacity
    if not len(cap):
        return []
    rows = [[str(r["variant"]), str(r["slo"]), fmt_interval(r["capacity_req_s"], r["capacity_ci_low"],
                                                            r["capacity_ci_high"]),
             str(r["status"]).replace("_", " "), _gain_text(r) if not math.isnan(num(r["gain"])) else UNDEFINED,
             fmt_len(r["rates_measured"])] for _, r in cap.iterrows()]
    return [Heading("Capacity under the SLO"),
            Table(["variant", "SLO", "capacity req/s [95%]", "status", "gain vs baseline", "rates"], rows,
                  caption="capacity.csv", numeric=frozenset({2, 4, 5}))]


def points_section(data: RunData) -> list[Block]:
    pts = data.open_loop
    if not len(pts):
        return []
    rows = []
    for _, r in pts.iterrows():
        sat = "SATURATED (" + str(r["saturation_reason"]) + ")" if r["saturated"] else "no"
        rows.append([str(r["variant"]), fmt(r["rate"], 3), fmt(r["offered_req_s"]), fmt(r["achieved_req_s"]), sat,
                     fmt(r["ttft_p50_s"], 3), fmt(r["ttft_p90_s"], 3), fmt(r["ttft_p99_s"], 3),
                     fmt(num(r["tpot_p50_s"]) * 1000, 1),
                     fmt_pct(r["attainment"]),
                     fmt_interval(r["goodput_req_s"], r["goodput_req_s_ci_low"], r["goodput_req_s_ci_high"]),
                     fmt_interval(r["goodput_tok_s"], r["goodput_tok_s_ci_low"], r["goodput_tok_s_ci_high"], 1),
                     f"{fmt(num(r['send_lag_p50_s']) * 1000, 2)} / {fmt(num(r['send_lag_p99_s']) * 1000, 2)}",
                     f"{fmt_len(r['n_requests'])}/{fmt_len(r['n_errors'])}"])
    cols = ["variant", "rate req/s", "offered", "achieved", "saturated", "TTFT p50 s", "TTFT p90 s", "TTFT p99 s",
            "TPOT p50 ms", "attainment", "goodput req/s", "good tok/s", "send error p50/p99 ms", "req/err"]
    lags = pd.to_numeric(pts["send_lag_p99_s"], errors="coerce")
    note = (f"Send-time error (actual - planned send, specbench's own timing): worst p99 over rates "
            f"{fmt(lags.max() * 1000, 2)} ms. A saturated rate is not a steady state: its latencies only say "
            "the server fell behind.")
    return [Heading("Open-loop points"),
            Table(cols, rows, caption=f"open_loop.csv ({len(rows)} rows)", numeric=frozenset(range(1, 14)) - {4}),
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
    slo = data.config.get("slo") or {}
    slos = ", ".join(f"{k} {m} <= {v:g} s" for m, ps in slo.items() for k, v in ps.items()) or "none"
    return Paragraph([f"Open loop: requests sent at their planned times ({arrival}) whatever is in flight "
                      f"(safety cap {load.get('max_in_flight', '-')}), {load.get('requests_per_rate', '-')} "
                      f"measured requests per rate after {load.get('warmup_requests', '-')} warmup requests; "
                      f"the same schedule for every variant. SLOs: {slos}."])


def open_loop_sections(data: RunData, *, plots: bool = True) -> list[Block]:
    """Everything the report says about an open-loop run, in reading order."""
    return ([open_loop_context(data)] + slo_verdict(data) + (slo_plots(data) if plots else [])
            + capacity_section(data) + points_section(data))

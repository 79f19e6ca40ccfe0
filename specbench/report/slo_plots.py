"""The open-loop plots as PNG bytes (open_loop.csv and capacity.csv frames): latency percentiles vs offered
rate, goodput vs rate, capacity per variant. A saturated rate is drawn as a cross, off the line: its
latencies are no steady state. Each returns None when there is nothing to draw."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from specbench.report.plots import LEGEND_SIZE, figure_png, label, palette

PERCENTILES = (50, 90, 99)
STYLES = {50: "-", 90: "--", 99: ":"}


def _mean_curve(g: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Per rate, the mean over curves (categories, lengths) of `cols`; saturated if any of them is."""
    agg: dict[str, str] = {c: "mean" for c in cols}
    agg["saturated"] = "max"
    return g.groupby("rate", as_index=False).agg(agg).sort_values("rate")


def latency_vs_rate(points: pd.DataFrame, baseline: str = "") -> bytes | None:
    """Two panels (TTFT, TPOT): p50 solid, p90 dashed, p99 dotted per variant against offered rate."""
    if not len(points):
        return None
    colors = palette(points["variant"], baseline=baseline)
    fig = Figure(figsize=(10.4, 4.0), layout="constrained")
    ax_ttft, ax_tpot = fig.subplots(1, 2)  # own y axes: TPOT is orders of magnitude below TTFT
    for ax, metric, unit in ((ax_ttft, "ttft", "TTFT (s)"), (ax_tpot, "tpot", "TPOT (s)")):
        cols = [f"{metric}_p{q}_s" for q in PERCENTILES]
        for v, g in points.groupby("variant", sort=False):
            m = _mean_curve(g, cols)
            steady = m[~m["saturated"].astype(bool)]
            sat = m[m["saturated"].astype(bool)]
            for q, col in zip(PERCENTILES, cols):
                ax.plot(steady["rate"], steady[col], ls=STYLES[q], marker="o", ms=3, color=colors[str(v)],
                        label=label(f"{v} p{q}"))
                ax.plot(sat["rate"], sat[col], ls="none", marker="x", ms=6, color=colors[str(v)])
        ax.set_yscale("log")
        ax.set_xlabel("offered rate (req/s)")
        ax.set_ylabel(unit)
        ax.grid(True, alpha=0.3)
    ax_ttft.legend(fontsize=LEGEND_SIZE - 1, ncol=2)
    ax_ttft.set_title("TTFT percentiles (x: saturated)", fontsize=10)
    ax_tpot.set_title("TPOT percentiles (x: saturated)", fontsize=10)
    return figure_png(fig)


def goodput_vs_rate(points: pd.DataFrame, baseline: str = "") -> bytes | None:
    """Good requests/s per variant with its 95% band, and the offered rate as the y = x line."""
    if not len(points) or points["goodput_req_s"].isna().all():
        return None
    colors = palette(points["variant"], baseline=baseline)
    fig = Figure(figsize=(6, 3.8), layout="constrained")
    ax = fig.subplots()
    for v, g in points.groupby("variant", sort=False):
        m = _mean_curve(g, ["goodput_req_s", "goodput_req_s_ci_low", "goodput_req_s_ci_high"])
        ax.plot(m["rate"], m["goodput_req_s"], marker="o", ms=3.5, color=colors[str(v)], label=label(v))
        ax.fill_between(m["rate"], m["goodput_req_s_ci_low"], m["goodput_req_s_ci_high"], color=colors[str(v)],
                        alpha=0.18, linewidth=0)
        sat = m[m["saturated"].astype(bool)]
        ax.plot(sat["rate"], sat["goodput_req_s"], ls="none", marker="x", ms=7, color=colors[str(v)])
    top = float(points["rate"].max())
    ax.plot([0, top], [0, top], color="black", lw=1, ls="--", label="offered (all good)")
    ax.set_xlabel("offered rate (req/s)")
    ax.set_ylabel("goodput (good req/s)")
    ax.set_title("Goodput vs offered rate (x: saturated)", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=LEGEND_SIZE)
    return figure_png(fig)


def capacity_bars(capacity: pd.DataFrame, baseline: str = "") -> bytes | None:
    """Capacity per SLO (groups) and variant (bars): the bar at the estimate's crossing, the whisker from the
    highest rate decided met to the lowest decided missed (capacity.csv); hatched: no rate decided missed (at
    least the bar)."""
    have = len(capacity) and "capacity_offered_req_s" in capacity
    cap = capacity[capacity["capacity_offered_req_s"].notna()] if have else capacity.iloc[0:0]
    if not len(cap):
        return None
    slos = list(dict.fromkeys(cap["slo"]))
    variants = list(dict.fromkeys(capacity["variant"]))
    colors = palette(variants, baseline=baseline)
    fig = Figure(figsize=(max(5.0, 2.2 * len(slos) + 2), 3.6), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(1, len(variants))
    for i, v in enumerate(variants):
        g = cap[cap["variant"] == v].groupby("slo", sort=False).first().reindex(slos)
        x = np.arange(len(slos)) + i * width - 0.4 + width / 2
        met = g["capacity_offered_req_s"].to_numpy(float)
        cross = g["crossing_offered_req_s"].to_numpy(float)
        if "crossing_bound_offered_req_s" in g:  # no crossing inside the measured rates: the bar at the bound
            cross = np.where(np.isnan(cross), g["crossing_bound_offered_req_s"].to_numpy(float), cross)
        val = np.nan_to_num(np.where(np.isnan(cross), met, cross))
        lo = np.where(np.isnan(met), val, met)
        hi = np.where(np.isnan(g["missed_offered_req_s"].to_numpy(float)), val,
                      g["missed_offered_req_s"].to_numpy(float))
        bars = ax.bar(x, val, width, color=colors[str(v)], label=label(v))
        ax.vlines(x, lo, hi, color="black", lw=1.2)  # decided met .. decided missed (an open end: to the bar)
        for bar, status in zip(bars, g["status"].astype(str)):
            if status == "beyond_highest_rate":
                bar.set_hatch("//")
    ax.set_xticks(np.arange(len(slos)))
    ax.set_xticklabels([label(s) for s in slos], fontsize=8)
    ax.set_ylabel("capacity (offered req/s)")
    ax.set_title("Capacity under each SLO (whisker: met .. missed; hatched: at least)", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=LEGEND_SIZE)
    return figure_png(fig)

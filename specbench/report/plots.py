"""The report's plots as PNG bytes, from a normalized cells frame. Matplotlib's object API (no pyplot state).

Each function returns PNG bytes, or None when the run has nothing to draw. Curves are keyed by
category x input length x temperature and faceted by output length; with more than MAX_LINES curves per
panel, the panel shows the mean over them (and says so) instead of a tangle. A variant keeps one colour in
every figure (the baseline dark grey), and a curve keeps one colour in every panel of its figure.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from specbench.report.fmt import fmt_output_len, num

MAX_LINES = 6
DPI = 110
LEGEND_SIZE = 8
BASELINE_COLOR = "0.3"
Plot = tuple[str, bytes, str]  # title, png, alt text


def label(text: object) -> str:
    """Matplotlib text that shows as typed: no mathtext from `$`, no hidden legend entry from a leading `_`."""
    s = str(text).replace("$", r"\$")
    return "\u200b" + s if s.startswith("_") else s


def figure_png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def palette(names: Iterable[object], *, baseline: str = "") -> dict[str, str]:
    """One colour per name in order of first appearance (matplotlib's cycle); the baseline in dark grey."""
    others = [n for n in dict.fromkeys(map(str, names)) if n != baseline]
    return {baseline: BASELINE_COLOR} | {n: f"C{i % 10}" for i, n in enumerate(others)}


def _grid(nrows: int, ncols: int, *, w: float = 4.2, h: float = 3.0) -> tuple[Figure, list[list[Axes]]]:
    fig = Figure(figsize=(w * ncols, h * nrows + 0.4), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey="row")
    return fig, [list(r) for r in axes]


def log2_x(ax: Axes, levels: list[int]) -> None:
    if len(levels) > 1 and min(levels) > 0:
        ax.set_xscale("log", base=2)
    ax.set_xticks(levels)
    ax.set_xticklabels([str(c) for c in levels])
    ax.grid(True, alpha=0.3)


def _series_label(key: tuple, vary: list[str]) -> str:
    parts = dict(zip(("category", "input_len", "temperature"), key))
    names = {"category": str(parts["category"]),
             "input_len": "in -" if pd.isna(parts["input_len"]) else f"in {int(parts['input_len'])}",
             "temperature": f"t={parts['temperature']:g}"}
    return " ".join(names[k] for k in vary) or "all"


def _curves(df: pd.DataFrame, value: str, lo: str | None, hi: str | None) -> list[tuple[str, pd.DataFrame]]:
    """(label, frame with concurrency/value/lo/hi) per curve, or one mean curve when there are too many."""
    keys = ["category", "input_len", "temperature"]
    vary = [k for k in keys if df[k].nunique(dropna=False) > 1]
    groups = list(df.groupby(keys, dropna=False, sort=True))
    if len(groups) > MAX_LINES:
        mean = df.groupby("concurrency", as_index=False)[value].mean()
        return [(f"mean of {len(groups)} curves", mean.assign(_lo=np.nan, _hi=np.nan))]
    out = []
    for key, g in groups:
        g = g.sort_values("concurrency")
        out.append((_series_label(key, vary), g.assign(_lo=g[lo] if lo else np.nan, _hi=g[hi] if hi else np.nan)))
    return out


def _plot_curve(ax: Axes, curve: pd.DataFrame, value: str, name: str, color: str) -> None:
    """One curve of `_curves` (its `value` against concurrency) with its band (_lo, _hi) where known."""
    x, lo, hi = curve["concurrency"], curve["_lo"], curve["_hi"]
    ax.plot(x, curve[value], marker="o", ms=3.5, label=label(name), color=color)
    ok = lo.notna() & hi.notna()
    if ok.any():
        ax.fill_between(x[ok], lo[ok], hi[ok], color=color, alpha=0.18, linewidth=0)


def speedup_vs_concurrency(cells: pd.DataFrame, baseline: str) -> bytes | None:
    """One row per drafter, one column per output length: speedup with its 95% band, and the 1.0 line."""
    df = cells[(cells["variant"] != baseline) & cells["speedup"].notna()]
    if not len(df):
        return None
    drafters = list(dict.fromkeys(df["variant"]))
    outs = sorted(df["output_len"].dropna().unique())
    levels = sorted({int(c) for c in df["concurrency"].dropna()})
    panels = {(d, out): _curves(df[(df["variant"] == d) & (df["output_len"] == out)], "speedup", "speedup_ci_low",
                                "speedup_ci_high") for d in drafters for out in outs}
    colors = palette(name for curves in panels.values() for name, _ in curves)
    fig, axes = _grid(len(drafters), len(outs))
    for i, d in enumerate(drafters):
        for j, out in enumerate(outs):
            ax = axes[i][j]
            for name, g in panels[d, out]:
                _plot_curve(ax, g, "speedup", name, colors[name])
            ax.axhline(1.0, color="black", lw=1, ls="--", label="1.0 = baseline")
            log2_x(ax, levels)
            ax.set_title(label(f"{d} · output {fmt_output_len(out)}"), fontsize=10)
            if j == 0:
                ax.set_ylabel("speedup vs baseline")
            if i == len(drafters) - 1:
                ax.set_xlabel("concurrency")
            if panels[d, out]:
                ax.legend(fontsize=LEGEND_SIZE)
    return figure_png(fig)


def _mean_panels(df: pd.DataFrame, cols: list[str], h: float) -> tuple[Figure, list[tuple[Axes, pd.DataFrame]]]:
    """One titled panel per output length, each with its rows of per-variant means over categories."""
    outs = sorted(df["output_len"].dropna().unique())
    m = df.groupby(["variant", "output_len", "concurrency"], as_index=False, sort=True)[cols].mean()
    fig, axes = _grid(1, len(outs), h=h)
    for ax, out in zip(axes[0], outs):
        ax.set_title(f"output {fmt_output_len(out)} (mean over categories)", fontsize=10)
    return fig, [(ax, m[m["output_len"] == out]) for ax, out in zip(axes[0], outs)]


def throughput_vs_concurrency(cells: pd.DataFrame, baseline: str = "") -> bytes | None:
    """Aggregate output tok/s per variant (mean over categories), one panel per output length."""
    df = cells[cells["output_throughput_tok_s"].notna()]
    if not len(df):
        return None
    levels = sorted({int(c) for c in df["concurrency"].dropna()})
    colors = palette(cells["variant"], baseline=baseline)
    fig, panels = _mean_panels(df, ["output_throughput_tok_s"], h=3.4)
    for ax, m in panels:
        for v, g in m.groupby("variant", sort=False):
            ax.plot(g["concurrency"], g["output_throughput_tok_s"], marker="o", ms=3.5, label=label(v),
                    color=colors[str(v)])
        log2_x(ax, levels)
        ax.set_xlabel("concurrency")
        ax.legend(fontsize=LEGEND_SIZE)
    panels[0][0].set_ylabel("aggregate output tok/s")
    return figure_png(fig)


def latency_throughput(cells: pd.DataFrame, baseline: str = "") -> bytes | None:
    """Per-user tok/s against aggregate tok/s, one line per variant, points labelled by concurrency."""
    df = cells[cells["output_throughput_tok_s"].notna() & cells["per_user_tok_s"].notna()]
    if not len(df):
        return None
    colors = palette(cells["variant"], baseline=baseline)
    fig, panels = _mean_panels(df, ["output_throughput_tok_s", "per_user_tok_s"], h=3.6)
    for ax, m in panels:
        for v, g in m.groupby("variant", sort=False):
            ax.plot(g["output_throughput_tok_s"], g["per_user_tok_s"], marker="o", ms=3.5, label=label(v),
                    color=colors[str(v)])
            for _, r in g.iterrows():
                ax.annotate(f"c{int(r['concurrency'])}", (r["output_throughput_tok_s"], r["per_user_tok_s"]),
                            fontsize=7, xytext=(3, 3), textcoords="offset points", color=colors[str(v)])
        ax.margins(x=0.1, y=0.1)  # room for the concurrency labels at the ends
        ax.grid(True, alpha=0.3)
        ax.set_xlabel("aggregate output tok/s")
        ax.legend(fontsize=LEGEND_SIZE)
    panels[0][0].set_ylabel("per-user tok/s")
    return figure_png(fig)


def _positions(text: str) -> list[float]:
    """A per-position list from cells.csv: JSON (`[0.7, 0.5]`) or a Python repr with `nan`/`None`."""
    try:
        vals = json.loads(text) if text else []
    except ValueError:
        vals = [v.strip() for v in text.strip().strip("[]").split(",") if v.strip()]
    if not isinstance(vals, list):
        return []
    return [num(v) for v in vals]


def acceptance(cells: pd.DataFrame, baseline: str) -> bytes | None:
    """Left: acceptance length by category per drafter (whiskers: range over cells). Right: by draft position."""
    df = cells[(cells["variant"] != baseline)]
    by_cat = df[df["acceptance_length"].notna()]
    pos = {v: [p for p in (_positions(t) for t in g["acceptance_per_position"]) if not np.isnan(p).all()]
           for v, g in df.groupby("variant", sort=False)}
    pos = {v: p for v, p in pos.items() if p}
    if not len(by_cat) and not pos:
        return None
    colors = palette(cells["variant"], baseline=baseline)
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    cats = sorted(by_cat["category"].unique())
    drafters = list(dict.fromkeys(by_cat["variant"]))
    width = 0.8 / max(1, len(drafters))
    for i, d in enumerate(drafters):
        g = by_cat[by_cat["variant"] == d].groupby("category")["acceptance_length"]
        mean, lo, hi = g.mean().reindex(cats), g.min().reindex(cats), g.max().reindex(cats)
        x = np.arange(len(cats)) + i * width - 0.4 + width / 2
        err = [np.clip(np.nan_to_num(e.to_numpy(float)), 0, None) for e in (mean - lo, hi - mean)]
        # yerr as lists: matplotlib tests a row of a 2 x 1 array with math.isfinite (a NumPy DeprecationWarning)
        ax1.bar(x, mean.to_numpy(float), width, label=label(d), yerr=[e.tolist() for e in err], capsize=2,
                color=colors[str(d)])
    ax1.set_xticks(np.arange(len(cats)))
    ax1.set_xticklabels([label(c) for c in cats], rotation=20, ha="right", fontsize=8)
    ax1.set_ylabel("acceptance length (tokens/step)")
    ax1.set_title("By category (whiskers: range over cells)", fontsize=10)
    if drafters:
        ax1.legend(fontsize=LEGEND_SIZE)
    for d, lists in pos.items():
        n = max(len(p) for p in lists)
        arr = np.array([p + [math.nan] * (n - len(p)) for p in lists])
        ax2.plot(np.arange(1, n + 1), np.nanmean(arr, axis=0), marker="o", ms=3.5, label=label(d),
                 color=colors[str(d)])
    ax2.xaxis.get_major_locator().set_params(integer=True)
    ax2.set_xlabel("draft position")
    ax2.set_ylabel("fraction accepted at position")
    ax2.set_title("By draft position (mean over cells)", fontsize=10)
    ax2.grid(True, alpha=0.3)
    if pos:
        ax2.legend(fontsize=LEGEND_SIZE)
    else:
        ax2.text(0.5, 0.5, "no per-position data", ha="center", va="center", transform=ax2.transAxes)
    return figure_png(fig)


def acceptance_histogram(per_request: pd.DataFrame) -> bytes | None:
    """Per-request acceptance length (acceptance.csv), one panel per drafter, one step histogram per
    category; dashed lines mark each category's per-step (pooled) mean, the headline figure."""
    df = per_request[per_request["acceptance_length"].notna()] if "acceptance_length" in per_request else None
    if df is None or not len(df):
        return None
    drafters = list(dict.fromkeys(df["variant"]))
    cats = sorted(df["category"].astype(str).unique())
    colors = palette(cats)
    lo, hi = float(df["acceptance_length"].min()), float(df["acceptance_length"].max())
    bins = [float(b) for b in np.linspace(lo, hi if hi > lo else lo + 1.0, 21)]
    fig, axes = _grid(1, len(drafters), h=3.2)
    for ax, d in zip(axes[0], drafters):
        g = df[df["variant"] == d]
        for cat in cats:
            rows = g[g["category"].astype(str) == cat]
            if not len(rows):
                continue
            ax.hist(rows["acceptance_length"], bins=bins, histtype="step", lw=1.5, color=colors[cat],
                    label=label(f"{cat} (n={len(rows)})"))
            pooled = rows["output_tokens"].sum() / rows["verify_steps"].sum()
            ax.axvline(pooled, color=colors[cat], ls="--", lw=1)
        ax.set_title(label(f"{d}: per-request acceptance length"), fontsize=10)
        ax.set_xlabel("tokens per target step (one request)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=LEGEND_SIZE)
    axes[0][0].set_ylabel("requests")
    return figure_png(fig)


def all_figures(cells: pd.DataFrame, *, baseline: str) -> list[Plot]:
    """Every plot the run has data for, in report order."""
    if not len(cells):
        return []
    specs = [
        ("Speedup vs concurrency", speedup_vs_concurrency(cells, baseline),
         "Speedup over the baseline against concurrency per drafter, 95% bands, dashed line at 1.0"),
        ("Aggregate throughput vs concurrency", throughput_vs_concurrency(cells, baseline),
         "Aggregate output tokens per second against concurrency for every variant"),
        ("Latency-throughput trade-off", latency_throughput(cells, baseline),
         "Per-user tokens per second against aggregate tokens per second, one line per variant"),
        ("Acceptance length", acceptance(cells, baseline),
         "Acceptance length by category and by draft position per drafter"),
    ]
    return [(t, png, alt) for t, png, alt in specs if png is not None]

"""The report's "Why it pays or not" section, from decomposition.csv: per drafter, acceptance length AL,
step-cost ratio r and residual against concurrency (a plot), one sentence per level naming the factor that
decides it, and the cells' terms in a folded table. speedup = AL / r x residual (docs/metrics.md,
"Decomposition")."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.figure import Figure

from specbench.metrics.common import geometric_mean
from specbench.report.derived import RunData
from specbench.report.document import Block, Bullets, Heading, Image, Inline, Paragraph, Table
from specbench.report.fmt import fmt, fmt_len, fmt_output_len, fmt_pct, num
from specbench.report.plots import LEGEND_SIZE, figure_png, label, log2_x

TERMS = ("speedup", "acceptance_length", "step_cost_ratio", "residual", "break_even_acceptance_length",
         "prefill_share", "baseline_prefill_share")
LINES = (("acceptance_length", "AL (tokens/step)", "C0", "-"), ("step_cost_ratio", "r (step cost ratio)", "C3", "-"),
         ("residual", "residual", "C2", "-"), ("break_even_acceptance_length", "AL* = r / residual", "C0", ":"))


def _closed(data: RunData) -> pd.DataFrame:
    d = data.decomposition
    if not len(d) or "variant" not in d:
        return pd.DataFrame()
    d = d[d["rate"].isna()] if "rate" in d else d
    return d[d["variant"].astype(str).isin(data.drafters)]


def level_terms(d: pd.DataFrame) -> pd.DataFrame:
    """Per drafter x output length x concurrency: each term's geometric mean over the level's cells
    (categories, input lengths, temperatures; the product AL / r x residual still gives the speedup), the
    cells it pooled and the reasons of those left out (empty terms)."""
    rows = []
    for (v, out, c), g in d.groupby(["variant", "output_len", "concurrency"], sort=False):
        full = g[g["residual"].notna()]
        row = {"variant": v, "output_len": out, "concurrency": c, "cells": len(full),
               "reasons": sorted({str(x) for x in g.loc[g["residual"].isna(), "reason"].dropna() if str(x)})}
        row |= {t: geometric_mean(full[t]).value if len(full) else math.nan for t in TERMS}
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["variant", "output_len", "concurrency"], kind="stable")


def level_sentence(row: pd.Series | dict) -> str:
    """One level's sentence: the factor that decides whether the drafter pays there."""
    s, al, r, res = (num(row[k]) for k in ("speedup", "acceptance_length", "step_cost_ratio", "residual"))
    if math.isnan(res):
        return "terms unknown: " + ("; ".join(row["reasons"]) or "no decomposed cell")
    if s >= 1:
        return f"pays: {fmt(al)} tokens a step at {fmt(r)}x the step cost (residual {fmt(res)})."
    if al < r:
        return (f"a step costs {fmt(r)}x a plain step; {fmt(al)} accepted tokens cannot pay for it "
                f"(break-even {fmt(row['break_even_acceptance_length'])} tokens a step).")
    p, pb = num(row["prefill_share"]), num(row["baseline_prefill_share"])
    # prefill is named only where it is a larger share of the drafter's time than of the baseline's
    why = (f"prefill {fmt_pct(p, 0)} of the time vs {fmt_pct(pb, 0)} for the baseline, the window's tail, queueing"
           if p > pb else "the window's tail, queueing")
    return (f"{fmt(al)} tokens a step at {fmt(r)}x the step cost would give {fmt(al / r)}x; the residual {fmt(res)} "
            f"({why}) takes it below 1.0.")


def decomposition_plot(levels: pd.DataFrame) -> bytes | None:
    """One row per drafter, one column per output length: AL, r, residual and AL* against concurrency."""
    df = levels[levels["residual"].notna()]
    if not len(df):
        return None
    drafters = list(dict.fromkeys(df["variant"]))
    outs = sorted(df["output_len"].unique())
    fig = Figure(figsize=(4.4 * len(outs), 3.0 * len(drafters) + 0.4), layout="constrained")
    axes = fig.subplots(len(drafters), len(outs), squeeze=False)
    for i, d in enumerate(drafters):
        for j, out in enumerate(outs):
            ax, g = axes[i][j], df[(df["variant"] == d) & (df["output_len"] == out)]
            for col, name, color, style in LINES:
                ax.plot(g["concurrency"], g[col], marker="o", ms=3.5, color=color, ls=style, label=name)
            ax.axhline(1.0, color="black", lw=1, ls="--")
            log2_x(ax, sorted({int(c) for c in df["concurrency"]}))
            ax.set_title(label(f"{d} · output {fmt_output_len(out)}"), fontsize=10)
            if i == len(drafters) - 1:
                ax.set_xlabel("concurrency")
            ax.legend(fontsize=LEGEND_SIZE)
    return figure_png(fig)


def _text(x: object) -> str:
    """A text column of decomposition.csv as read (an empty field is NaN)."""
    return x if isinstance(x, str) else ""


def _with_interval(row: pd.Series, col: str) -> str:
    """The term with its 95% interval over launches where decomposition.csv has one (`<col>_ci_low/_high`)."""
    lo, hi = (num(row.get(f"{col}_ci_{e}", math.nan)) for e in ("low", "high"))
    return fmt(row[col]) + (f" [{fmt(lo)}, {fmt(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else "")


def why_section(data: RunData, *, plots: bool = True) -> list[Block]:
    d = _closed(data)
    if not len(d):
        return []
    levels = level_terms(d)
    out: list[Block] = [Heading("Why it pays or not"), Paragraph([
        "Each speedup is AL / r x residual (decomposition.csv, docs/metrics.md \"Decomposition\"): AL the "
        "tokens a target step emits, r what a step costs in plain steps at the same point, the residual what "
        "prefill, the window's tail and queueing take or give. A level pools its cells' geometric means. "
        "The break-even acceptance AL* = r / residual."], "note")]
    png = decomposition_plot(levels) if plots else None
    if png is not None:
        out.append(Image("Acceptance, step cost and residual vs concurrency", png,
                         "Per drafter and output length: acceptance length, step-cost ratio, residual and "
                         "break-even acceptance against concurrency; dashed line at 1.0"))
    multi_out = levels["output_len"].nunique() > 1
    for v, g in levels.groupby("variant", sort=False):
        items: list[list[Inline]] = []
        for _, row in g.iterrows():
            length = f", output {fmt_output_len(row['output_len'])}" if multi_out else ""
            where = f"C={fmt_len(row['concurrency'])}{length}"
            speed = "" if math.isnan(num(row["speedup"])) else f" ({fmt(row['speedup'])}x)"
            items.append([f"{where}{speed}: {level_sentence(row)}"])
        out += [Heading(str(v), 3), Bullets(items)]
    cols = ["variant", "category", "output", "C", "speedup", "AL", "r", "residual", "AL*", "steps from", "why empty"]
    rows = [[str(r["variant"]), str(r["category"]), fmt_output_len(r["output_len"]), fmt_len(r["concurrency"]),
             fmt(r["speedup"]), fmt(r["acceptance_length"]), _with_interval(r, "step_cost_ratio"), fmt(r["residual"]),
             fmt(r["break_even_acceptance_length"]), _text(r["step_source"]), _text(r["reason"])]
            for _, r in d.iterrows()]
    out.append(Table(cols, rows, caption="Every drafter cell's terms", collapsed=True,
                     numeric=frozenset(range(2, 9))))
    return out

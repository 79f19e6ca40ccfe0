"""The measurement tables: speedup per level, break-even, acceptance and its distribution, every cell,
losslessness. RunData -> blocks."""

from __future__ import annotations

import pandas as pd

from specbench.report.derived import RunData
from specbench.report.document import Block, Bullets, Code, Heading, Paragraph, Strong, Table
from specbench.report.fmt import NOT_MEASURED, UNDEFINED, fmt, fmt_interval, fmt_len, fmt_output_len, fmt_span, fmt_temp


def _curve_label(row: pd.Series, vary: list[str]) -> list[str]:
    names = {"category": str(row["category"]), "input_len": fmt_len(row["input_len"]),
             "output_len": fmt_output_len(row["output_len"]), "temperature": fmt_temp(row["temperature"])}
    return [names[k] for k in vary]


def _ci(row: pd.Series, col: str, digits: int = 2, *, stem: str = "") -> str:
    """A cells column with its 95% interval, from the `<stem>_ci_low` / `<stem>_ci_high` columns (stem: col)."""
    stem = stem or col
    return fmt_interval(row[col], row[f"{stem}_ci_low"], row[f"{stem}_ci_high"], digits)


def _lengths(row: pd.Series) -> list[str]:
    """The first cells of a per-point row: variant, category, input and output length."""
    return [row["variant"], row["category"], fmt_len(row["input_len"]), fmt_output_len(row["output_len"])]


def _speedup_cell(row: pd.Series | None) -> str:
    if row is None:
        return ""
    text = _ci(row, "speedup")
    return text if row["valid"] else f"{text} †"


def speedup_tables(data: RunData) -> list[Block]:
    c = data.cells[data.cells["variant"].isin(data.drafters)]
    if not len(c):
        return []
    levels = sorted({int(x) for x in c["concurrency"].dropna()})
    keys = ["category", "input_len", "output_len", "temperature"]
    vary = [k for k in keys if k == "category" or c[k].nunique(dropna=False) > 1]
    out: list[Block] = [Heading("Speedup by concurrency"),
                        Paragraph(["Aggregate output-throughput speedup over the baseline, ",
                                   Code("value [95% interval]"),
                                   "; † marks an invalid cell (too many request errors).",
                                   *([f" {NOT_MEASURED}: not measured, above the variant's max_concurrency (see the "
                                      "Verdict note)."] if data.caps else [])], "note")]
    for variant, vc in c.groupby("variant", sort=False):
        rows = []
        for _, curve in vc.groupby(keys, dropna=False, sort=True):
            by_c = {int(r["concurrency"]): r for _, r in curve.iterrows()}
            rows.append(_curve_label(curve.iloc[0], vary) + [
                NOT_MEASURED if lv not in by_c and data.not_measured(str(variant), lv) else _speedup_cell(by_c.get(lv))
                for lv in levels])
        cols = [k.replace("_", " ") for k in vary] + [f"c={lv}" for lv in levels]
        out += [Heading(str(variant), 3),
                Table(cols, rows, numeric=frozenset(range(len(vary), len(cols))))]
    return out


def break_even_table(data: RunData) -> list[Block]:
    be = data.break_even
    if not len(be):
        return []
    rows = [_lengths(r) + [fmt_temp(r["temperature"]), fmt(r["break_even_concurrency"], 1),
                           r["status"].replace("_", " "), r["verdict"]] for _, r in be.iterrows()]
    return [Heading("Break-even concurrency"),
            Table(["variant", "category", "input", "output", "temp", "break-even c", "status", "verdict"], rows,
                  numeric=frozenset({2, 3, 4, 5}))]


def acceptance_table(data: RunData) -> list[Block]:
    c = data.cells[data.cells["variant"].isin(data.drafters) & data.cells["acceptance_length"].notna()]
    if not len(c):
        return [Heading("Acceptance length"), Paragraph(["No acceptance data in this run."], "note")]
    rows: list[list[str]] = []
    for (variant, cat), g in c.groupby(["variant", "category"], sort=False):
        a = g["acceptance_length"]
        src = ", ".join(sorted({s for s in g["acceptance_source"] if s})) or UNDEFINED
        rows.append([str(variant), str(cat), fmt(a.mean()), fmt_span(a.min(), a.max()),
                     fmt(g["acceptance_rate"].mean()), str(len(g)), src])
    return [Heading("Acceptance length by category"),
            Paragraph(["Tokens produced per target verification step, as defined in docs/metrics.md; "
                       "mean and range over the category's cells."], "note"),
            Table(["variant", "category", "acceptance length", "range", "acceptance rate", "cells", "source"],
                  rows, numeric=frozenset({2, 3, 4, 5}))]


def acceptance_distribution(data: RunData) -> list[Block]:
    """Per category: the per-step (headline) and per-request means, the spread across requests, and whether
    the per-request figures added up to the engine's counters in every checked window."""
    a = data.acceptance
    if not len(a) or "acceptance_length" not in a:
        return []
    a = a[a["acceptance_length"].notna() & a["variant"].isin(data.drafters)]
    c = data.cells
    rows = []
    for (variant, cat), g in a.groupby(["variant", "category"], sort=True):
        cc = c[(c["variant"] == variant) & (c["category"] == cat)]
        checked, bad = cc["acceptance_windows_checked"].sum(), cc["acceptance_windows_mismatched"].sum()
        recon = "not checked" if not checked else (f"{fmt_len(checked)} windows agree" if not bad else
                                                   f"{fmt_len(bad)} of {fmt_len(checked)} windows differ")
        x = g["acceptance_length"]
        # per-step mean = sum(tokens) / sum(target steps): long outputs weigh by their steps
        rows.append([str(variant), str(cat), str(len(g)), fmt(g["output_tokens"].sum() / g["verify_steps"].sum()),
                     fmt(x.mean()), fmt(x.quantile(0.1)), fmt(x.median()), fmt(x.quantile(0.9)), recon])
    if not rows:
        return []
    return [Heading("Acceptance distribution"),
            Paragraph(["From each request's own speculative figures (acceptance.csv). The per-step mean is the "
                       "headline (the acceptance length above): tokens over target steps pooled over all "
                       "requests, so a long output counts once per step, as it does in throughput. The "
                       "per-request mean gives every request the same weight; p10-p90 is the spread across "
                       "requests. Counters: whether the per-request figures add up to the engine's counter "
                       "deltas in every window (docs/metrics.md)."], "note"),
            Table(["variant", "category", "requests", "per-step mean", "per-request mean", "p10", "p50", "p90",
                   "counters"], rows, numeric=frozenset({2, 3, 4, 5, 6, 7}))]


def cell_table(data: RunData) -> list[Block]:
    c = data.cells
    if not len(c):
        return []
    rows = [_lengths(r) + [fmt_len(r["concurrency"]), fmt_temp(r["temperature"]), "yes" if r["valid"] else "NO",
                           f"{fmt_len(r['n_requests'])}/{fmt_len(r['n_errors'])}",
                           _ci(r, "output_throughput_tok_s", 1, stem="output_throughput"), _ci(r, "per_user_tok_s", 1),
                           fmt(r["ttft_p50_s"], 3), fmt(r["tpot_p50_s"] * 1000, 1), fmt(r["acceptance_length"]),
                           _ci(r, "speedup"), fmt(r["lossless_match_rate"]), r["warnings"].replace(";", ", ")]
            for _, r in c.iterrows()]
    cols = ["variant", "category", "in", "out", "c", "temp", "valid", "req/err", "throughput tok/s",
            "per-user tok/s", "TTFT p50 s", "TPOT p50 ms", "accept len", "speedup", "lossless", "warnings"]
    return [Heading("All cells"),
            Table(cols, rows, caption=f"Full cell table ({len(rows)} rows; cells.csv has every column)",
                  collapsed=True, numeric=frozenset({2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14}))]


def lossless_section(data: RunData) -> list[Block]:
    c = data.cells[data.cells["variant"].isin(data.drafters)]
    out: list[Block] = [Heading("Losslessness"), Paragraph([
        "At temperature 0 each drafter's output tokens are compared with the baseline's for the same prompt: "
        "match = share of requests whose output equals the baseline's in the same cell; any-match = share equal "
        "to the baseline's output for that prompt at any concurrency; prefix = mean share of the output before "
        "the first difference (1.0 = identical). The baseline's own output can change with batch shape "
        "(floating-point reduction order differs between kernels), so a mismatch that still equals another "
        "baseline output is numerics, not the drafter. An output that matches no baseline output at "
        "concurrency 1 is a red flag."], "note")]
    c = c[c["lossless_match_rate"].notna()]
    if not len(c):
        return out + [Paragraph(["No losslessness data (no temperature-0 cells with comparable outputs)."], "note")]
    has_any = "lossless_any_match_rate" in c
    rows: list[list[str]] = []
    for (variant, conc), g in c.groupby(["variant", "concurrency"], sort=True):
        any_match = fmt(g["lossless_any_match_rate"].mean(), 3) if has_any else UNDEFINED
        rows.append([str(variant), fmt_len(conc), fmt(g["lossless_match_rate"].mean(), 3),
                     fmt(g["lossless_match_rate"].min(), 3), any_match, fmt(g["lossless_prefix_mean"].mean(), 3)])
    out.append(Table(["variant", "concurrency", "match rate (mean)", "match rate (worst cell)", "any-match rate",
                      "prefix mean"], rows, numeric=frozenset({1, 2, 3, 4, 5})))
    lowest = c["concurrency"].min()
    # the any-match rate where known (older runs lack it), else the same-cell match rate
    unexplained = (c["lossless_any_match_rate"].fillna(c["lossless_match_rate"]) if has_any
                   else c["lossless_match_rate"])
    bad = c[(c["concurrency"] == 1) & (unexplained < 1.0)]
    numerics = c[(c["lossless_match_rate"] < 1.0) & (unexplained >= 1.0)]
    if len(bad):
        out.append(Bullets([[Strong("divergence at concurrency 1:"), " ", Code(f"{r['variant']} {r['point_id']}"),
                             f" match rate {fmt(r['lossless_match_rate'], 3)}, any-match "
                             f"{fmt(unexplained.get(i), 3)}"] for i, r in bad.iterrows()], "bad"))
    elif lowest == 1:
        out.append(Paragraph(["At concurrency 1 every drafter output equals a baseline output for the same "
                              "prompt."], "good"))
    if len(numerics):
        out.append(Paragraph([f"{len(numerics)} cell(s) differ from the same-cell baseline output only by batch "
                              "numerics: each differing output equals the baseline's output for the same prompt "
                              "at another concurrency."], "note"))
    return out

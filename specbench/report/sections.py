"""The report's sections, one builder each: RunData -> blocks, in the order `build_document` lays them out."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from ..hardware import check_saved
from ..metrics.warnings import warning_rows
from .document import Block, Bullets, Code, Heading, Image, Paragraph, Strong, Table, Tone
from .fmt import UNDEFINED, fmt, fmt_interval, fmt_len, fmt_span, fmt_temp, num
from .load import RunData
from .verdict import drafter_verdict

def _when(created: Any) -> str:
    v = num(created)
    if not math.isnan(v):
        return datetime.fromtimestamp(v, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return str(created or "unknown date")


def _model_name(data: RunData) -> str:
    m = data.config.get("model") or {}
    return str(data.environment.get("model") or m.get("served_name") or m.get("path")
               or (f"demo:{m['demo']}" if m.get("demo") else "") or "unknown model")


def _gpus(env: dict[str, Any]) -> str:
    names = [str(g.get("name", g)) if isinstance(g, dict) else str(g) for g in env.get("gpus") or []]
    if not names:
        return "no GPU"
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return ", ".join(f"{k} ×{c}" if c > 1 else k for k, c in counts.items())


def _levels(values: Iterable[Any], digits: int = 0) -> str:
    vals = sorted({v for v in map(num, values) if not math.isnan(v)})
    return ", ".join(f"{v:.{digits}f}" if digits else str(int(v)) for v in vals) or "-"


def context(data: RunData) -> Paragraph:
    env, c = data.environment, data.cells
    engine = env.get("engine") or {}
    eng = f"{engine.get('kind') or 'unknown engine'} {engine.get('version') or '(version unknown)'}"
    hw = f"{env.get('cpu') or 'unknown CPU'}, {_gpus(env)}" + (f" on {env['host']}" if env.get("host") else "")
    drafters = ", ".join(data.drafters) or "none"
    text = (f"{_model_name(data)} served by {eng} on {hw}, measured {_when(data.meta.get('created'))}. "
            f"Baseline {data.baseline or '(unknown)'} against drafters {drafters}. ")
    if len(c):
        repeats = fmt_len(c["repeats"].max())
        categories = ", ".join(sorted(c["category"].unique()))
        text += (f"Each cell is one variant at one sweep point: categories {categories}; "
                 f"output lengths {_levels(c['output_len'])}; concurrency {_levels(c['concurrency'])}; "
                 f"temperature {_levels(c['temperature'], 1)}; "
                 f"up to {repeats} repeat{'' if repeats == '1' else 's'} per cell, "
                 f"{fmt_len(c['n_requests'].sum())} measured requests. Speedup is the drafter's aggregate output "
                 "throughput over the baseline's at the same point, with 95% bootstrap intervals in brackets.")
    else:
        text += "No cells were measured (cells.csv is missing or empty)."
    return Paragraph([text])


def verdict_section(data: RunData) -> list[Block]:
    items, tones = [], []
    for v in data.drafters:
        line, tone = drafter_verdict(data, v)
        items.append(line)
        tones.append(tone)
    if not items:
        return [Heading("Verdict"), Paragraph(["No drafter variants in this run: nothing to decide."], "warn")]
    overall: Tone = "bad" if all(t == "bad" for t in tones) else "verdict"
    return [Heading("Verdict"), Bullets(items, overall),
            Paragraph(["A concurrency level counts for a drafter when its speedup interval lies above 1.0 and "
                       "against it when the interval lies below; intervals that include 1.0 decide nothing."],
                      "note")]


def plot_section(data: RunData) -> list[Block]:
    from . import plots

    figs = plots.all_figures(data.cells, baseline=data.baseline)
    hist = plots.acceptance_histogram(data.acceptance)
    if hist is not None:
        figs.append(("Per-request acceptance", hist, "Histogram of per-request acceptance length per drafter "
                     "and category; dashed lines: per-step (pooled) means"))
    if not figs:
        return [Heading("Plots"), Paragraph(["No plots: there are no measured cells."], "warn")]
    return [Heading("Plots"), *(Image(title=t, png=png, alt=alt) for t, png, alt in figs)]


def _curve_label(row: pd.Series, vary: list[str]) -> list[str]:
    names = {"category": str(row["category"]), "input_len": fmt_len(row["input_len"]),
             "output_len": fmt_len(row["output_len"]), "temperature": fmt_temp(row["temperature"])}
    return [names[k] for k in vary]


def _ci(row: pd.Series, col: str, digits: int = 2, *, stem: str = "") -> str:
    """A cells column with its 95% interval, from the `<stem>_ci_low` / `<stem>_ci_high` columns (stem: col)."""
    stem = stem or col
    return fmt_interval(row[col], row[f"{stem}_ci_low"], row[f"{stem}_ci_high"], digits)


def _lengths(row: pd.Series) -> list[str]:
    """The first cells of a per-point row: variant, category, input and output length."""
    return [row["variant"], row["category"], fmt_len(row["input_len"]), fmt_len(row["output_len"])]


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
                        Paragraph(["Aggregate output-throughput speedup over the baseline, ", Code("value [95% interval]"),
                                   "; † marks an invalid cell (too many request errors)."], "note")]
    for variant, vc in c.groupby("variant", sort=False):
        rows = []
        for _, curve in vc.groupby(keys, dropna=False, sort=True):
            by_c = {int(r["concurrency"]): r for _, r in curve.iterrows()}
            rows.append(_curve_label(curve.iloc[0], vary) + [_speedup_cell(by_c.get(lv)) for lv in levels])
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


def fairness_section(data: RunData) -> list[Block]:
    f = data.fairness
    out: list[Block] = [Heading("Fairness audit")]
    if f is None:
        return out + [Paragraph(["No fairness audit in this run (fairness.json is missing)."], "warn")]
    ok = bool(f.get("ok"))
    out.append(Paragraph(["All variants share the pinned launch settings; only the drafter differs." if ok else
                          "The variants' launch settings differ beyond the drafter: the comparison may be unfair."],
                         "good" if ok else "bad"))
    diffs = f.get("differences") or []
    if diffs:
        out.append(Table(["setting", "variants", "values"],
                         [[str(d.get("what", "")), _text(d.get("variants")), _text(d.get("values"))] for d in diffs],
                         caption="Differences"))
    pinned = f.get("pinned") or {}
    if pinned:
        out.append(Table(["flag", "value"], [[str(k), _text(v)] for k, v in pinned.items()],
                         caption="Pinned for every variant"))
    notes = [str(n) for n in f.get("notes") or []]
    if notes:
        out.append(Bullets([[n] for n in notes], "note"))
    return out


def hardware_section(data: RunData) -> list[Block]:
    """Which node served which variant, and whether their fingerprints allow comparing them."""
    env = data.environment
    nodes: dict[str, dict[str, Any]] = env.get("nodes") or {}
    placement: dict[str, list[str]] = env.get("variant_nodes") or {}
    if not nodes:
        return []
    result = check_saved(env, data.config, data.baseline)
    out: list[Block] = [Heading("Hardware")]
    if not result.mismatched:
        out.append(Paragraph([f"Every variant was measured on hardware with the same fingerprint "
                              f"({len(nodes)} node{'s' if len(nodes) != 1 else ''})."], "good"))
    elif result.allowed:
        out.append(Paragraph([Strong("Compared across unlike hardware"), " (scheduler.allow_mixed_hardware: true): "
                              "these speedups mix the drafter with the hardware."], "warn"))
        out.append(Bullets([[Code(v), f": {why}"] for v, why in result.mismatched.items()], "warn"))
    else:
        out.append(Paragraph([Strong("Speedups withheld"), " for variants measured on hardware unlike the "
                              "baseline's: measure them on nodes like the baseline's, or set "
                              "scheduler.allow_mixed_hardware: true to compare anyway."], "bad"))
        out.append(Bullets([[Code(v), f": {why}"] for v, why in result.mismatched.items()], "bad"))
    served: dict[str, list[str]] = {}
    for variant, names in placement.items():
        for n in names:
            served.setdefault(n, []).append(variant)
    rows = [[name, ", ".join(served.get(name, [])), _text(fp.get("cpu")), _text(fp.get("gpu_model")) or "no GPU",
             _text(fp.get("gpu_count")), _text(fp.get("cuda")), _text(fp.get("driver")),
             _text(fp.get("engine_version"))] for name, fp in nodes.items()]
    out.append(Table(["node", "variants", "CPU", "GPU", "GPUs", "CUDA", "driver", "engine"], rows,
                     caption="Node fingerprints (environment.json has the GPU topology too)"))
    return out


def _text(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_text(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_text(x) for x in v)
    return "" if v is None else str(v)


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


def warnings_section(data: RunData) -> list[Block]:
    run_w = [str(w) for w in data.meta.get("warnings") or []]
    rows = sorted(warning_rows(data.cells.to_dict("records")), key=lambda w: w.code)
    out: list[Block] = [Heading("Warnings")]
    if not run_w and not rows:
        return out + [Paragraph(["None."], "good")]
    if run_w:
        out.append(Bullets([[w] for w in run_w], "warn"))
    if rows:
        out.append(Table(["cell warning", "cells", "examples", "measured (first cell)", "remedy"],
                         [[w.code, str(len(w.cells)),
                           ", ".join(w.cells[:3]) + (f" (+{len(w.cells) - 3} more)" if len(w.cells) > 3 else ""),
                           w.detail or UNDEFINED, w.remedy or UNDEFINED] for w in rows],
                         numeric=frozenset({1})))
    return out


def status_section(data: RunData) -> list[Block]:
    rows = []
    for name, v in data.variants.items():
        status = str(v.get("status") or "unknown")
        note = ""
        if status == "failed":
            note = str(v.get("reason") or "no reason recorded")
        elif status == "reused":
            note = f"reused from run {v.get('reused_from') or '(unknown)'}, not measured again"
        elif v.get("reason"):
            note = str(v["reason"])
        rows.append([name + (" (baseline)" if name == data.baseline else ""), str(v.get("drafter") or ""), status,
                     fmt(v.get("wall_s"), 0), fmt(v.get("startup_s"), 0), note])
    return [Heading("Variants"), Table(["variant", "drafter", "status", "wall s", "startup s", "note"], rows,
                                       numeric=frozenset({3, 4}))]


def environment_section(data: RunData) -> list[Block]:
    env = data.environment
    if not env:
        return [Heading("Environment"), Paragraph(["environment.json is missing."], "warn")]
    engine = env.get("engine") or {}
    rows = [["host", _text(env.get("host"))], ["platform", _text(env.get("platform"))],
            ["CPU", _text(env.get("cpu"))], ["GPUs", _gpus(env)], ["python", _text(env.get("python"))],
            ["engine", f"{engine.get('kind', '')} {engine.get('version') or '(version unknown)'}"],
            ["specbench", _text(env.get("specbench_version"))]]
    rows += [[f"drafter {k}", _text(v)] for k, v in (env.get("drafters") or {}).items()]
    known = {"host", "platform", "cpu", "gpus", "python", "engine", "specbench_version", "drafters", "nodes",
             "variant_nodes"}  # the last two: the Hardware section
    rows += [[k, _text(v)] for k, v in env.items() if k not in known]
    return [Heading("Environment"), Table(["item", "value"], rows)]

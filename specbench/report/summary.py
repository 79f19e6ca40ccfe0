"""What the run concluded and how sure it is: the context line, the verdict, the gates, the plots,
the intervals' methods and the variance decomposition. RunData -> blocks."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from specbench.config import DEFAULT_MIN_SPEEDUP
from specbench.report.audits import gpus_text
from specbench.report.decisions import legend, undecided_advice, verdict_table
from specbench.report.derived import RunData
from specbench.report.document import Block, Bullets, Details, Heading, Image, Inline, Paragraph, Strong, Table, Tone
from specbench.report.fmt import fmt_len, fmt_output_len, fmt_pct, num
from specbench.report.opening import opening_lines
from specbench.report.verdict import drafter_verdict


def _when(created: Any) -> str:
    v = num(created)
    if not math.isnan(v):
        return datetime.fromtimestamp(v, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    return str(created or "unknown date")


def _model_name(data: RunData) -> str:
    m = data.config.get("model") or {}
    return str(data.environment.get("model") or m.get("served_name") or m.get("path")
               or (f"demo:{m['demo']}" if m.get("demo") else "") or "unknown model")


def _levels(values: Iterable[Any], digits: int = 0) -> str:
    vals = sorted({v for v in map(num, values) if not math.isnan(v)})
    return ", ".join(f"{v:.{digits}f}" if digits else str(int(v)) for v in vals) or "-"


def _out_levels(values: Iterable[Any]) -> str:
    vals = sorted({v for v in map(num, values) if not math.isnan(v)})
    return ", ".join(fmt_output_len(v) for v in vals) or "-"


def context(data: RunData) -> Paragraph:
    env, c = data.environment, data.cells
    engine = env.get("engine") or {}
    eng = f"{engine.get('kind') or 'unknown engine'} {engine.get('version') or '(version unknown)'}"
    hw = f"{env.get('cpu') or 'unknown CPU'}, {gpus_text(env)}" + (f" on {env['host']}" if env.get("host") else "")
    if env.get("server_hardware"):  # an external endpoint: what was collected here is the client
        hw = f"hardware {env['server_hardware']}, measured from a client ({hw})"
    drafters = ", ".join(data.drafters) or "none"
    text = (f"{_model_name(data)} served by {eng} on {hw}, measured {_when(data.meta.get('created'))}. "
            f"Baseline {data.baseline or '(unknown)'} against drafters {drafters}. ")
    if len(c):
        repeats = fmt_len(c["repeats"].max())
        categories = ", ".join(sorted(c["category"].unique()))
        text += (f"Each cell is one variant at one sweep point: categories {categories}; "
                 f"output lengths {_out_levels(c['output_len'])}; concurrency {_levels(c['concurrency'])}; "
                 f"temperature {_levels(c['temperature'], 1)}; "
                 f"up to {repeats} repeat{'' if repeats == '1' else 's'} per cell, "
                 f"{fmt_len(c['n_requests'].sum())} measured requests. Speedup is the drafter's aggregate output "
                 "throughput over the baseline's at the same point, with 95% t intervals in brackets (Welch on the log "
                 "ratio; units: launches, else repeats; see the Intervals note).")
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
    table = verdict_table(data)
    more: list[list[Inline]] = [[Strong(v), f": {advice}."] for v in data.drafters
                                 if (advice := undecided_advice(data, v, _min_speedup(data)))]
    history: list[list[Inline]] = [[note] for note in data.history_notes]
    changed = settings_note(data)
    return [Heading("Verdict"), *([Paragraph([changed], "warn")] if changed else []),
            *([table] if table is not None else []), Bullets(items, overall),
            *([Bullets(more, "note")] if more else []), *([Bullets(history, "warn")] if history else []),
            Details(HOW_TO_READ, [Paragraph([reading_note(data)], "note")])]


HOW_TO_READ = "How to read this"


def reading_note(data: RunData) -> str:
    """The verdict's definitions: the outcomes, the gates, the table's and the lines' families."""
    m = _min_speedup(data)
    return (f"A concurrency level counts for a drafter when the low end of its speedup interval clears {m:g} "
            f"(verdict.min_speedup: the smallest gain worth a drafter), as no practical difference when the "
            f"interval lies inside [{1 / m:.3f}, {m:g}], and against it when the whole interval lies below 1.0; "
            "anything else decides nothing yet. Each is a one-sided test at 2.5% on the same 95% interval. A "
            "sanity gate that fired (drafter inactive, degenerate workload, unknown acceptance, eager GPU engine, "
            "GPU drift) overrules a win. " + legend(data) + _sequential_note(data))


def opening(data: RunData) -> list[Block]:
    """The report's first block: one sentence per drafter (report/opening.py), none without a primary table."""
    lines = opening_lines(data)
    return [Bullets(lines, "verdict")] if lines else []


def settings_note(data: RunData) -> str:
    """Where the verdict settings differ from those run.json recorded at the start: say so ("" otherwise).
    They are outside the config hash, so a report can be re-rendered with a margin chosen after the data."""
    started = data.meta.get("verdict") or {}
    now = _min_speedup(data)
    if "min_speedup" not in started or float(started["min_speedup"]) == now:
        return ""
    return (f"This verdict uses verdict.min_speedup {now:g}; the run was started with "
            f"{float(started['min_speedup']):g} (run.json). The verdict settings are outside the config hash: "
            "a margin chosen after seeing the data "
            "changes the verdict, not the measurements.")


def _sequential_note(data: RunData) -> str:
    sweep = data.config.get("sweep") or {}
    if sweep.get("until") != "decided":
        return ""
    k = int(sweep.get("max_launches") or 10) - int(sweep.get("launches") or 1) + 1
    return (f" Sequential run (sweep.until: decided): launches were added where points were undecided, so each "
            f"speedup interval is drawn at 2.5% / {k} per side (alpha spent over {k} looks), which keeps every "
            "outcome's error rate at most 2.5% however many looks the run took.")


def _min_speedup(data: RunData) -> float:
    return float((data.config.get("verdict") or {}).get("min_speedup") or DEFAULT_MIN_SPEEDUP)


INTERVAL_METHODS = [  # (figure, method): each printed 95% interval and what produces it (decide/stats.py)
    ("speedup, per-user speedup", "Welch t on the log ratio of the unit means (delta method), Welch-Satterthwaite "
                                  "df; variant and baseline are independent samples (no pairing)"),
    ("output throughput", "Student t on the log of the mean of the unit throughputs (delta method, n - 1 df), "
                          "mapped back: always positive"),
    ("per-user speed", "Student t on the log of the mean of the unit means of per-request speed, centred on the "
                       "mean over requests"),
    ("TPOT p50", "Student t on the log of the mean of the unit medians of per-request TPOT, centred on the median "
                 "over requests"),
    ("acceptance length", "ratio estimator sum(tokens) / sum(target steps) over units, t with n - 1 df on the log "
                          "scale"),
]


def intervals_section(data: RunData) -> list[Block]:
    """Which method produced each interval, and what this run used as independent units."""
    c = data.cells
    if not len(c):
        return []
    units = c["interval_unit"].replace("", "repeat") if "interval_unit" in c else pd.Series(["repeat"] * len(c))
    counts = units.value_counts()
    described = {"launch": "launches (each launch's mean is one unit)", "repeat": "repeats inside one launch",
                 "repeat+calibration": "repeats inside one launch plus the calibrated between-launch variance",
                 "history": "none measured: the variance history's pooled launch and repeat components",
                 "launch+history": "launches, their variance pooled with the variance history's (df add up)"}
    used = "; ".join(f"{n} cell(s): {described.get(str(u), str(u))}" for u, n in counts.items())
    return [Heading("Intervals"),
            Table(["figure", "95% interval"], [list(m) for m in INTERVAL_METHODS]),
            Paragraph([f"Units in this run: {used}. Coverage of each method at 3, 5 and 10 units is simulated by "
                       "benchmarks/interval_coverage.py (table in docs/metrics.md). Fewer than 2 units: no "
                       "interval."], "note")]


def variance_section(data: RunData) -> list[Block]:
    """Variance at each level (Kalibera & Jones 2013): between launches, between repeats inside a launch,
    between requests inside a window; medians over each variant's cells, as coefficients of variation."""
    c = data.cells
    if not len(c) or "launch_cv" not in c:
        return []
    rows = []
    for variant, vc in c.groupby("variant", sort=False):
        cal = set(vc["interval_unit"]) <= {"repeat+calibration", "history"}
        launch = fmt_pct(vc["launch_cv"].median()) + (" (calibration)" if cal else "")
        rows.append([str(variant), fmt_len(vc["launches"].max()), fmt_len(vc["repeats"].max()), launch,
                     fmt_pct(vc["repeat_cv"].median()), fmt_pct(vc["request_cv"].median())])
    return [Heading("Variance by level"),
            Table(["variant", "launches", "windows per cell", "between launches", "between repeats",
                   "between requests"], rows, numeric=frozenset(range(1, 6))),
            Paragraph(["Coefficients of variation of output throughput (requests: per-user speed), medians over "
                       "cells; between launches is the two-level estimate sqrt(S1² - S2²/n) / mean. Spend "
                       "repetitions "
                       "where the variance is: when launches vary more than repeats, more launches (sweep.launches) "
                       "narrow the speedup interval and more repeats do not."], "note")]


def drift_section(data: RunData) -> list[Block]:
    """The baseline's launch means against time (launch_drift.csv), the launch order, and a warning when
    they trend (metrics.drift.trend: slope t test over launch index)."""
    from specbench.metrics.drift import DRIFT_ALPHA, trend

    d = data.drift
    if not len(d):
        return []
    d = d.sort_values("launch")
    rows = [[fmt_len(r["launch"]), f"{float(r['start_s']) / 60:.1f}", fmt_len(r["windows"]),
             f"{float(r['effect']):.3f}"] for _, r in d.iterrows()]
    order = str(data.meta.get("launch_order") or "interleaved")
    said = ("counterbalanced (ABBA: each round reverses the one before)" if order == "abba"
            else "interleaved (A B A B, a run started before ABBA)")
    blocks: list[Block] = [Heading("Drift over the run"),
                           Table(["baseline launch", "started (min)", "windows", "relative speed"], rows,
                                 numeric=frozenset(range(4)))]
    t = trend([float(x) for x in d["effect"]])
    test = (f"slope {100 * t.slope:+.1f}% per launch, t = {t.t:.2f} on {t.df} df, p = {t.p:.2g}"
            if math.isfinite(t.p) else "fewer than 3 launches: no trend test")
    if t.trending:
        blocks.append(Bullets([[Strong("drift"), f": the baseline's launch speeds trend over the run ({test} < "
                                f"{DRIFT_ALPHA:g}): the machine changed while it was measured; every variant's "
                                "later launches moved with it, and no interval holds that. Rerun on a quiet "
                                "machine, or check what changed (load, clocks, a tenant)."]], "warn"))
    blocks.append(Paragraph([f"Launch order: {said}. Relative speed: the geometric mean over a launch's windows of "
                             f"window throughput over its cell's mean ({test})."], "note"))
    return blocks


def gates_section(data: RunData) -> list[Block]:
    """Every sanity gate that fired, with the variants it fired on and its remedy."""
    from specbench.metrics.warnings import BLOCKING, REMEDY, WarningCode, decode_warnings

    fired: dict[str, set[str]] = {}
    for _, r in data.cells.iterrows():
        for code in (w["code"] for w in decode_warnings(r.get("warnings"))):
            if code in BLOCKING:
                fired.setdefault(code, set()).add(str(r["variant"]))
    if not fired:
        return []
    return [Heading("Sanity gates"),
            Bullets([[Strong(code), f" on {', '.join(sorted(vs))}: {REMEDY[WarningCode(code)]}"]
                     for code, vs in sorted(fired.items())], "warn")]


def plot_section(data: RunData) -> list[Block]:
    from specbench.report import plots

    figs = plots.all_figures(data.cells, baseline=data.baseline)
    hist = plots.acceptance_histogram(data.acceptance)
    if hist is not None:
        figs.append(("Per-request acceptance", hist, "Histogram of per-request acceptance length per drafter "
                     "and category; dashed lines: per-step (pooled) means"))
    if not figs:
        return [Heading("Plots"), Paragraph(["No plots: there are no measured cells."], "warn")]
    return [Heading("Plots"), *(Image(title=t, png=png, alt=alt) for t, png, alt in figs)]

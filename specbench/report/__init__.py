"""The decision report: `report.md` and a self-contained `report.html` for one run directory.

    render(run_dir) -> [report.md, report.html]

The report is built once as a `Document`, a list of plain blocks (Heading, Paragraph, Bullets, Table,
Image), and handed to one renderer per format (`markdown.py`, `html.py`). Blocks hold raw text whatever its
origin (variant names, warnings, config values, log lines): the renderers own all escaping.

Only derived files are read (cells.csv, break_even.csv, run.json, environment.json, fairness.json,
config.yaml), so re-rendering an old run is cheap and never parses requests.jsonl.

Speedup verdicts (`drafter_verdict`) read the 95% interval of the aggregate-throughput speedup: a
concurrency level is a win when the interval's low end is above 1.0, a loss when its high end is below
1.0, and undecided otherwise. Without intervals (a single repeat) the point estimate decides, and the
verdict says it is indicative only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from ..rundir import RunDir, atomic_write

# ------------------------------------------------------------------------------------------------
# The document: what every renderer receives
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Strong:
    text: str


@dataclass(frozen=True)
class Code:
    text: str


Inline = str | Strong | Code
Tone = Literal["", "verdict", "good", "bad", "warn", "note"]


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    parts: list[Inline]
    tone: Tone = ""


@dataclass
class Bullets:
    items: list[list[Inline]]
    tone: Tone = ""


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""
    collapsed: bool = False  # long tables: folded (<details>) in both formats
    numeric: frozenset[int] = frozenset()  # right-aligned column indices


@dataclass
class Image:
    title: str
    png: bytes
    alt: str


Block = Heading | Paragraph | Bullets | Table | Image


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)


Renderer = Callable[[Document], str]

# ------------------------------------------------------------------------------------------------
# Numbers as text (shared with compare.py)
# ------------------------------------------------------------------------------------------------

UNDEFINED = "—"


def num(x: Any) -> float:
    """Any cell value as a float; NaN when missing, empty or not a number."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def fmt(x: Any, digits: int = 2) -> str:
    v = num(x)
    return UNDEFINED if math.isnan(v) else f"{v:.{digits}f}"


def fmt_interval(value: Any, low: Any, high: Any, digits: int = 2) -> str:
    """`1.42 [1.31, 1.55]`; the bare value when the interval is undefined; `—` when the value is."""
    v, lo, hi = num(value), num(low), num(high)
    if math.isnan(v):
        return UNDEFINED
    if math.isnan(lo) or math.isnan(hi):
        return f"{v:.{digits}f}"
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def fmt_len(x: Any) -> str:
    v = num(x)
    return "-" if math.isnan(v) else str(int(v))


# ------------------------------------------------------------------------------------------------
# Loading the derived files
# ------------------------------------------------------------------------------------------------

NUMERIC_COLUMNS = (
    "input_len", "output_len", "concurrency", "temperature", "n_requests", "n_errors", "error_rate", "repeats",
    "output_throughput_tok_s", "output_throughput_ci_low", "output_throughput_ci_high", "per_user_tok_s",
    "per_user_tok_s_ci_low", "per_user_tok_s_ci_high", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s",
    "tpot_p50_s_ci_low", "tpot_p50_s_ci_high", "tpot_p90_s", "itl_p50_s", "e2e_p50_s", "acceptance_length",
    "acceptance_length_ci_low", "acceptance_length_ci_high", "draft_acceptance_length", "acceptance_rate",
    "speedup", "speedup_ci_low", "speedup_ci_high", "per_user_speedup", "per_user_speedup_ci_low",
    "per_user_speedup_ci_high", "tpot_speedup", "lossless_match_rate", "lossless_any_match_rate", "lossless_prefix_mean", "outlier_count",
    "throughput_cv",
)
TEXT_COLUMNS = ("variant", "category", "point_id", "acceptance_per_position", "acceptance_source", "warnings")
SERIES_KEYS = ("category", "input_len", "temperature")  # with output_len: a speedup-vs-concurrency curve


def _truthy(x: Any) -> bool:
    if isinstance(x, str):
        return x.strip().lower() not in ("false", "0", "no", "")
    v = num(x)
    return True if math.isnan(v) else bool(v)


def normalize_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """cells.csv with every known column present and typed: numbers as float (NaN = undefined), text as str."""
    df = cells.copy()
    for col in NUMERIC_COLUMNS:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float) if col in df else math.nan
    for col in TEXT_COLUMNS:
        df[col] = df[col].astype(object).where(df[col].notna(), "").astype(str) if col in df else ""
    df["valid"] = df["valid"].map(_truthy).astype(bool) if "valid" in df else True
    if "point_id" in df and len(df):
        missing = df["point_id"] == ""
        df.loc[missing, "point_id"] = [_point_id(r) for _, r in df[missing].iterrows()]
    return df.reset_index(drop=True)


def _point_id(row: pd.Series) -> str:
    """Same shape as records.CellKey.point_id, for cells.csv files written without the column."""
    inp = f"in{int(row['input_len'])}" if not math.isnan(row["input_len"]) else "in-"
    return f"{row['category']}|{inp}|out{fmt_len(row['output_len'])}|c{fmt_len(row['concurrency'])}" \
           f"|t{num(row['temperature']):g}"


def normalize_break_even(be: pd.DataFrame) -> pd.DataFrame:
    df = be.copy()
    for col in ("input_len", "output_len", "temperature", "break_even_concurrency"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float) if col in df else math.nan
    for col in ("variant", "category", "status", "verdict"):
        df[col] = df[col].astype(object).where(df[col].notna(), "").astype(str) if col in df else ""
    return df.reset_index(drop=True)


@dataclass
class RunData:
    path: Path
    meta: dict[str, Any]
    environment: dict[str, Any]
    config: dict[str, Any]
    fairness: dict[str, Any] | None
    cells: pd.DataFrame
    break_even: pd.DataFrame

    @property
    def baseline(self) -> str:
        return str(self.meta.get("baseline") or "")

    @property
    def variants(self) -> dict[str, dict[str, Any]]:
        """run.json's variants, plus any that appear only in cells.csv."""
        out = {str(k): dict(v or {}) for k, v in (self.meta.get("variants") or {}).items()}
        for name in self.cells["variant"].unique() if len(self.cells) else []:
            out.setdefault(str(name), {"status": "done"})
        return out

    @property
    def drafters(self) -> list[str]:
        return [v for v in self.variants if v != self.baseline]


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def load_report_data(run_dir: str | Path) -> RunData:
    from ..errors import RunDirError

    rd = RunDir(Path(run_dir))
    if not rd.meta.exists():
        raise RunDirError(f"not a run directory (no run.json): {rd.path}")
    cells = pd.read_csv(rd.cells) if rd.cells.exists() and rd.cells.stat().st_size else pd.DataFrame()
    be = pd.read_csv(rd.break_even) if rd.break_even.exists() and rd.break_even.stat().st_size else pd.DataFrame()
    config: dict[str, Any] = {}
    if rd.config.exists():
        import yaml

        config = yaml.safe_load(rd.config.read_text()) or {}
    return RunData(path=rd.path, meta=_read_json(rd.meta) or {}, environment=_read_json(rd.environment) or {},
                   config=config, fairness=_read_json(rd.fairness), cells=normalize_cells(cells),
                   break_even=normalize_break_even(be))


# ------------------------------------------------------------------------------------------------
# The verdict
# ------------------------------------------------------------------------------------------------

Call = Literal["win", "lose", "unclear"]
CROSSING = ("pays_up_to", "crosses")  # break_even.csv statuses with an interpolated crossing
Kind = Literal["never", "mixed", "inconclusive", "adopt_upto", "adopt_all"]
_RANK: dict[str, int] = {"never": 0, "mixed": 1, "inconclusive": 2, "adopt_upto": 3, "adopt_all": 4}


def level_call(speedup: float, low: float, high: float) -> Call:
    """Win when the interval is clear above 1.0, lose when clear below, else unclear (point estimate if no CI)."""
    if not (math.isnan(low) or math.isnan(high)):
        return "win" if low > 1.0 else "lose" if high < 1.0 else "unclear"
    if math.isnan(speedup) or speedup == 1.0:
        return "unclear"
    return "win" if speedup > 1.0 else "lose"


@dataclass(frozen=True)
class Outcome:
    """What one drafter should do on one curve (or, combined, on one category)."""

    kind: Kind
    limit: int | None  # highest concurrency at which adopting is supported by the measurements
    max_concurrency: int
    beaten_above: bool  # the baseline is clearly faster at some level above `limit`
    speedup_min: float
    speedup_max: float
    has_intervals: bool
    wins: tuple[int, ...] = ()  # concurrency levels where the drafter is clearly faster
    losses: tuple[int, ...] = ()  # ... and clearly slower
    varies: bool = False  # curves of the category (output lengths, temperatures) disagree


def curve_outcome(curve: pd.DataFrame, be_status: str = "", be_concurrency: float = math.nan) -> Outcome:
    """Classify one speedup-vs-concurrency curve; break_even.csv's status, when given, decides the kind."""
    curve = curve.sort_values("concurrency")
    levels = [int(c) for c in curve["concurrency"]]
    calls = [level_call(s, lo, hi) for s, lo, hi in
             zip(curve["speedup"], curve["speedup_ci_low"], curve["speedup_ci_high"])]
    prefix: int | None = None  # last level of the leading run of wins
    for c, call in zip(levels, calls):
        if call != "win":
            break
        prefix = c
    be_status = "" if be_status == "no_data" else be_status
    if be_status in CROSSING and prefix is not None and not math.isnan(be_concurrency):
        below = [c for c in levels if c <= prefix and c < be_concurrency]
        prefix = below[-1] if below else None
    if be_status == "never_pays" or (not be_status and calls and all(c == "lose" for c in calls)):
        kind: Kind = "never"
    elif be_status == "pays_everywhere" or (not be_status and calls and all(c == "win" for c in calls)):
        kind, prefix = "adopt_all", max(levels)
    elif prefix is not None:
        kind = "adopt_all" if prefix == max(levels) else "adopt_upto"
    elif "win" in calls:
        kind = "mixed"  # clear wins, but not from the lowest concurrency up
    else:
        kind = "inconclusive"
    limit = prefix if kind in ("adopt_upto", "adopt_all") else None
    beaten = any(call == "lose" and (limit is None or c > limit) for c, call in zip(levels, calls))
    s = curve["speedup"].dropna()
    has_ci = bool(curve[["speedup_ci_low", "speedup_ci_high"]].notna().all(axis=1).all())
    return Outcome(kind=kind, limit=limit, max_concurrency=max(levels) if levels else 0, beaten_above=beaten,
                   speedup_min=float(s.min()) if len(s) else math.nan,
                   speedup_max=float(s.max()) if len(s) else math.nan, has_intervals=has_ci,
                   wins=tuple(c for c, k in zip(levels, calls) if k == "win"),
                   losses=tuple(c for c, k in zip(levels, calls) if k == "lose"))


def combine(outcomes: list[Outcome]) -> Outcome:
    """The most conservative outcome across a category's curves (never < inconclusive < adopt <= N < adopt all)."""
    worst = min(outcomes, key=lambda o: (_RANK[o.kind], o.limit or 0))
    return Outcome(kind=worst.kind, limit=worst.limit, max_concurrency=max(o.max_concurrency for o in outcomes),
                   beaten_above=any(o.beaten_above for o in outcomes),
                   speedup_min=min(o.speedup_min for o in outcomes), speedup_max=max(o.speedup_max for o in outcomes),
                   has_intervals=all(o.has_intervals for o in outcomes),
                   wins=tuple(sorted({c for o in outcomes for c in o.wins})),
                   losses=tuple(sorted({c for o in outcomes for c in o.losses})),
                   varies=len({(o.kind, o.limit) for o in outcomes}) > 1)


def _be_lookup(be: pd.DataFrame, variant: str, key: dict[str, Any]) -> tuple[str, float]:
    if not len(be):
        return "", math.nan
    m = (be["variant"] == variant) & (be["category"] == key["category"])
    for col in ("input_len", "output_len", "temperature"):
        v = num(key.get(col))
        m &= be[col].isna() if math.isnan(v) else (be[col] == v)
    rows = be[m]
    if not len(rows):
        return "", math.nan
    return str(rows.iloc[0]["status"]), float(rows.iloc[0]["break_even_concurrency"])


def category_outcomes(cells: pd.DataFrame, be: pd.DataFrame, variant: str) -> dict[str, Outcome]:
    """Per category: the combined outcome of the variant's valid curves (one per lengths x temperature)."""
    mine = cells[(cells["variant"] == variant) & cells["valid"]]
    out: dict[str, Outcome] = {}
    for category, cat_cells in mine.groupby("category", sort=True):
        curves = []
        for key, curve in cat_cells.groupby(["input_len", "output_len", "temperature"], dropna=False):
            k = dict(zip(["input_len", "output_len", "temperature"], key), category=category)
            curves.append(curve_outcome(curve, *_be_lookup(be, variant, k)))
        out[str(category)] = combine(curves)
    return out


def _span(lo: float, hi: float) -> str:
    return fmt(lo) if abs(hi - lo) < 0.005 else f"{fmt(lo)}–{fmt(hi)}"


def _csv(levels: Iterable[int]) -> str:
    return ", ".join(str(c) for c in levels)


def _phrase(variant: str, outcome: Outcome, categories: list[str]) -> list[Inline]:
    on = ", ".join(categories)
    if outcome.kind == "adopt_all":
        parts: list[Inline] = ["adopt ", Strong(variant), f" at every measured concurrency (up to "
                               f"{outcome.max_concurrency}) on {on}"]
    elif outcome.kind == "adopt_upto":
        above = "baseline wins above" if outcome.beaten_above else "no clear winner above"
        parts = ["adopt ", Strong(variant), f" for concurrency ≤ {outcome.limit} on {on}; {above}"]
    elif outcome.kind == "never":
        parts = [Strong(variant), f" never pays on {on}: speedup {_span(outcome.speedup_min, outcome.speedup_max)}"
                 ", below 1.0 at every measured concurrency"]
    elif outcome.kind == "mixed":
        losses = f", below it at {_csv(outcome.losses)}" if outcome.losses else ""
        parts = ["no consistent result for ", Strong(variant), f" on {on}: speedup clearly above 1.0 only at "
                 f"concurrency {_csv(outcome.wins)}{losses}"]
    else:
        parts = [f"inconclusive on {on}: the speedup intervals include 1.0 "
                 f"(speedup {_span(outcome.speedup_min, outcome.speedup_max)}); more repeats would decide"]
    if outcome.varies:
        parts.append(" (most conservative across output lengths; see the break-even table)")
    return parts


def drafter_verdict(data: RunData, variant: str) -> tuple[list[Inline], Tone]:
    """One line for one drafter: per category, adopt up to which concurrency, never, or inconclusive."""
    info = data.variants.get(variant, {})
    status = str(info.get("status") or "")
    if status == "failed":
        return [Strong(variant), f" failed: no verdict ({info.get('reason') or 'no reason recorded'})"], "bad"
    outcomes = category_outcomes(data.cells, data.break_even, variant)
    if not outcomes:
        return [Strong(variant), f": no valid measurements (status {status or 'unknown'})"], "warn"
    if all(o.kind == "never" for o in outcomes.values()):
        allc = combine(list(outcomes.values()))
        return [Strong(variant), " never pays: speedup ", Strong(_span(allc.speedup_min, allc.speedup_max)),
                " (< 1.0) at every measured point; do not adopt"], "bad"
    groups: dict[tuple[Any, ...], list[str]] = {}
    for cat, o in outcomes.items():
        groups.setdefault((o.kind, o.limit, o.beaten_above, o.varies), []).append(cat)
    parts: list[Inline] = []
    for _, cats in sorted(groups.items(), key=lambda kv: (-_RANK[kv[0][0]], -(kv[0][1] or 0))):
        if parts:
            parts.append("; ")
        parts.extend(_phrase(variant, outcomes[cats[0]], cats))
    if not all(o.has_intervals for o in outcomes.values()):
        parts.append(" (some points have no interval, e.g. a single repeat: indicative only)")
    kinds = {o.kind for o in outcomes.values()}
    tone: Tone = "good" if kinds <= {"adopt_all", "adopt_upto"} else "warn"
    return parts, tone


# ------------------------------------------------------------------------------------------------
# The document, section by section
# ------------------------------------------------------------------------------------------------


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
    vals = sorted({num(v) for v in values} - {math.nan})
    vals = [v for v in vals if not math.isnan(v)]
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
        text += (f"Each cell is one variant at one sweep point: categories {', '.join(sorted(c['category'].unique()))}; "
                 f"output lengths {_levels(c['output_len'])}; concurrency {_levels(c['concurrency'])}; "
                 f"temperature {_levels(c['temperature'], 1)}; up to {fmt_len(c['repeats'].max())} repeats per cell, "
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
    tone: Tone = "bad" if all(t == "bad" for t in tones) else "verdict"
    return [Heading("Verdict"), Bullets(items, tone),
            Paragraph(["A concurrency level counts for a drafter when its speedup interval lies above 1.0 and "
                       "against it when the interval lies below; intervals that include 1.0 decide nothing."],
                      "note")]


def plot_section(data: RunData) -> list[Block]:
    from . import plots

    figs = plots.all_figures(data.cells, baseline=data.baseline)
    if not figs:
        return [Heading("Plots"), Paragraph(["No plots: there are no measured cells."], "warn")]
    return [Heading("Plots")] + [Image(title=t, png=png, alt=alt) for t, png, alt in figs]


def _curve_label(row: pd.Series, vary: list[str]) -> list[str]:
    names = {"category": str(row["category"]), "input_len": fmt_len(row["input_len"]),
             "output_len": fmt_len(row["output_len"]), "temperature": f"{num(row['temperature']):g}"}
    return [names[k] for k in vary]


def _speedup_cell(row: pd.Series | None) -> str:
    if row is None:
        return ""
    text = fmt_interval(row["speedup"], row["speedup_ci_low"], row["speedup_ci_high"])
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
    rows = [[r["variant"], r["category"], fmt_len(r["input_len"]), fmt_len(r["output_len"]),
             f"{num(r['temperature']):g}", fmt(r["break_even_concurrency"], 1), r["status"].replace("_", " "),
             r["verdict"]] for _, r in be.iterrows()]
    return [Heading("Break-even concurrency"),
            Table(["variant", "category", "input", "output", "temp", "break-even c", "status", "verdict"], rows,
                  numeric=frozenset({2, 3, 4, 5}))]


def acceptance_table(data: RunData) -> list[Block]:
    c = data.cells[data.cells["variant"].isin(data.drafters) & data.cells["acceptance_length"].notna()]
    if not len(c):
        return [Heading("Acceptance length"), Paragraph(["No acceptance data in this run."], "note")]
    rows = []
    for (variant, cat), g in c.groupby(["variant", "category"], sort=False):
        a = g["acceptance_length"]
        src = ", ".join(sorted({s for s in g["acceptance_source"] if s})) or UNDEFINED
        rows.append([variant, cat, fmt(a.mean()), _span(a.min(), a.max()), fmt(g["acceptance_rate"].mean()),
                     str(len(g)), src])
    return [Heading("Acceptance length by category"),
            Paragraph(["Tokens produced per target verification step, as defined in docs/metrics.md; "
                       "mean and range over the category's cells."], "note"),
            Table(["variant", "category", "acceptance length", "range", "acceptance rate", "cells", "source"],
                  rows, numeric=frozenset({2, 3, 4, 5}))]


def cell_table(data: RunData) -> list[Block]:
    c = data.cells
    if not len(c):
        return []
    rows = [[r["variant"], r["category"], fmt_len(r["input_len"]), fmt_len(r["output_len"]),
             fmt_len(r["concurrency"]), f"{num(r['temperature']):g}", "yes" if r["valid"] else "NO",
             f"{fmt_len(r['n_requests'])}/{fmt_len(r['n_errors'])}",
             fmt_interval(r["output_throughput_tok_s"], r["output_throughput_ci_low"], r["output_throughput_ci_high"], 1),
             fmt_interval(r["per_user_tok_s"], r["per_user_tok_s_ci_low"], r["per_user_tok_s_ci_high"], 1),
             fmt(r["ttft_p50_s"], 3), fmt(r["tpot_p50_s"] * 1000, 1), fmt(r["acceptance_length"]),
             fmt_interval(r["speedup"], r["speedup_ci_low"], r["speedup_ci_high"]), fmt(r["lossless_match_rate"]),
             r["warnings"].replace(";", ", ")] for _, r in c.iterrows()]
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
    rows = []
    for (variant, conc), g in c.groupby(["variant", "concurrency"], sort=True):
        any_match = fmt(g["lossless_any_match_rate"].mean(), 3) if has_any else "—"
        rows.append([variant, fmt_len(conc), fmt(g["lossless_match_rate"].mean(), 3),
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
                             f"{fmt(unexplained[i], 3)}"] for i, r in bad.iterrows()], "bad"))
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
    codes: dict[str, list[str]] = {}
    for _, r in data.cells.iterrows():
        for code in filter(None, (w.strip() for w in r["warnings"].split(";"))):
            codes.setdefault(code, []).append(f"{r['variant']} {r['point_id']}")
    out: list[Block] = [Heading("Warnings")]
    if not run_w and not codes:
        return out + [Paragraph(["None."], "good")]
    if run_w:
        out.append(Bullets([[w] for w in run_w], "warn"))
    if codes:
        rows = [[k, str(len(v)), ", ".join(v[:3]) + (f" (+{len(v) - 3} more)" if len(v) > 3 else "")]
                for k, v in sorted(codes.items())]
        out.append(Table(["cell warning", "cells", "examples"], rows, numeric=frozenset({1})))
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
    known = {"host", "platform", "cpu", "gpus", "python", "engine", "specbench_version", "drafters"}
    rows += [[k, _text(v)] for k, v in env.items() if k not in known]
    return [Heading("Environment"), Table(["item", "value"], rows)]


def build_document(data: RunData, *, plots: bool = True) -> Document:
    """Verdict first, then plots, tables, audits, status and environment."""
    name = str(data.meta.get("name") or data.path.name)
    blocks: list[Block] = [context(data)]
    blocks += verdict_section(data)
    if plots:
        blocks += plot_section(data)
    for section in (speedup_tables, break_even_table, acceptance_table, cell_table, fairness_section,
                    lossless_section, warnings_section, status_section, environment_section):
        blocks += section(data)
    run_id = data.meta.get("run_id")
    return Document(title=f"specbench report: {name}" + (f" ({run_id})" if run_id else ""), blocks=blocks)


# ------------------------------------------------------------------------------------------------
# Entry point
# ------------------------------------------------------------------------------------------------


def renderers() -> dict[str, Renderer]:
    """File name -> renderer: one small module per format."""
    from . import html, markdown

    return {"report.md": markdown.render, "report.html": html.render}


def render(run_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """Write report.md and report.html into `run_dir` (atomically); return their paths."""
    data = load_report_data(run_dir)
    doc = build_document(data, plots=plots)
    out = []
    for name, fn in renderers().items():
        path = data.path / name
        atomic_write(path, fn(doc))
        out.append(path)
    return out


__all__ = ["Block", "Bullets", "Code", "Document", "Heading", "Image", "Paragraph", "RunData", "Strong", "Table",
           "build_document", "drafter_verdict", "fmt_interval", "load_report_data", "render", "renderers"]

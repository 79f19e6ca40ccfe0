"""From raw records to one row per variant x sweep point (the "cells" table), and break-even.

Inputs are DataFrames of RequestRecord / WindowRecord `model_dump()` rows. Warmup requests and
requests whose window has no WindowRecord (an unfinished window) are ignored. Every metric is
defined in docs/metrics.md; each formula below is written once, next to a comment that states it.
Pure: no I/O, printing or plotting. Undefined values are NaN (None for whole lists), never 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from . import stats
from .records import RequestRecord
from .warnings_ import MIN_REPEATS_FOR_INTERVAL, cell_warnings

NAN = math.nan

KEY_COLUMNS = ["variant", "category", "input_len", "output_len", "concurrency", "temperature", "point_id"]
CELL_COLUMNS = KEY_COLUMNS + [
    "is_baseline",
    "n_requests",
    "n_errors",
    "error_rate",
    "valid",
    "repeats",
    "output_throughput_tok_s",
    "output_throughput_ci_low",
    "output_throughput_ci_high",
    "per_user_tok_s",
    "per_user_tok_s_ci_low",
    "per_user_tok_s_ci_high",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p50_s_ci_low",
    "tpot_p50_s_ci_high",
    "tpot_p90_s",
    "itl_p50_s",
    "e2e_p50_s",
    "acceptance_length",
    "acceptance_length_ci_low",
    "acceptance_length_ci_high",
    "draft_acceptance_length",
    "acceptance_rate",
    "acceptance_per_position",
    "acceptance_source",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "per_user_speedup",
    "per_user_speedup_ci_low",
    "per_user_speedup_ci_high",
    "tpot_speedup",
    "lossless_match_rate",
    "lossless_any_match_rate",
    "lossless_prefix_mean",
    "outlier_count",
    "throughput_cv",
    "warnings",
]
# An invalid cell (error rate above max_error_rate, or nothing succeeded) has no throughput or speedup.
INVALID_BLANKED = [
    "output_throughput_tok_s",
    "output_throughput_ci_low",
    "output_throughput_ci_high",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "per_user_speedup",
    "per_user_speedup_ci_low",
    "per_user_speedup_ci_high",
    "tpot_speedup",
]
BREAK_EVEN_GROUP = ["variant", "category", "input_len", "output_len", "temperature"]
BREAK_EVEN_COLUMNS = BREAK_EVEN_GROUP + [
    "break_even_concurrency",
    "status",
    "verdict",
    "uncertain_from",
    "last_confident",
]


@dataclass(frozen=True)
class BootstrapSettings:
    n_resamples: int = 2000
    confidence: float = 0.95
    seed: int = 0


# ---------------------------------------------------------------------------------------------------
# Per-request and per-window formulas


def _num(x: Any) -> float:
    """A record field as float; None/NaN -> NaN."""
    if x is None:
        return NAN
    try:
        v = float(x)
    except (TypeError, ValueError):
        return NAN
    return v


def request_output_tokens(output_tokens: Any, chunk_tokens: Sequence[int] | None) -> float:
    """Output tokens from the server's usage; if usage is missing, the sum of tokens per chunk."""
    n = _num(output_tokens)
    if math.isfinite(n):
        return n
    if chunk_tokens is not None and len(chunk_tokens) > 0:
        return float(sum(chunk_tokens))
    return NAN


def request_tpot(e2e_s: float, ttft_s: float, n_out: float) -> float:
    """TPOT = (e2e - TTFT) / (n_out - 1); undefined (NaN) for fewer than 2 output tokens."""
    if not (math.isfinite(e2e_s) and math.isfinite(ttft_s) and math.isfinite(n_out)) or n_out < 2:
        return NAN
    return (e2e_s - ttft_s) / (n_out - 1)


def request_itls(chunk_offsets_s: Sequence[float], chunk_tokens: Sequence[int]) -> list[float]:
    """Per-token inter-token latencies: chunk j >= 1 with k_j tokens after gap g_j = t_j - t_{j-1}
    contributes k_j gaps of g_j / k_j. Tokens of the first chunk arrive at TTFT and add none."""
    out: list[float] = []
    for j in range(1, min(len(chunk_offsets_s), len(chunk_tokens))):
        k = int(chunk_tokens[j])
        if k <= 0:
            continue
        gap = float(chunk_offsets_s[j]) - float(chunk_offsets_s[j - 1])
        out.extend([gap / k] * k)
    return out


def window_throughput_arrays(t_send: np.ndarray, e2e_s: np.ndarray, n_out: np.ndarray, ok: np.ndarray) -> float:
    """Output throughput of one window = sum(n_out of successful requests) / (last finish - first send).

    first send = min t_send over all the window's requests; last finish = max(t_send + e2e) over those
    whose e2e is known. NaN when nothing succeeded or the span is not positive.
    """
    if ok.size == 0 or not ok.any():
        return NAN
    finish = t_send + e2e_s
    span = float(np.nanmax(finish)) - float(np.nanmin(t_send)) if np.isfinite(finish).any() else NAN
    tokens = float(np.nansum(n_out[ok]))
    if not math.isfinite(span) or span <= 0:
        return NAN
    return tokens / span


def window_throughput(records: Sequence[RequestRecord]) -> float | None:
    """window_throughput_arrays over one window's RequestRecords (warmup ignored); None if undefined.
    Used by the runner's adaptive mode while a cell is being measured."""
    rs = [r for r in records if not r.warmup]
    tp = window_throughput_arrays(
        np.array([r.t_send for r in rs], dtype=float),
        np.array([_num(r.e2e_s) for r in rs], dtype=float),
        np.array([request_output_tokens(r.output_tokens, r.chunk_tokens) for r in rs], dtype=float),
        np.array([r.ok for r in rs], dtype=bool),
    )
    return tp if math.isfinite(tp) else None


def tau_from_counters(generation_tokens: float, accepted_tokens: float) -> float:
    """Tokens per target step from window counters. Each target step emits (accepted + 1) tokens, so
    steps = d(generation) - d(accepted) and tau = d(generation) / (d(generation) - d(accepted))."""
    steps = generation_tokens - accepted_tokens
    if not (math.isfinite(steps) and steps > 0):
        return NAN
    return generation_tokens / steps


def draft_acceptance_length(accepted_tokens: float, num_drafts: float) -> float:
    """vLLM's acceptance length = 1 + d(accepted) / d(drafts): only steps that drafted are counted."""
    if not (math.isfinite(num_drafts) and num_drafts > 0 and math.isfinite(accepted_tokens)):
        return NAN
    return 1.0 + accepted_tokens / num_drafts


def _safe_ratio(num: float, den: float) -> float:
    return num / den if math.isfinite(num) and math.isfinite(den) and den > 0 else NAN


def common_prefix_len(a: Sequence[Any], b: Sequence[Any]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def compare_outputs(
    ids: Sequence[int] | None, text: str | None, base_ids: Sequence[int] | None, base_text: str | None
) -> tuple[bool, float] | None:
    """(exact match, common prefix / max(len)) comparing token ids, else text (characters); None if
    neither is available on both sides. Two empty outputs match with prefix fraction 1.0."""
    if ids is not None and base_ids is not None:
        a: Sequence[Any] = list(ids)
        b: Sequence[Any] = list(base_ids)
    elif text is not None and base_text is not None:
        a, b = text, base_text
    else:
        return None
    longest = max(len(a), len(b))
    frac = 1.0 if longest == 0 else common_prefix_len(a, b) / longest  # prefix fraction of the output
    return (list(a) == list(b)), frac


# ---------------------------------------------------------------------------------------------------
# Per-cell summary


@dataclass
class _Req:
    repeat: int
    index: int
    prompt_id: str
    ok: bool
    n_out: float
    e2e: float
    ttft: float
    t_send: float
    chunk_offsets: list[float]
    chunk_tokens: list[int]
    token_ids: list[int] | None
    text: str | None
    spec: dict[str, Any] | None

    @property
    def per_user(self) -> float:
        """Per-user speed = n_out / e2e (tokens/s) of one successful request."""
        return _safe_ratio(self.n_out, self.e2e) if self.ok else NAN


@dataclass
class _Cell:
    row: dict[str, Any]
    reqs: list[_Req]
    window_tp: dict[int, float] = field(default_factory=dict)  # repeat -> window throughput


def _as_list(x: Any) -> list[Any]:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return []
    return list(x)


def _opt_list(x: Any) -> list[Any] | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return list(x)


def _opt_str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def _to_reqs(df: pd.DataFrame) -> list[_Req]:
    out = []
    for r in df.to_dict("records"):
        chunk_tokens = _as_list(r.get("chunk_tokens"))
        spec = r.get("spec")
        out.append(
            _Req(
                repeat=int(r["repeat"]),
                index=int(r["index"]),
                prompt_id=str(r.get("prompt_id", "")),
                ok=_opt_str(r.get("error")) is None,
                n_out=request_output_tokens(r.get("output_tokens"), chunk_tokens),
                e2e=_num(r.get("e2e_s")),
                ttft=_num(r.get("ttft_s")),
                t_send=_num(r.get("t_send")),
                chunk_offsets=[float(x) for x in _as_list(r.get("chunk_offsets_s"))],
                chunk_tokens=[int(x) for x in chunk_tokens],
                token_ids=_opt_list(r.get("token_ids")),
                text=_opt_str(r.get("text")),
                spec=spec if isinstance(spec, dict) else None,
            )
        )
    return out


def _ci(interval: tuple[float | None, float | None]) -> tuple[float, float]:
    lo, hi = interval
    return (NAN if lo is None else lo), (NAN if hi is None else hi)


def _acceptance(
    reqs: list[_Req], windows: pd.DataFrame, is_baseline: bool, bs: BootstrapSettings
) -> dict[str, Any]:
    """acceptance_length (+ci), draft_acceptance_length, acceptance_rate, per-position, source."""
    out: dict[str, Any] = {
        "acceptance_length": NAN,
        "acceptance_length_ci_low": NAN,
        "acceptance_length_ci_high": NAN,
        "draft_acceptance_length": NAN,
        "acceptance_rate": NAN,
        "acceptance_per_position": None,
        "acceptance_source": "none",
    }
    ok = [r for r in reqs if r.ok]

    # Source 1: per-request spec details. tau = sum(n_out) / sum(verify_steps), pooled over the cell.
    with_steps: list[tuple[_Req, dict[str, Any]]] = [
        (r, r.spec) for r in ok if r.spec and (r.spec.get("verify_steps") or 0) > 0 and math.isfinite(r.n_out)
    ]
    if with_steps:
        tokens: dict[int, float] = {}
        steps: dict[int, float] = {}
        for r, spec in with_steps:
            tokens[r.repeat] = tokens.get(r.repeat, 0.0) + r.n_out
            steps[r.repeat] = steps.get(r.repeat, 0.0) + float(spec["verify_steps"])
        reps = sorted(tokens)
        out["acceptance_length"] = _safe_ratio(sum(tokens.values()), sum(steps.values()))
        if len(reps) >= MIN_REPEATS_FOR_INTERVAL:
            lo, hi = _ci(stats.paired_ratio_ci([tokens[k] for k in reps], [steps[k] for k in reps], **_bs(bs)))
            out["acceptance_length_ci_low"], out["acceptance_length_ci_high"] = lo, hi
        out["acceptance_source"] = "request"
        acc = [sp for _, sp in with_steps if sp.get("accepted_drafts") is not None and sp.get("proposed_drafts")]
        if acc:
            # acceptance rate = accepted draft tokens / proposed draft tokens
            out["acceptance_rate"] = _safe_ratio(
                float(sum(sp["accepted_drafts"] for sp in acc)), float(sum(sp["proposed_drafts"] for sp in acc))
            )
        out["acceptance_per_position"] = _per_position_from_histograms(
            [sp.get("accept_histogram") for _, sp in with_steps]
        )

    # Source 2: window counter deltas (vLLM spec_decode counters).
    win = _counter_windows(windows, reqs)
    if win:
        gen = sum(w.generation_tokens for w in win)
        accepted = sum(w.num_accepted_tokens for w in win)
        drafts = sum(w.num_drafts for w in win)
        draft_tokens = sum(w.num_draft_tokens for w in win)
        out["draft_acceptance_length"] = draft_acceptance_length(accepted, drafts)
        if out["acceptance_source"] == "none":
            out["acceptance_length"] = tau_from_counters(gen, accepted)
            out["acceptance_source"] = "counters" if math.isfinite(out["acceptance_length"]) else "none"
            if len(win) >= MIN_REPEATS_FOR_INTERVAL and out["acceptance_source"] == "counters":
                g = [w.generation_tokens for w in win]
                s = [w.generation_tokens - w.num_accepted_tokens for w in win]
                lo, hi = _ci(stats.paired_ratio_ci(g, s, **_bs(bs)))
                out["acceptance_length_ci_low"], out["acceptance_length_ci_high"] = lo, hi
            out["acceptance_rate"] = _safe_ratio(accepted, draft_tokens)
        positions = [w.per_position_accepted for w in win if w.per_position_accepted]
        if positions and drafts > 0:
            width = max(len(p) for p in positions)
            summed = np.zeros(width)
            for p in positions:
                summed[: len(p)] += np.asarray(p, dtype=float)
            # per-position acceptance = accepted at draft position i / drafts (vLLM's definition)
            out["acceptance_per_position"] = [float(x) for x in summed / drafts]

    if out["acceptance_source"] == "none" and is_baseline:
        out["acceptance_length"] = 1.0  # plain decoding: one token per target step
    return out


def _per_position_from_histograms(hists: Iterable[Any]) -> list[float] | None:
    """From histograms H[j] = steps that accepted j drafts: P(position i accepted) = sum_{j>i} H[j] / sum H."""
    hs = [np.asarray(h, dtype=float) for h in hists if h]
    if not hs:
        return None
    width = max(len(h) for h in hs)
    total = np.zeros(width)
    for h in hs:
        total[: len(h)] += h
    if total.sum() <= 0 or width < 2:
        return None
    tail = np.cumsum(total[::-1])[::-1]  # tail[i] = sum_{j>=i} H[j]
    return [float(x) for x in tail[1:] / total.sum()]


@dataclass(frozen=True)
class _WindowCounters:
    generation_tokens: float
    num_accepted_tokens: float
    num_drafts: float
    num_draft_tokens: float
    per_position_accepted: list[float] | None


def _counter_windows(windows: pd.DataFrame, reqs: list[_Req]) -> list[_WindowCounters]:
    """Counter deltas per window; generation tokens fall back to the window's successful usage sum."""
    out: list[_WindowCounters] = []
    usage_by_repeat: dict[int, float] = {}
    for r in reqs:
        if r.ok and math.isfinite(r.n_out):
            usage_by_repeat[r.repeat] = usage_by_repeat.get(r.repeat, 0.0) + r.n_out
    for w in windows.to_dict("records"):
        c = w.get("counters")
        if not isinstance(c, dict) or c.get("num_accepted_tokens") is None:
            continue
        gen = _num(c.get("generation_tokens"))
        if not math.isfinite(gen):
            gen = usage_by_repeat.get(int(w["repeat"]), NAN)
        out.append(
            _WindowCounters(
                generation_tokens=gen,
                num_accepted_tokens=_num(c.get("num_accepted_tokens")),
                num_drafts=_num(c.get("num_drafts")),
                num_draft_tokens=_num(c.get("num_draft_tokens")),
                per_position_accepted=_opt_list(w.get("per_position_accepted")),
            )
        )
    return [w for w in out if math.isfinite(w.generation_tokens) and math.isfinite(w.num_accepted_tokens)]


def _bs(bs: BootstrapSettings) -> dict[str, Any]:
    return {"n_resamples": bs.n_resamples, "confidence": bs.confidence, "seed": bs.seed}


def _summarize_cell(
    key: dict[str, Any],
    reqs: list[_Req],
    windows: pd.DataFrame,
    *,
    is_baseline: bool,
    max_error_rate: float,
    bs: BootstrapSettings,
) -> _Cell:
    row: dict[str, Any] = {c: NAN for c in CELL_COLUMNS}
    row.update(key)
    ok = [r for r in reqs if r.ok]
    n, n_err = len(reqs), len(reqs) - len(ok)
    error_rate = n_err / n if n else NAN
    valid = bool(ok) and error_rate <= max_error_rate
    repeats = sorted({r.repeat for r in reqs})
    row.update(
        is_baseline=is_baseline,
        n_requests=n,
        n_errors=n_err,
        error_rate=error_rate,
        valid=valid,
        repeats=len(repeats),
        acceptance_per_position=None,
        acceptance_source="none",
        outlier_count=0,
        warnings="",
    )
    cell = _Cell(row=row, reqs=reqs)

    for rep in repeats:
        rs = [r for r in reqs if r.repeat == rep]
        cell.window_tp[rep] = window_throughput_arrays(
            np.array([r.t_send for r in rs]),
            np.array([r.e2e for r in rs]),
            np.array([r.n_out for r in rs]),
            np.array([r.ok for r in rs]),
        )
    wt = [cell.window_tp[rep] for rep in repeats]
    row["throughput_cv"] = stats.coefficient_of_variation(wt)
    if valid:
        # cell throughput = mean over repeats of the window throughput
        row["output_throughput_tok_s"] = stats.mean(wt)
        if sum(math.isfinite(x) for x in wt) >= MIN_REPEATS_FOR_INTERVAL:
            lo, hi = _ci(stats.bootstrap_ci(wt, np.mean, **_bs(bs)))
            row["output_throughput_ci_low"], row["output_throughput_ci_high"] = lo, hi

    per_user = [r.per_user for r in ok]
    row["per_user_tok_s"] = stats.mean(per_user)  # mean over requests of n_out / e2e
    row["per_user_tok_s_ci_low"], row["per_user_tok_s_ci_high"] = _ci(stats.bootstrap_ci(per_user, np.mean, **_bs(bs)))
    row["outlier_count"] = len(stats.mad_outliers(per_user))

    ttft = [r.ttft for r in ok]
    row["ttft_p50_s"], row["ttft_p90_s"], row["ttft_p99_s"] = (stats.percentile(ttft, q) for q in (50, 90, 99))
    tpot = [request_tpot(r.e2e, r.ttft, r.n_out) for r in ok]
    row["tpot_p50_s"] = stats.percentile(tpot, 50)
    row["tpot_p90_s"] = stats.percentile(tpot, 90)
    row["tpot_p50_s_ci_low"], row["tpot_p50_s_ci_high"] = _ci(stats.bootstrap_ci(tpot, np.median, **_bs(bs)))
    itl = [g for r in ok for g in request_itls(r.chunk_offsets, r.chunk_tokens)]
    row["itl_p50_s"] = stats.percentile(itl, 50)
    row["e2e_p50_s"] = stats.percentile([r.e2e for r in ok], 50)

    row.update(_acceptance(reqs, windows, is_baseline, bs))
    return cell


# ---------------------------------------------------------------------------------------------------
# Comparisons against the baseline


def _speedups(cell: _Cell, base: _Cell, bs: BootstrapSettings) -> dict[str, float]:
    row, brow = cell.row, base.row
    out: dict[str, float] = {}
    # speedup = output_throughput(variant) / output_throughput(baseline), same point_id
    out["speedup"] = _safe_ratio(row["output_throughput_tok_s"], brow["output_throughput_tok_s"])
    reps = [
        r for r in sorted(cell.window_tp)
        if r in base.window_tp and math.isfinite(cell.window_tp[r]) and math.isfinite(base.window_tp[r])
    ]
    lo = hi = NAN
    if len(reps) >= MIN_REPEATS_FOR_INTERVAL and math.isfinite(out["speedup"]):
        lo, hi = _ci(
            stats.paired_ratio_ci([cell.window_tp[r] for r in reps], [base.window_tp[r] for r in reps], **_bs(bs))
        )
    out["speedup_ci_low"], out["speedup_ci_high"] = lo, hi

    # per-user speedup = per_user_tok_s(variant) / per_user_tok_s(baseline); interval paired by (repeat, index)
    out["per_user_speedup"] = _safe_ratio(row["per_user_tok_s"], brow["per_user_tok_s"])
    bmap = {(r.repeat, r.index): r.per_user for r in base.reqs if r.ok}
    pairs = [(r.per_user, bmap[(r.repeat, r.index)]) for r in cell.reqs if r.ok and (r.repeat, r.index) in bmap]
    lo, hi = _ci(stats.paired_ratio_ci([p[0] for p in pairs], [p[1] for p in pairs], **_bs(bs)))
    out["per_user_speedup_ci_low"], out["per_user_speedup_ci_high"] = lo, hi

    # TPOT speedup = TPOT p50(baseline) / TPOT p50(variant): a latency, so the ratio is inverted
    out["tpot_speedup"] = _safe_ratio(brow["tpot_p50_s"], row["tpot_p50_s"])
    return out


def _lossless(
    cell: _Cell, base: _Cell | None, base_by_prompt: dict[tuple[Any, ...], list[_Req]]
) -> tuple[float, float, float]:
    """(match rate, any-match rate, mean prefix fraction) against the baseline's outputs.

    match: equal to the baseline's output for the same request (same cell, repeat and index, else the
    same prompt and lengths); any-match: equal to the baseline's output for the same prompt and lengths
    at any concurrency (the baseline's own outputs can differ between batch shapes)."""
    exact = {(r.repeat, r.index): r for r in base.reqs if r.ok} if base else {}
    matches: list[bool] = []
    any_matches: list[bool] = []
    prefixes: list[float] = []
    for r in cell.reqs:
        if not r.ok:
            continue
        same_prompt = base_by_prompt.get((r.prompt_id, _key_nan(cell.row["input_len"]), cell.row["output_len"]), [])
        b = exact.get((r.repeat, r.index))
        if b is None or b.prompt_id != r.prompt_id:
            b = same_prompt[0] if same_prompt else None
        if b is None:
            continue
        res = compare_outputs(r.token_ids, r.text, b.token_ids, b.text)
        if res is None:
            continue
        matches.append(res[0])
        prefixes.append(res[1])
        others = (compare_outputs(r.token_ids, r.text, o.token_ids, o.text) for o in same_prompt)
        any_matches.append(res[0] or any(x is not None and x[0] for x in others))
    if not matches:
        return NAN, NAN, NAN
    return float(np.mean(matches)), float(np.mean(any_matches)), float(np.mean(prefixes))


def _key_nan(x: Any) -> Any:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


# ---------------------------------------------------------------------------------------------------
# Public API


def measured_requests(requests: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Requests that count: not warmup, and their window has a WindowRecord (it completed)."""
    if requests.empty:
        return requests
    keep = ~requests.get("warmup", pd.Series(False, index=requests.index)).fillna(False).astype(bool)
    done = set(windows["window_id"]) if not windows.empty else set()
    keep &= requests["window_id"].isin(done)
    return requests[keep]


def compute_cells(
    requests: pd.DataFrame,
    windows: pd.DataFrame,
    baseline: str,
    *,
    max_error_rate: float = 0.0,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per variant x sweep point with the columns in CELL_COLUMNS (see docs/metrics.md)."""
    bs = BootstrapSettings(n_resamples=n_resamples, confidence=confidence, seed=seed)
    req = measured_requests(requests, windows)
    if req.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)

    cells: list[_Cell] = []
    for cell_id, df in req.groupby("cell_id", sort=True):
        first = df.iloc[0]
        key = {c: (_key_nan(first[c]) if c in first else None) for c in KEY_COLUMNS}
        win = windows[windows["window_id"].isin(set(df["window_id"]))]
        cells.append(
            _summarize_cell(
                key,
                _to_reqs(df),
                win,
                is_baseline=key["variant"] == baseline,
                max_error_rate=max_error_rate,
                bs=bs,
            )
        )

    base_cells = {c.row["point_id"]: c for c in cells if c.row["is_baseline"]}
    base_by_prompt: dict[tuple[Any, ...], list[_Req]] = {}
    for c in sorted(base_cells.values(), key=lambda c: c.row["concurrency"]):
        if c.row["temperature"] == 0:
            for r in c.reqs:
                if r.ok:
                    key = (r.prompt_id, _key_nan(c.row["input_len"]), c.row["output_len"])
                    base_by_prompt.setdefault(key, []).append(r)

    for c in cells:
        row = c.row
        base = base_cells.get(row["point_id"])
        has_base = base is not None and bool(base.row["valid"])
        if row["is_baseline"]:
            row.update(speedup=1.0, per_user_speedup=1.0, tpot_speedup=1.0)  # the baseline against itself
        elif has_base and row["valid"]:
            row.update(_speedups(c, base, bs))  # type: ignore[arg-type]
        if not row["is_baseline"] and row["temperature"] == 0:
            (row["lossless_match_rate"], row["lossless_any_match_rate"],
             row["lossless_prefix_mean"]) = _lossless(c, base, base_by_prompt)
        if not row["valid"]:
            for col in INVALID_BLANKED:
                row[col] = NAN
        ws = cell_warnings(
            is_baseline=row["is_baseline"],
            valid=row["valid"],
            repeats=row["repeats"],
            window_throughputs=[c.window_tp[k] for k in sorted(c.window_tp)],
            n_requests=row["n_requests"],
            n_errors=row["n_errors"],
            outlier_count=row["outlier_count"],
            throughput_cv=row["throughput_cv"],
            acceptance_length=row["acceptance_length"],
            acceptance_source=row["acceptance_source"],
            lossless_match_rate=row["lossless_match_rate"],
            lossless_any_match_rate=row["lossless_any_match_rate"],
            concurrency=row["concurrency"],
            has_baseline=has_base,
        )
        row["warnings"] = ";".join(w.code.value for w in ws)

    out = pd.DataFrame([c.row for c in cells], columns=CELL_COLUMNS)
    return out.sort_values(["variant", "category", "output_len", "temperature", "concurrency"], kind="stable").reset_index(
        drop=True
    )


def adaptive_done(
    window_throughputs: Sequence[float],
    target_rel_half_width: float,
    *,
    confidence: float = 0.95,
    seed: int = 0,
) -> bool:
    """True when the bootstrap interval of the mean window throughput is narrow enough:
    (ci_high - ci_low) / 2 / mean <= target. Needs MIN_REPEATS_FOR_INTERVAL finite windows."""
    xs = [x for x in window_throughputs if x is not None and math.isfinite(x)]
    if len(xs) < MIN_REPEATS_FOR_INTERVAL:
        return False
    lo, hi = stats.bootstrap_ci(xs, np.mean, confidence=confidence, seed=seed)
    m = float(np.mean(xs))
    if lo is None or hi is None or m <= 0:
        return False
    return (hi - lo) / 2 / m <= target_rel_half_width


def break_even_table(cells: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """One row per non-baseline variant x category x input_len x output_len x temperature: where the
    speedup crosses 1.0 as concurrency grows (stats.break_even). Invalid cells count as missing."""
    if cells.empty:
        return pd.DataFrame(columns=BREAK_EVEN_COLUMNS)
    is_base = cells["variant"] == baseline if baseline is not None else cells["is_baseline"].astype(bool)
    rows = []
    for key, g in cells[~is_base].groupby(BREAK_EVEN_GROUP, dropna=False, sort=True):
        g = g.sort_values("concurrency")
        be = stats.break_even(
            g["concurrency"].astype(int).tolist(),
            g["speedup"].astype(float).tolist(),
            g["speedup_ci_low"].astype(float).tolist(),
            g["speedup_ci_high"].astype(float).tolist(),
        )
        rows.append(
            dict(
                zip(BREAK_EVEN_GROUP, key),
                break_even_concurrency=NAN if be.break_even_concurrency is None else be.break_even_concurrency,
                status=be.status,
                verdict=be.verdict,
                uncertain_from=NAN if be.uncertain_from is None else be.uncertain_from,
                last_confident=NAN if be.last_confident is None else be.last_confident,
            )
        )
    return pd.DataFrame(rows, columns=BREAK_EVEN_COLUMNS)

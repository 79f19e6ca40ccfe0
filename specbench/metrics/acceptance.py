"""Acceptance of one cell: tau (tokens per target step) from per-request spec details or from window
counter deltas, vLLM's draft acceptance length, the acceptance rate, per-position acceptance, and
which source was used."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from specbench.decide import stats
from specbench.decide.intervals import unit_key
from specbench.metrics.common import NAN, as_float, interval_or_nan, opt_list, opt_str, safe_ratio
from specbench.metrics.requests import MeasuredRequest, measured_requests, request_output_tokens

REQUEST_ACCEPTANCE_COLUMNS = ["variant", "category", "point_id", "window_id", "repeat", "index", "prompt_id",
                              "output_tokens", "verify_steps", "drafted_steps", "accepted_drafts",
                              "proposed_drafts", "acceptance_length", "draft_acceptance_length", "source"]


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


def request_acceptance_length(n_out: float, verify_steps: Any) -> float:
    """One request's tau = n_out / verify_steps (tokens per target step, bonus token included)."""
    return safe_ratio(n_out, as_float(verify_steps))


def cell_acceptance(reqs: list[MeasuredRequest], windows: pd.DataFrame, is_plain: bool,
                    n_launches: int) -> dict[str, Any]:
    """acceptance_length (+ci), draft_acceptance_length, acceptance_rate, per-position, source, and the
    fraction of verify steps that accepted every draft (full_accept_fraction). `is_plain`: the variant
    decodes without drafting (the baseline), so its acceptance length is 1.0 without any data."""
    # A missing or reset counter leaves that window's acceptance unknown, never read as 0.
    win, unknown = counter_windows(windows, reqs)
    out: dict[str, Any] = {
        "acceptance_length": NAN,
        "acceptance_length_ci_low": NAN,
        "acceptance_length_ci_high": NAN,
        "draft_acceptance_length": NAN,
        "acceptance_rate": NAN,
        "acceptance_per_position": None,
        "acceptance_source": "none",
        "full_accept_fraction": NAN,
        "acceptance_unknown_windows": unknown,
        "acceptance_length_request_mean": NAN,
        "acceptance_length_request_p10": NAN,
        "acceptance_length_request_p90": NAN,
    }
    ok = [r for r in reqs if r.ok]

    # Source 1: per-request spec details. tau = sum(n_out) / sum(verify_steps), pooled over the cell.
    with_steps: list[tuple[MeasuredRequest, dict[str, Any]]] = [
        (r, r.spec) for r in ok if r.spec and (r.spec.get("verify_steps") or 0) > 0 and math.isfinite(r.n_out)
    ]
    if with_steps:
        tokens: dict[Any, float] = {}
        steps: dict[Any, float] = {}
        for r, spec in with_steps:
            u = unit_key(r.launch, r.repeat, n_launches)
            tokens[u] = tokens.get(u, 0.0) + r.n_out
            steps[u] = steps.get(u, 0.0) + float(spec["verify_steps"])
        out["acceptance_length"] = safe_ratio(sum(tokens.values()), sum(steps.values()))
        ci = stats.ratio_estimator_ci(list(tokens.values()), list(steps.values()))  # same keys, same order
        out["acceptance_length_ci_low"], out["acceptance_length_ci_high"] = interval_or_nan(ci.bounds)
        out["acceptance_source"] = "request"
        acc = [sp for _, sp in with_steps if sp.get("accepted_drafts") is not None and sp.get("proposed_drafts")]
        if acc:
            # acceptance rate = accepted draft tokens / proposed draft tokens
            out["acceptance_rate"] = safe_ratio(
                float(sum(sp["accepted_drafts"] for sp in acc)), float(sum(sp["proposed_drafts"] for sp in acc))
            )
            out["full_accept_fraction"] = _full_accept_from_histograms(acc)
        out["acceptance_per_position"] = _per_position_from_histograms(
            [sp.get("accept_histogram") for _, sp in with_steps]
        )
        # the per-request distribution: each request's tau weighs the same, however long its output
        per_req = [request_acceptance_length(r.n_out, sp["verify_steps"]) for r, sp in with_steps]
        out["acceptance_length_request_mean"] = stats.mean(per_req)
        out["acceptance_length_request_p10"] = stats.percentile(per_req, 10)
        out["acceptance_length_request_p90"] = stats.percentile(per_req, 90)
        with_drafts = [sp for _, sp in with_steps if sp.get("drafted_steps") is not None
                       and sp.get("accepted_drafts") is not None]
        if len(with_drafts) == len(with_steps):
            # vLLM's definition from per-request figures: 1 + sum(accepted) / sum(drafting steps)
            out["draft_acceptance_length"] = draft_acceptance_length(
                float(sum(sp["accepted_drafts"] for sp in with_drafts)),
                float(sum(sp["drafted_steps"] for sp in with_drafts)))

    # Source 2: window counter deltas (vLLM spec_decode counters, or a command engine's verify-step counter).
    if win:
        drafted = [w for w in win if math.isfinite(w.num_accepted_tokens)]
        accepted = sum(w.num_accepted_tokens for w in drafted)
        drafts = sum(w.num_drafts for w in drafted)
        if drafted and not math.isfinite(out["draft_acceptance_length"]):  # per-request figures come first
            out["draft_acceptance_length"] = draft_acceptance_length(accepted, drafts)
        if out["acceptance_source"] == "none":
            g = [w.generation_tokens for w in win]
            s = [w.steps for w in win]
            out["acceptance_length"] = safe_ratio(sum(g), sum(s))  # = tau_from_counters on the sums
            out["acceptance_source"] = "counters" if math.isfinite(out["acceptance_length"]) else "none"
            if out["acceptance_source"] == "counters":
                gu: dict[Any, float] = {}
                su: dict[Any, float] = {}
                for w in win:
                    u = unit_key(w.launch, w.repeat, n_launches)
                    gu[u] = gu.get(u, 0.0) + w.generation_tokens
                    su[u] = su.get(u, 0.0) + w.steps
                ci = stats.ratio_estimator_ci(list(gu.values()), list(su.values()))
                out["acceptance_length_ci_low"], out["acceptance_length_ci_high"] = interval_or_nan(ci.bounds)
            if drafted:
                out["acceptance_rate"] = safe_ratio(accepted, sum(w.num_draft_tokens for w in drafted))
        positions = [w.per_position_accepted for w in win if w.per_position_accepted]
        if positions and drafts > 0:
            width = max(len(p) for p in positions)
            summed = np.zeros(width)
            for p in positions:
                summed[: len(p)] += p
            # per-position acceptance = accepted at draft position i / drafts (vLLM's definition)
            out["acceptance_per_position"] = [float(x) for x in summed / drafts]
            draft_tokens = sum(w.num_draft_tokens for w in drafted)
            if math.isnan(out["full_accept_fraction"]) and draft_tokens > 0:
                # drafting steps that accepted every draft = accepted at the last position (k = tokens/drafts)
                k = round(draft_tokens / drafts)
                out["full_accept_fraction"] = float(summed[k - 1] / drafts) if 0 < k <= width else NAN

    if out["acceptance_source"] == "none" and is_plain:
        out["acceptance_length"] = 1.0  # plain decoding: one token per target step
    return out


def _full_accept_from_histograms(specs: list[dict[str, Any]]) -> float:
    """Fraction of verify steps that accepted all k drafts (k = proposed / steps) from per-request
    histograms H[j] = steps that accepted j drafts; NaN without histograms. `specs` all have
    verify_steps > 0 and proposed_drafts."""
    full = total = 0.0
    for sp in specs:
        h = sp.get("accept_histogram")
        if not h:
            continue
        k = round(float(sp["proposed_drafts"]) / float(sp["verify_steps"]))
        full += float(h[k]) if 0 < k < len(h) else 0.0
        total += float(sum(h))
    return full / total if total > 0 else NAN


def _per_position_from_histograms(hists: Iterable[Any]) -> list[float] | None:
    """From histograms H[j] = steps that accepted j drafts: P(position i accepted) = sum_{j>i} H[j] / sum H."""
    hs = [h for h in hists if h]
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
    launch: int
    repeat: int
    generation_tokens: float
    num_accepted_tokens: float  # NaN: the engine has no accepted-token counter (verify_steps instead)
    num_drafts: float
    num_draft_tokens: float
    verify_steps: float  # NaN unless the engine counts verify steps itself (engine.acceptance_metric)
    per_position_accepted: list[float] | None

    @property
    def steps(self) -> float:
        """Target steps in the window: counted, else generated - accepted (each step adds accepted + 1)."""
        if math.isfinite(self.verify_steps):
            return self.verify_steps
        return self.generation_tokens - self.num_accepted_tokens


RESET_TOLERANCE = 0.01
SPEC_COUNTERS = ("num_accepted_tokens", "num_drafts", "num_draft_tokens", "generation_tokens", "verify_steps")


def _counters_reset(c: dict[str, Any], per_position: Any, gen: float, delivered: float) -> bool:
    """A counter went backwards, or the engine counted fewer generated tokens than its responses carried:
    the counters restarted from zero inside the window (RESET_TOLERANCE allows for rounding)."""
    if any(as_float(c.get(k)) < 0 for k in SPEC_COUNTERS) or any(x < 0 for x in opt_list(per_position) or []):
        return True
    return math.isfinite(gen) and math.isfinite(delivered) and gen < (1 - RESET_TOLERANCE) * delivered


def counter_windows(windows: pd.DataFrame, reqs: list[MeasuredRequest]) -> tuple[list[_WindowCounters], int]:
    """Counter deltas per window (generation tokens fall back to the window's successful usage sum), and
    how many windows have counters but no usable acceptance. A window counts when it has an accepted-token
    or a verify-step delta; one without either (a counter the engine does not expose is absent, never 0)
    or whose counters were reset inside it (the engine restarted) is unknown, never 1.0."""
    out: list[_WindowCounters] = []
    unknown = 0
    usage: dict[str, float] = {}  # window_id -> tokens its successful requests carried
    for r in reqs:
        if r.ok and math.isfinite(r.n_out):
            usage[r.window_id] = usage.get(r.window_id, 0.0) + r.n_out
    for w in windows.to_dict("records"):
        c = w.get("counters")
        if not isinstance(c, dict):
            continue  # this engine reads no counters
        launch = int(as_float(w.get("launch"))) if math.isfinite(as_float(w.get("launch"))) else 1
        delivered = usage.get(str(w["window_id"]), NAN)
        gen = as_float(c.get("generation_tokens"))
        no_acceptance = c.get("num_accepted_tokens") is None and c.get("verify_steps") is None
        if no_acceptance or _counters_reset(c, w.get("per_position_accepted"), gen, delivered):
            unknown += 1
            continue
        if not math.isfinite(gen):
            gen = delivered
        out.append(
            _WindowCounters(
                launch=launch,
                repeat=int(w["repeat"]),
                generation_tokens=gen,
                num_accepted_tokens=as_float(c.get("num_accepted_tokens")),
                num_drafts=as_float(c.get("num_drafts")),
                num_draft_tokens=as_float(c.get("num_draft_tokens")),
                verify_steps=as_float(c.get("verify_steps")),
                per_position_accepted=opt_list(w.get("per_position_accepted")),
            )
        )
    return [w for w in out if math.isfinite(w.generation_tokens) and math.isfinite(w.steps)], unknown



def request_acceptance_table(requests: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """acceptance.csv: one row per measured successful request that reports per-request acceptance, with
    its tau (`acceptance_length` = n_out / verify_steps) and vLLM's draft figure (1 + accepted / drafting
    steps). The report's acceptance distributions are drawn from it."""
    req = measured_requests(requests, windows)
    rows = []
    for r in req.to_dict("records"):  # without a spec column every r.get("spec") is None
        spec = r.get("spec")
        if opt_str(r.get("error")) is not None or not isinstance(spec, dict) or not spec.get("verify_steps"):
            continue
        n_out = request_output_tokens(r.get("output_tokens"), opt_list(r.get("chunk_tokens")))
        rows.append({
            **{k: r.get(k) for k in ("variant", "category", "point_id", "window_id", "repeat", "index", "prompt_id")},
            "output_tokens": n_out,
            **{k: spec.get(k) for k in ("verify_steps", "drafted_steps", "accepted_drafts", "proposed_drafts")},
            "acceptance_length": request_acceptance_length(n_out, spec["verify_steps"]),
            "draft_acceptance_length": draft_acceptance_length(as_float(spec.get("accepted_drafts")),
                                                               as_float(spec.get("drafted_steps"))),
            "source": spec.get("source") or "",
        })
    return pd.DataFrame(rows, columns=REQUEST_ACCEPTANCE_COLUMNS)

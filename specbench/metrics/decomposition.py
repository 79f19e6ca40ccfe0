"""Why a drafter pays or not (decomposition.csv): each drafter cell's speedup as acceptance x step cost x
residual, speedup = AL / r x residual, exactly (docs/metrics.md, "Decomposition").

AL is the cell's acceptance length (tokens per target step), r the step-cost ratio (the drafter's mean target
step time over the baseline's at the same point), and the residual the ratio of the two sides' decode
occupancy (the requests a window keeps decoding on average, measured in step times): what prefill, the
window's tail and queueing take or give. Each side's terms come from its own records, so the identity is a
check of the arithmetic, not a definition: residual is not computed from the speedup. r carries a 95%
interval over launches (step_cost_ratio_ci_low/_high), from each launch's step time on both sides.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from specbench.decide import stats
from specbench.metrics.acceptance import counter_windows
from specbench.metrics.columns import KEY_COLUMNS
from specbench.metrics.common import NAN, as_float, interval_or_nan, safe_ratio
from specbench.metrics.requests import (
    MeasuredRequest,
    measured_requests,
    request_decode_time,
    request_target_steps,
    to_measured_requests,
)

DECOMPOSITION_COLUMNS = KEY_COLUMNS + [
    "speedup",
    "acceptance_length",
    "step_time_s",
    "step_source",
    "baseline_step_time_s",
    "step_cost_ratio",
    "step_cost_ratio_ci_low",
    "step_cost_ratio_ci_high",
    "decode_occupancy",
    "baseline_decode_occupancy",
    "residual",
    "break_even_acceptance_length",
    "prefill_share",
    "baseline_prefill_share",
    "reason",
]
TERMS = ["step_time_s", "baseline_step_time_s", "step_cost_ratio", "decode_occupancy", "baseline_decode_occupancy",
         "residual", "break_even_acceptance_length"]

NO_STEPS = "no target steps (the engine reported no verify_steps per request and no step counters)"


def step_time(reqs: Iterable[MeasuredRequest], plain: bool) -> tuple[float, float]:
    """(mean target step time in s, prefill share) of a cell's successful requests.

    step time = sum(decode time) / sum(target steps - 1), pooled over the requests whose steps are known (the
    first step is the prefill, whose time is TTFT); prefill share = sum(TTFT) / sum(e2e) over every successful
    request with both times. Step time NaN: no steps known."""
    decode = steps = ttft = e2e = 0.0
    for r in reqs:
        d = request_decode_time(r.e2e, r.ttft)
        if not (r.ok and math.isfinite(d)):
            continue
        ttft, e2e = ttft + r.ttft, e2e + r.e2e
        if math.isfinite(k := request_target_steps(r.n_out, r.spec, plain)):
            decode, steps = decode + d, steps + k - 1
    # no decode time at all (every token in the first chunk) gives no step time, never a step of 0 s
    return (safe_ratio(decode, steps) if decode > 0 else NAN), safe_ratio(ttft, e2e)


def launch_step_times(reqs: Iterable[MeasuredRequest], plain: bool) -> list[float]:
    """Each launch's mean target step time (s): step_time over that launch's requests, launches in order
    (NaN for a launch without known steps)."""
    by_launch: dict[int, list[MeasuredRequest]] = {}
    for r in reqs:
        by_launch.setdefault(r.launch, []).append(r)
    return [step_time(rs, plain)[0] for _, rs in sorted(by_launch.items())]


def step_cost_interval(launches: list[float], base_launches: list[float]) -> tuple[float, float]:
    """The 95% interval of r over launches (docs/metrics.md, "Decomposition"): the speedup's Welch t on
    the log ratio (stats.ratio_ci) of the drafter's launch step times against the baseline's. The two
    cells ran in separate launches, so nothing is paired. NaN with fewer than 2 launches on either side."""
    return interval_or_nan(stats.ratio_ci(launches, base_launches).bounds)


def counter_step_time(reqs: list[MeasuredRequest], windows: pd.DataFrame, launch: int | None = None) -> float:
    """Mean target step time (s) from the windows' engine counters, for a drafter whose requests carry no
    target steps: sum(decode time) / sum(window steps - its requests) over the windows whose counters are
    usable and whose every request succeeded (a request's first step is its prefill), of one `launch` if
    given; NaN without one."""
    decode = steps = 0.0
    for w in counter_windows(windows, reqs)[0]:
        if launch is not None and w.launch != launch:
            continue
        rs = [r for r in reqs if (r.launch, r.repeat) == (w.launch, w.repeat)]
        times = [request_decode_time(r.e2e, r.ttft) for r in rs]
        if rs and all(r.ok for r in rs) and all(math.isfinite(t) for t in times) and w.steps > len(rs):
            decode, steps = decode + sum(times), steps + w.steps - len(rs)
    return safe_ratio(decode, steps) if decode > 0 else NAN


def decode_occupancy(throughput: float, step_s: float, acceptance_length: float) -> float:
    """Requests decoding at once on average = throughput / AL (target steps a second) x step time (s)."""
    return safe_ratio(throughput, acceptance_length) * step_s


def _cell_terms(row: Mapping[Any, Any], base: Mapping[Any, Any] | None, side: tuple[float, float],
                base_side: tuple[float, float]) -> dict[str, Any]:
    """One drafter cell's terms from its cells.csv row, its baseline's, and each side's (step time, prefill
    share). Undefined terms are NaN with the first reason why."""
    out: dict[str, Any] = {"speedup": as_float(row["speedup"]), "acceptance_length": as_float(row["acceptance_length"])}
    out.update({t: NAN for t in TERMS})
    out["prefill_share"], out["baseline_prefill_share"] = side[1], base_side[1]
    if base is None:
        return out | {"reason": "no baseline cell at this point"}
    t, tb = side[0], base_side[0]
    out["step_time_s"], out["baseline_step_time_s"] = t, tb
    # r = step time(drafter) / step time(baseline), same point
    out["step_cost_ratio"] = r = safe_ratio(t, tb)
    al = out["acceptance_length"]
    out["decode_occupancy"] = decode_occupancy(as_float(row["output_throughput_tok_s"]), t, al)
    # the baseline decodes one token a target step (its steps are its tokens): AL = 1
    out["baseline_decode_occupancy"] = decode_occupancy(as_float(base["output_throughput_tok_s"]), tb, 1.0)
    reason = ""
    if not math.isfinite(t):
        reason = NO_STEPS
    elif not math.isfinite(tb):
        reason = "no baseline step time (no request with a decode time: two or more tokens, not all at once)"
    elif not math.isfinite(al):
        reason = "no acceptance length"
    elif not math.isfinite(out["speedup"]):
        reason = "no speedup at this point (an invalid or withheld cell)"
    if reason:
        return out | {"reason": reason}
    # residual = decode occupancy(drafter) / decode occupancy(baseline); speedup = AL / r x residual
    out["residual"] = res = safe_ratio(out["decode_occupancy"], out["baseline_decode_occupancy"])
    # break-even acceptance AL* = r / residual: the acceptance at which this cell's speedup would be 1
    out["break_even_acceptance_length"] = safe_ratio(r, res)
    return out | {"reason": ""}


def decomposition_table(requests: pd.DataFrame, windows: pd.DataFrame, cells: pd.DataFrame, baseline: str,
                        plain: frozenset[str] = frozenset()) -> pd.DataFrame:
    """decomposition.csv: one row per drafter cell (every variant but the baseline) with the columns of
    DECOMPOSITION_COLUMNS. `requests`: the run's scalar columns and `spec` (no chunk lists or outputs needed);
    `cells`: compute_cells' table of the same run; `plain`: variants that decode without drafting."""
    if not len(cells):
        return pd.DataFrame(columns=DECOMPOSITION_COLUMNS)
    req = measured_requests(requests, windows)
    by_cell = {str(cid): to_measured_requests(g) for cid, g in req.groupby("cell_id", sort=False)} if len(req) else {}
    rows = cells.to_dict("records")
    sides: dict[str, tuple[float, float]] = {}
    source: dict[str, str] = {}
    launches: dict[str, list[float]] = {}  # per launch step times, from the requests or the counters
    for c in rows:
        cid = f"{c['variant']}|{c['point_id']}"
        reqs = by_cell.get(cid, [])
        is_plain = c["variant"] == baseline or c["variant"] in plain
        sides[cid] = step_time(reqs, is_plain)
        source[cid] = "request" if math.isfinite(sides[cid][0]) else ""
        launches[cid] = launch_step_times(reqs, is_plain) if source[cid] == "request" else []
        if not source[cid] and len(windows) and "cell_id" in windows:  # the engine's counters, window by window
            mine = windows[windows["cell_id"] == cid]
            t = counter_step_time(reqs, mine)
            sides[cid], source[cid] = (t, sides[cid][1]), "counters" if math.isfinite(t) else ""
            launches[cid] = [counter_step_time(reqs, mine, n) for n in sorted({r.launch for r in reqs})]
    bases = {c["point_id"]: c for c in rows if c["variant"] == baseline}
    out = []
    for c in rows:
        if c["variant"] == baseline:
            continue
        base = bases.get(c["point_id"])
        bid = f"{baseline}|{c['point_id']}"
        base_side = sides[bid] if base is not None else (NAN, NAN)
        cid = f"{c['variant']}|{c['point_id']}"
        lo, hi = step_cost_interval(launches[cid], launches[bid] if base is not None else [])
        out.append({**{k: c[k] for k in KEY_COLUMNS}, "step_source": source[cid],
                    **_cell_terms(c, base, sides[cid], base_side),
                    "step_cost_ratio_ci_low": lo, "step_cost_ratio_ci_high": hi})
    return pd.DataFrame(out, columns=DECOMPOSITION_COLUMNS)

"""Why a drafter pays or not (decomposition.csv): each drafter cell's speedup as acceptance x step cost x
residual, speedup = AL / r x residual, exactly (docs/metrics.md, "Decomposition").

AL is the cell's acceptance length (tokens per target step), r the step-cost ratio (the drafter's mean target
step time over the baseline's at the same point), and the residual the ratio of the two sides' decode
occupancy (the requests a window keeps decoding on average, measured in step times): what prefill, the
window's tail and queueing take or give. Each side's terms come from its own records, so the identity is a
check of the arithmetic, not a definition: residual is not computed from the speedup.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from specbench.metrics.columns import KEY_COLUMNS
from specbench.metrics.common import NAN, as_float, safe_ratio
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
    "baseline_step_time_s",
    "step_cost_ratio",
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

NO_STEPS = "no target steps per request (the engine reported no verify_steps)"


def step_time(reqs: Iterable[MeasuredRequest], plain: bool) -> tuple[float, float]:
    """(mean target step time in s, prefill share) of a cell's successful requests.

    step time = sum(decode time) / sum(target steps - 1), pooled over the requests whose steps are known (the
    first step is the prefill, whose time is TTFT); prefill share = sum(TTFT) / sum(e2e). Steps NaN: none known."""
    decode = steps = ttft = e2e = 0.0
    for r in reqs:
        k, d = request_target_steps(r.n_out, r.spec, plain), request_decode_time(r.e2e, r.ttft)
        if r.ok and math.isfinite(k) and math.isfinite(d):
            decode, steps, ttft, e2e = decode + d, steps + k - 1, ttft + r.ttft, e2e + r.e2e
    return safe_ratio(decode, steps), safe_ratio(ttft, e2e)


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
        reason = "no baseline step time (no request with two or more tokens)"
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
    for c in rows:
        cid = f"{c['variant']}|{c['point_id']}"
        sides[cid] = step_time(by_cell.get(cid, []), c["variant"] == baseline or c["variant"] in plain)
    bases = {c["point_id"]: c for c in rows if c["variant"] == baseline}
    out = []
    for c in rows:
        if c["variant"] == baseline:
            continue
        base = bases.get(c["point_id"])
        base_side = sides[f"{baseline}|{c['point_id']}"] if base is not None else (NAN, NAN)
        out.append({**{k: c[k] for k in KEY_COLUMNS},
                    **_cell_terms(c, base, sides[f"{c['variant']}|{c['point_id']}"], base_side)})
    return pd.DataFrame(out, columns=DECOMPOSITION_COLUMNS)

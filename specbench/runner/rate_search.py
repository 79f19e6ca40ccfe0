"""`capacity.search`: rates added by bisection once a variant's configured rates are measured.

For each latency-vs-rate curve (category x input length x output length x temperature) and each SLO (and,
with several, all of them at once), the next rate is the midpoint between the highest measured rate that
meets the SLO and the lowest that misses it (metrics.capacity.next_rate), until the two are within
`capacity.tolerance` or `capacity.max_steps` windows were added. Every rate's schedule derives from the
plan (seed, rate), so the baseline and a drafter offered the same rate get the same requests; the rates
themselves differ where their capacities do. The search runs in each variant's first launch; it is decided
from the records alone, so a resumed run continues it where it stopped.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import pandas as pd

from specbench.config import RunConfig
from specbench.metrics.capacity import next_rate
from specbench.metrics.openloop import open_loop_table, rate_points, slo_sets
from specbench.metrics.slo import parse_slos
from specbench.plan.windows import SweepPoint
from specbench.records.rundir import records_frame
from specbench.shared.schema import RequestRecord


def curves(points: Sequence[SweepPoint]) -> dict[tuple[object, ...], list[SweepPoint]]:
    """The configured open-loop points grouped by curve (everything but the rate)."""
    out: dict[tuple[object, ...], list[SweepPoint]] = {}
    for p in points:
        if p.rate is not None:
            out.setdefault((p.category, p.input_len, p.output_len, p.temperature), []).append(p)
    return out


def next_search_rate(cfg: RunConfig, variant: str, curve: Sequence[SweepPoint],
                     records: Mapping[str, Sequence[RequestRecord]]) -> float | None:
    """The next rate the search wants on one curve of `variant`, from the records of its completed windows
    (window id -> records); None when every SLO's bracket is narrow enough or the step budget is spent."""
    slos = parse_slos(cfg.slo)
    if not cfg.capacity.search or not slos:
        return None
    cells = {p.key(variant).cell_id for p in curve}
    configured = {p.rate for p in curve}
    mine = [r for w, rs in records.items() for r in rs if r.variant == variant]
    head = curve[0]
    same = [r for r in mine if (r.category, r.input_len, r.output_len, r.temperature) ==
            (head.category, head.input_len, head.output_len, head.temperature) and r.rate is not None]
    if not same or not cells <= {r.cell_id for r in same}:
        return None  # the configured rates come first
    added = {r.rate for r in same} - configured
    if len(added) >= cfg.capacity.max_steps * len(slo_sets(slos)):
        return None
    windows = pd.DataFrame({"window_id": sorted({r.window_id for r in same})})
    table = open_loop_table(records_frame(same), windows, slos, lag_bound_s=cfg.sweep.load.max_send_lag_s)
    for _, slo, threshold in slo_sets(slos):
        rate = next_rate(rate_points(table, slo, slos), threshold, cfg.capacity.tolerance)
        if rate is not None:
            return rate
    return None


def pending(cfg: RunConfig, variant: str, points: Sequence[SweepPoint], done: Collection[str],
            records: Mapping[str, Sequence[RequestRecord]]) -> list[SweepPoint]:
    """Search points still to measure for `variant` as far as is known now (one per curve at most)."""
    out = []
    for curve in curves(points).values():
        rate = next_search_rate(cfg, variant, curve, {w: rs for w, rs in records.items() if w in done})
        if rate is not None:
            out.append(curve[0].at_rate(rate))
    return out

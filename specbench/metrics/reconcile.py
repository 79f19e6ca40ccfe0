"""Per-window cross-checks of the client's raw records against the engine's own books.

Acceptance: the per-request speculative figures of a window's requests must add up to the window's
counter deltas (vLLM counts both in the same scheduler branch, so they agree exactly when only the
window's requests ran). Timing: the client's mean TTFT and end-to-end latency must not fall below the
server's histograms (the server's interval lies inside the client's) nor exceed them by more than the
network and the client can explain. Pure: numbers in, checks and typed warnings out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from specbench.metrics.common import NAN, as_float
from specbench.metrics.requests import MeasuredRequest, measured_requests, to_measured_requests
from specbench.metrics.warnings import (
    TIMING_ABOVE_ABS_S,
    TIMING_ABOVE_REL,
    TIMING_BELOW_ABS_S,
    TIMING_BELOW_REL,
    CellWarning,
    WarningCode,
)

# per-request SpecDetails field -> window counter it must add up to
ACCEPTANCE_FIELDS = {"drafted_steps": "num_drafts", "accepted_drafts": "num_accepted_tokens",
                     "proposed_drafts": "num_draft_tokens"}
# a command-engine server that counts verify steps (engine.acceptance_metric) next to a per-response field
VERIFY_STEP_FIELDS = {"verify_steps": "verify_steps"}
ACCEPTANCE_GROUPS = (ACCEPTANCE_FIELDS, VERIFY_STEP_FIELDS)  # the first whose counters a window has is checked
TIMING_COUNTERS = ("ttft_sum_s", "ttft_count", "e2e_sum_s", "e2e_count")


@dataclass(frozen=True)
class AcceptanceCheck:
    """One window: the per-request sums next to the counter deltas."""

    window_id: str
    repeat: int
    requests: int  # successful requests in the window
    missing: int  # of those, requests without per-request figures
    per_request: dict[str, float]  # counter name -> sum of the matching per-request field
    counters: dict[str, float]  # counter name -> delta over the window
    launch: int = 1

    @property
    def where(self) -> str:
        return _where(self.launch, self.repeat)

    @property
    def differences(self) -> dict[str, float]:
        """counter name -> per-request sum - counter delta, only where they differ."""
        return {k: self.per_request[k] - self.counters[k] for k in self.counters
                if abs(self.per_request[k] - self.counters[k]) > 0.5}  # integer counts

    @property
    def ok(self) -> bool:
        return self.missing == 0 and not self.differences


@dataclass(frozen=True)
class TimingCheck:
    """One window: the client's mean TTFT / e2e next to the server histograms' sum/count deltas."""

    window_id: str
    repeat: int
    client_requests: int
    server_requests: float  # histogram count delta (TTFT)
    client_ttft_mean_s: float
    server_ttft_mean_s: float
    client_e2e_mean_s: float
    server_e2e_mean_s: float
    launch: int = 1

    @property
    def where(self) -> str:
        return _where(self.launch, self.repeat)

    @property
    def same_requests(self) -> bool:
        return self.server_requests == self.client_requests


def _where(launch: int, repeat: int) -> str:
    """A window as a warning names it: r<repeat>, l<launch>r<repeat> in later launches (as its window_id)."""
    return f"r{repeat}" if launch == 1 else f"l{launch}r{repeat}"


def _window_rows(windows: pd.DataFrame) -> list[dict[str, Any]]:
    """Windows whose counters cover only measured requests: an open-loop window's counters also hold its
    ramp-up requests (extra.warmup_requests), which no measured record accounts for, so it is not checked."""
    rows = [{str(k): v for k, v in w.items()} for w in windows.to_dict("records")]
    return [w for w in rows if not (isinstance(w.get("extra"), dict) and w["extra"].get("warmup_requests"))]


def _launch(w: dict[str, Any]) -> int:
    """The window's launch (1 in records written before launches existed)."""
    la = as_float(w.get("launch"))
    return int(la) if math.isfinite(la) else 1


def _counters(w: dict[str, Any], names: tuple[str, ...] | list[str]) -> dict[str, float] | None:
    """The window's counter deltas for `names`, or None when any is missing (unknown, never zero)."""
    c = w.get("counters")
    if not isinstance(c, dict):
        return None
    vals = {k: as_float(c.get(k)) for k in names}
    return vals if all(math.isfinite(v) for v in vals.values()) else None


def acceptance_checks(reqs: list[MeasuredRequest], windows: pd.DataFrame) -> list[AcceptanceCheck]:
    """Windows whose per-request acceptance can be reconciled: counters present, every request succeeded
    (a failed request's drafts are in the counters but not in any record), at least one request with
    per-request figures (none: the engine does not report them, nothing to check)."""
    out = []
    for w in _window_rows(windows):
        fields, counters = _acceptance_counters(w)
        rs = [r for r in reqs if r.window_id == str(w["window_id"])]
        if counters is None or not rs or not all(r.ok for r in rs):
            continue
        with_fig = [r for r in rs if r.spec and all(r.spec.get(f) is not None for f in fields)]
        if not with_fig:
            continue
        sums = {c: float(sum(r.spec[f] for r in with_fig if r.spec)) for f, c in fields.items()}
        out.append(AcceptanceCheck(window_id=str(w["window_id"]), repeat=int(w["repeat"]), requests=len(rs),
                                   missing=len(rs) - len(with_fig), per_request=sums, counters=counters,
                                   launch=_launch(w)))
    return out


def _acceptance_counters(w: dict[str, Any]) -> tuple[dict[str, str], dict[str, float] | None]:
    """The first field group whose counters the window has, with their deltas (None: no group)."""
    for fields in ACCEPTANCE_GROUPS:
        counters = _counters(w, list(fields.values()))
        if counters is not None:
            return fields, counters
    return ACCEPTANCE_FIELDS, None


def timing_checks(reqs: list[MeasuredRequest], windows: pd.DataFrame) -> list[TimingCheck]:
    """Windows with the server's latency histograms and only successful requests (an aborted request is
    in the client's records but not in vLLM's histograms)."""
    out = []
    for w in _window_rows(windows):
        c = _counters(w, TIMING_COUNTERS)
        rs = [r for r in reqs if r.window_id == str(w["window_id"])]
        if c is None or not rs or not all(r.ok and math.isfinite(r.ttft) and math.isfinite(r.e2e) for r in rs):
            continue
        # client mean = mean over the window's requests; server mean = d(sum) / d(count) of its histogram
        out.append(TimingCheck(
            window_id=str(w["window_id"]), repeat=int(w["repeat"]), client_requests=len(rs),
            server_requests=c["ttft_count"],
            client_ttft_mean_s=sum(r.ttft for r in rs) / len(rs),
            server_ttft_mean_s=c["ttft_sum_s"] / c["ttft_count"] if c["ttft_count"] > 0 else NAN,
            client_e2e_mean_s=sum(r.e2e for r in rs) / len(rs),
            server_e2e_mean_s=c["e2e_sum_s"] / c["e2e_count"] if c["e2e_count"] > 0 else NAN, launch=_launch(w)))
    return out


def timing_margin_s(server_mean_s: float) -> float:
    """How far the client's mean may exceed the server's: HTTP, JSON and SSE handling on both ends."""
    return max(TIMING_ABOVE_ABS_S, TIMING_ABOVE_REL * server_mean_s)


def timing_tolerance_s(server_mean_s: float) -> float:
    """How far the client's mean may fall below the server's: clock resolution and rounding only."""
    return max(TIMING_BELOW_ABS_S, TIMING_BELOW_REL * server_mean_s)


def cell_reconciliation(acc: list[AcceptanceCheck], timing: list[TimingCheck]) -> dict[str, float]:
    """The cells-table columns: windows checked / mismatched, and pooled client vs server means."""
    same = [t for t in timing if t.same_requests]
    n = sum(t.client_requests for t in same)

    def pooled(attr: str) -> float:
        # pooled over windows, weighted by requests: sum(window mean x requests) / requests
        return sum(getattr(t, attr) * t.client_requests for t in same) / n if n else NAN

    return {"acceptance_windows_checked": float(len(acc)),
            "acceptance_windows_mismatched": float(sum(not a.ok for a in acc)),
            "client_ttft_mean_s": pooled("client_ttft_mean_s"), "server_ttft_mean_s": pooled("server_ttft_mean_s"),
            "client_e2e_mean_s": pooled("client_e2e_mean_s"), "server_e2e_mean_s": pooled("server_e2e_mean_s")}


def reconciliation_warnings(acc: list[AcceptanceCheck], timing: list[TimingCheck]) -> list[CellWarning]:
    """At most one warning per code for the cell, naming the worst window."""
    out: list[CellWarning] = []
    bad = [a for a in acc if not a.ok]
    if bad:
        a = bad[0]
        what = ", ".join(f"{k} {a.per_request[k]:g} per request vs {a.counters[k]:g} counted"
                         for k in a.differences) or f"{a.missing} of {a.requests} requests without figures"
        out.append(CellWarning(WarningCode.ACCEPTANCE_MISMATCH,
                               f"{len(bad)} of {len(acc)} windows disagree ({a.where}: {what})"))
    foreign = [t for t in timing if not t.same_requests]
    if foreign:
        t = foreign[0]
        out.append(CellWarning(WarningCode.SERVER_COUNT_MISMATCH,
                               f"{t.where}: the server timed {t.server_requests:g} requests, the client sent "
                               f"{t.client_requests}"))
    below: list[str] = []
    above: list[str] = []
    for t in (t for t in timing if t.same_requests):
        for name, cm, sm in (("TTFT", t.client_ttft_mean_s, t.server_ttft_mean_s),
                             ("e2e", t.client_e2e_mean_s, t.server_e2e_mean_s)):
            if not (math.isfinite(cm) and math.isfinite(sm)):
                continue
            line = f"{t.where} mean {name} client {1000 * cm:.1f} ms, server {1000 * sm:.1f} ms"
            if cm < sm - timing_tolerance_s(sm):
                below.append(line)
            elif cm - sm > timing_margin_s(sm):
                above.append(f"{line} (margin {1000 * timing_margin_s(sm):.0f} ms)")
    if below:
        out.append(CellWarning(WarningCode.CLIENT_TIMING_BELOW_SERVER, f"{len(below)} window figure(s): {below[0]}"))
    if above:
        out.append(CellWarning(WarningCode.CLIENT_TIMING_ABOVE_SERVER, f"{len(above)} window figure(s): {above[0]}"))
    return out


def reconciliation_rows(cell: dict[str, Any], acc: list[AcceptanceCheck], timing: list[TimingCheck]) -> list[dict]:
    """reconciliation.csv: one row per window of the cell with whatever was checked."""
    rows: dict[str, dict[str, Any]] = {}
    for a in acc:
        row = rows.setdefault(a.window_id, {"window_id": a.window_id, "launch": a.launch, "repeat": a.repeat})
        row.update(acceptance_ok=a.ok, requests_without_figures=a.missing,
                   **{f"{k}_per_request": v for k, v in a.per_request.items()},
                   **{f"{k}_counter": v for k, v in a.counters.items()})
    for t in timing:
        row = rows.setdefault(t.window_id, {"window_id": t.window_id, "launch": t.launch, "repeat": t.repeat})
        row.update(client_requests=t.client_requests, server_requests=t.server_requests,
                   client_ttft_mean_s=t.client_ttft_mean_s, server_ttft_mean_s=t.server_ttft_mean_s,
                   client_e2e_mean_s=t.client_e2e_mean_s, server_e2e_mean_s=t.server_e2e_mean_s)
    return [{"variant": cell["variant"], "point_id": cell["point_id"], **r} for r in rows.values()]


def reconciliation_table(requests: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """reconciliation.csv: every checked window of every cell."""
    req = measured_requests(requests, windows)
    rows: list[dict] = []
    if not req.empty:
        for _, df in req.groupby("cell_id", sort=True):
            win = windows[windows["window_id"].isin(set(df["window_id"]))]
            reqs = to_measured_requests(df)
            first = df.iloc[0]
            rows += reconciliation_rows({"variant": first["variant"], "point_id": first["point_id"]},
                                        acceptance_checks(reqs, win), timing_checks(reqs, win))
    return pd.DataFrame(rows)

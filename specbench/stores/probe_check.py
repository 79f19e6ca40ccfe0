"""Whether a probe's launch variance stands for the full sweep's (docs/metrics.md, "Calibration probe").

`specbench calibrate CONFIG --probe` measures the launch effect at one point of the sweep (its first category
and output length at its largest concurrency) over many cheap launches, so it buys degrees of freedom at a
fraction of a full calibration's cost. A one-launch run then adds that variance at every point of its sweep,
which is right only if a launch moves every point by about as much as it moves the probed one. Where this
setup's history holds full-sweep entries (a calibration without --probe, or a run of 2+ launches), the
probe's between-launch variance is F-tested against their pooled figure (`decision.consistent`); a probe
the test refuses is not pooled. Without a full-sweep entry the probe is pooled unchecked, and says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specbench.decide.decision import Estimate, consistent, pool
from specbench.stores.variance_history import Calibration, estimate_of

PROBE = "probe"  # Calibration.kind of a probe's entry


def is_probe(entry: Calibration) -> bool:
    return entry.kind == PROBE


def full_sweep(entries: Sequence[Calibration]) -> list[Calibration]:
    """The accepted entries measured over a whole sweep (not probes)."""
    return [e for e in entries if e.pooled and not is_probe(e)]


@dataclass(frozen=True)
class ProbeCheck:
    """A probe's between-launch variance against the full sweep's: `full` None when no full-sweep entry
    exists (then `ok`, untested), `p` the two-sided F test's p-value (NaN: not tested)."""

    probe: Estimate | None
    full: Estimate | None
    entries: int  # full-sweep entries pooled into `full`
    p: float
    ok: bool

    def line(self) -> str:
        """One sentence for `calibrate` and the history's notes."""
        if self.probe is None:
            return "probe: no between-launch variance measured (fewer than 2 launches at the probed point)"
        own = f"probe launch CV {100 * math.sqrt(self.probe.var):.1f}% (df {self.probe.df:g})"
        if self.full is None:
            return (f"{own}, not checked against a full sweep: this setup has no full-sweep entry yet (a run with "
                    "sweep.launches >= 2, or `specbench calibrate` without --probe, checks it)")
        test = f"F test p = {self.p:.3g}" if math.isfinite(self.p) else "not testable: a zero variance"
        full = (f"the full sweep's {100 * math.sqrt(self.full.var):.1f}% (df {self.full.df:g}, {self.entries} "
                f"entr{'ies' if self.entries != 1 else 'y'}; {test})")
        if self.ok:
            return f"{own} is consistent with {full}"
        return f"{own} is inconsistent with {full}: not pooled (a launch moves the probed point unlike the sweep)"


def check(probe: Calibration, full: Sequence[Calibration]) -> ProbeCheck:
    """F test of a probe entry's between-launch variance against the pooled launch variance of `full`
    (full-sweep entries of its setup: `full_sweep`)."""
    own = estimate_of(probe.rel_var, probe.df)
    launches = [x for e in full if (x := estimate_of(e.rel_var, e.df)) is not None]
    ref = pool(launches)
    if own is None or ref is None:
        return ProbeCheck(own, ref, len(launches), math.nan, True)
    test = consistent(own, ref)
    return ProbeCheck(own, ref, len(launches), test.p, test.ok)


def screen(candidates: Sequence[Calibration]) -> tuple[list[Calibration], list[tuple[Calibration, ProbeCheck]]]:
    """A setup's candidate entries split into those it may pool and the probes the full-sweep entries among
    them refuse (each with its check): whichever was measured first, a probe is pooled only while it agrees
    with the full sweep."""
    full = full_sweep(candidates)
    kept: list[Calibration] = []
    refused: list[tuple[Calibration, ProbeCheck]] = []
    for e in candidates:
        got = check(e, full) if is_probe(e) else None
        if got is not None and not got.ok:
            refused.append((e, got))
        else:
            kept.append(e)
    return kept, refused

"""What a drafter's stated error rate assumes and this run could not test (docs/metrics.md, "What the error rate
assumes"). The family's level holds when every variance in the intervals is the one the run met; three are not
measured by a run that launched a variant once, or took a side from another run:

- a drafter launched once takes its between-launch variance from the history, which measured the baseline;
- one launch cannot test the history's between-launch variance against this run, and a cell measured once
  (one window) cannot test its between-repeat variance either (2+ windows a cell are F-tested:
  stores/history_checks.py);
- a side `--reuse`d (or borrowed by `specbench update`) was measured in another run: its shift between that
  session and this one is in no interval.

The report states them beside the rate, as the conditions it holds under. RunData -> one clause per drafter.
"""

from __future__ import annotations

from pathlib import Path

from specbench.report.derived import RunData

ONE_LAUNCH = frozenset({"history", "repeat+calibration"})  # metrics.cells.interval_unit, one launch a variant


def _reused_from(data: RunData, variant: str) -> str | None:
    info = data.variants.get(variant, {})
    if info.get("status") != "reused":
        return None
    return Path(str(info.get("reused_from") or "another run")).name


def launch_condition(whose: str, one_window: bool) -> str:
    """The one-launch condition, as a report states it of a run and `plan --budget` of a design."""
    return (f"{whose} vary as the baseline's in the variance history "
            f"(untested: one launch a variant{', one window a cell' if one_window else ''})")


def unchecked(data: RunData, variant: str) -> list[str]:
    """The conditions the drafter's words hold under that this run did not test, each a short clause."""
    c = data.cells
    if not len(c) or "interval_unit" not in c:
        return []
    own = c[c["variant"] == variant]
    both = c[c["variant"].isin([variant, data.baseline])]
    out = []
    units = set(own["interval_unit"].dropna())
    if units & ONE_LAUNCH:
        once = "history" in set(both["interval_unit"].dropna())
        out.append(launch_condition(f"this run's launches, {variant}'s too,", one_window=once))
    for side in (data.baseline, variant):
        if (src := _reused_from(data, side)) is not None:
            out.append(f"{side}, reused from {src}, has not shifted since (untested: another session)")
    return out


def condition(data: RunData, variant: str) -> str:
    """", if A and B" for the sentence that states the rate ("" when the run tested what its rate rests on)."""
    said = unchecked(data, variant)
    return f", if {' and '.join(said)}" if said else ""


__all__ = ["condition", "launch_condition", "unchecked"]

"""Where a speedup-vs-concurrency curve crosses 1.0 (break-even concurrency), with how sure each side is.

Pure: levels and per-level speedups with their intervals in, a `BreakEven` out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

BreakEvenStatus = Literal["pays_up_to", "pays_everywhere", "never_pays", "inconclusive", "no_data"]


@dataclass(frozen=True)
class BreakEven:
    """Where a speedup-vs-concurrency curve crosses 1.0.

    break_even_concurrency: interpolated crossing (None unless status == 'pays_up_to').
    uncertain_from: first measured level whose interval contains or lies below 1.0 (None: none did,
    or no intervals). last_confident: the level before it (interval entirely above 1.0).
    """

    status: BreakEvenStatus
    break_even_concurrency: float | None
    uncertain_from: int | None
    last_confident: int | None
    verdict: str


def _fmt_c(c: float) -> str:
    """One decimal below 10, none from 10 on; decided on the value as printed, so a crossing at
    9.96 or at 9.999999999999998 (2 ** log2(10)) reads "10", never "10.0"."""
    return f"{c:.0f}" if round(c, 1) >= 10 else f"{c:.1f}"


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def break_even(
    concurrency: Sequence[int],
    speedup: Sequence[float],
    ci_low: Sequence[float | None] | None = None,
    ci_high: Sequence[float | None] | None = None,
) -> BreakEven:
    """Concurrency at which the speedup first drops below 1.0, interpolated in log2(concurrency).

    Between measured levels (c0, s0 >= 1) and (c1, s1 < 1):
        log2 C* = log2 c0 + (s0 - 1) / (s0 - s1) * (log2 c1 - log2 c0)
    Levels with a non-finite speedup are skipped. Status, and the check behind it:
      never_pays      EVERY measured level is below 1.0: its interval's high end when it has one (else its
                      point estimate, and the verdict says so);
      inconclusive    the lowest level's interval contains 1.0, or it is below 1.0 but not every level is;
      pays_everywhere speedup >= 1 at every level (the break-even lies beyond the sweep) and no level's
                      interval contains or lies below 1.0 (else inconclusive: it is a claim about every level);
      pays_up_to      the first downward crossing, C*.
    Every verdict says how many levels decided it.
    """
    n = len(concurrency)
    lo_in = list(ci_low) if ci_low is not None else [None] * n
    hi_in = list(ci_high) if ci_high is not None else [None] * n
    if not (len(speedup) == len(lo_in) == len(hi_in) == n):
        raise ValueError("concurrency, speedup and interval bounds must have the same length")
    pts = sorted(
        (int(c), float(s), lo_in[i], hi_in[i])
        for i, (c, s) in enumerate(zip(concurrency, speedup))
        if _finite(s) and c >= 1
    )
    if not pts:
        return BreakEven("no_data", None, None, None, "no data: no valid speedup at any level")

    # First level whose interval contains or lies below 1.0 (needs a finite lower bound).
    uncertain_from: int | None = None
    last_confident: int | None = None
    for c, _s, lo, _hi in pts:
        if not _finite(lo):
            continue
        if lo <= 1.0:  # type: ignore[operator]
            uncertain_from = c
            break
        last_confident = c
    interval_note = _interval_note(uncertain_from, last_confident, any(_finite(p[2]) for p in pts))

    def below(p: tuple[int, float, float | None, float | None]) -> bool:
        return p[3] < 1.0 if _finite(p[3]) else p[1] < 1.0  # type: ignore[operator]

    n_below, n_ci = sum(below(p) for p in pts), sum(_finite(p[3]) for p in pts)
    if n_below == len(pts):
        how = "interval" if n_ci == len(pts) else "interval or, without one, point estimate"
        tail = "" if n_ci == len(pts) else f"; {len(pts) - n_ci} without an interval: indicative"
        return BreakEven("never_pays", None, uncertain_from, None,
                         f"never pays: {how} below 1.0 at all {len(pts)} measured levels{tail}")
    c0, s0, lo0, hi0 = pts[0]
    if _finite(lo0) and _finite(hi0) and lo0 <= 1.0 <= hi0:  # type: ignore[operator]
        return BreakEven("inconclusive", None, uncertain_from, None,
                         f"inconclusive: interval contains 1.0 at C={c0} (below 1.0 at {n_below} of {len(pts)} "
                         "levels)")
    if s0 < 1.0:
        return BreakEven("inconclusive", None, uncertain_from, None,
                         f"inconclusive: speedup {s0:.2f} at C={c0}, but below 1.0 at only {n_below} of "
                         f"{len(pts)} levels")

    for (ca, sa, _, _), (cb, sb, _, _) in zip(pts, pts[1:]):
        if sa >= 1.0 > sb:
            xa, xb = math.log2(ca), math.log2(cb)
            c_star = 2.0 ** (xa + (sa - 1.0) / (sa - sb) * (xb - xa))
            later = [c for c, s, _, _ in pts if c > cb and s >= 1.0]
            tail = f"; not monotone: >= 1.0 again at C={later[0]}" if later else ""
            return BreakEven(
                "pays_up_to",
                c_star,
                uncertain_from,
                last_confident,
                f"pays up to C≈{_fmt_c(c_star)} ({interval_note}){tail}",
            )
    if uncertain_from is not None:
        return BreakEven("inconclusive", None, uncertain_from, last_confident,
                         f"inconclusive: speedup >= 1.0 at all {len(pts)} measured levels, but the interval contains "
                         f"1.0 from C={uncertain_from}")
    return BreakEven(
        "pays_everywhere",
        None,
        uncertain_from,
        last_confident,
        f"pays at all {len(pts)} measured levels (beyond the sweep; {interval_note})",
    )


def _interval_note(uncertain_from: int | None, last_confident: int | None, any_interval: bool) -> str:
    if not any_interval:
        return "no interval"
    if uncertain_from is None:
        return "interval above 1.0 at every level with an interval"
    if last_confident is None:
        return f"interval contains 1.0 from C={uncertain_from}"
    return f"interval crosses 1.0 between {last_confident} and {uncertain_from}"

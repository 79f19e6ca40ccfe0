"""The step-cost check (docs/metrics.md, "Speedup surface"): the step cost of a drafter configuration measured
with forced acceptance against the one decomposed from a real head's run of the same configuration.

Both come from decomposition.csv (metrics/decomposition.py, the one place a step time is computed): the
surface run's, whose forced variants `<variant>-al<AL>` each give r = step_time_s / baseline_step_time_s at
every point, and the real run's. The time model says a step's cost does not depend on the acceptance, so the
forced lengths' r at one concurrency estimate one value; a real head whose r lies outside their range spends
its steps differently from the forced ones (another drafter configuration, or a launch that differs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

from specbench.metrics.surface import apart, geomean
from specbench.surface.derive import split_name

STEP_COST_COLUMNS = ["variant", "surface_variant", "concurrency", "forced_r", "forced_r_low", "forced_r_high",
                     "forced_cells", "real_r", "real_r_low", "real_r_high", "real_cells", "agree"]


def _ratios(decomp: pd.DataFrame, chosen: Callable[[str], bool]) -> dict[int, list[float]]:
    """The closed-loop cells' finite step-cost ratios per concurrency, of the variants `chosen` accepts."""
    out: dict[int, list[float]] = {}
    if not len(decomp):
        return out
    closed = decomp[decomp["rate"].isna()] if "rate" in decomp else decomp
    for _, r in closed.iterrows():
        x = float(r["step_cost_ratio"])
        if chosen(str(r["variant"])) and math.isfinite(x) and x > 0:
            out.setdefault(int(float(r["concurrency"])), []).append(x)
    return out


def _summary(xs: list[float]) -> tuple[float, float, float]:
    """(geometric mean, lowest, highest) of the cells' r: the range is the interval the check compares."""
    return geomean(xs), min(xs), max(xs)


def agree_word(forced: tuple[float, float, float], real: tuple[float, float, float]) -> str:
    """`yes` when the two ranges (point, low, high, as _summary gives them) overlap, `no` when they do not,
    `n/a` when neither side has a range (one cell each: nothing to judge the gap against)."""
    if not any(lo < hi for _, lo, hi in (forced, real)):
        return "n/a"
    (fp, flo, fhi), (rp, rlo, rhi) = forced, real
    return "no" if apart((flo, fp, fhi), (rlo, rp, rhi)) else "yes"


def _forced_of(s: str) -> Callable[[str], bool]:
    """Whether a variant name is one of `s`'s forced variants `<s>-al<AL>`."""
    return lambda name: (p := split_name(name)) is not None and p[0] == s


def _named(s: str) -> Callable[[str], bool]:
    return lambda name: name == s


def step_cost_check(run_decomp: pd.DataFrame, surface_decomp: pd.DataFrame, pairs: Mapping[str, str],
                    forced: bool = True) -> pd.DataFrame:
    """Per run variant (`pairs`: run variant -> surface variant) and concurrency that both measured: the
    forced r (geometric mean over the surface's forced lengths `<variant>-al<AL>` and points, its range), the
    real r (the same over the run's points) and whether they agree. `forced=False`: the reference is another
    real head's run, its variant read under its own name."""
    rows = []
    for v, s in sorted(pairs.items()):
        ref = _ratios(surface_decomp, _forced_of(s) if forced else _named(s))
        real = _ratios(run_decomp, _named(v))
        for c in sorted(set(ref) & set(real)):
            f, r = _summary(ref[c]), _summary(real[c])
            rows.append(dict(variant=v, surface_variant=s, concurrency=c, forced_r=f[0], forced_r_low=f[1],
                             forced_r_high=f[2], forced_cells=len(ref[c]), real_r=r[0], real_r_low=r[1],
                             real_r_high=r[2], real_cells=len(real[c]), agree=agree_word(f, r)))
    return pd.DataFrame(rows, columns=STEP_COST_COLUMNS)


def read_decomposition(run_dir: Path) -> pd.DataFrame:
    """A run directory's decomposition.csv (empty when the run wrote none)."""
    from specbench.records.rundir import RunDir

    f = RunDir(run_dir).decomposition
    return pd.read_csv(f) if f.exists() else pd.DataFrame()


def step_cost_lines(check: pd.DataFrame, reference: str = "forced") -> list[str]:
    """The check as lines: `step cost e C=4: forced r 1.82 [1.78, 1.86] (5 cells), real r 1.90 [1.90, 1.90]
    (1 cell), agree no`; `reference`: the word for the reference's r (`forced`, or `reference` for another
    real head's run)."""
    def cells(n: int) -> str:
        return f"{n} cell{'s' if n != 1 else ''}"

    return [f"step cost {r['variant']} C={int(r['concurrency'])}: {reference} r {r['forced_r']:.2f} "
            f"[{r['forced_r_low']:.2f}, {r['forced_r_high']:.2f}] ({cells(int(r['forced_cells']))}), real r "
            f"{r['real_r']:.2f} [{r['real_r_low']:.2f}, {r['real_r_high']:.2f}] ({cells(int(r['real_cells']))}), "
            f"agree {r['agree']}" for _, r in check.iterrows()]

"""The step-cost check (docs/metrics.md, "Speedup surface"): the step cost of a drafter configuration measured
with forced acceptance against the one decomposed from a real head's run of the same configuration.

Both come from decomposition.csv (metrics/decomposition.py, the one place a step time is computed): the
surface run's, whose forced variants `<variant>-al<AL>` each give r = step_time_s / baseline_step_time_s at
every point, and the real run's. The time model says a step's cost does not depend on the acceptance, so the
forced lengths' r at one concurrency estimate one value; a real head whose r lies outside their interval
spends its steps differently from the forced ones (another drafter configuration, or a launch that differs).

Each side's interval at one concurrency is built from its cells' 95% intervals of r over launches
(step_cost_ratio_ci_low/_high): the geometric mean over the cells of each end, as the ends of cells at one C
move together (one launch's engine serves them all; surface.model_predict._pooled pools the same way). Only
when no cell there has a launch interval (one launch, or a decomposition.csv
written before the columns existed) is it the range (lowest, highest) of the cells' r.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

from specbench.metrics.forced_surface import apart, geomean
from specbench.surface.derive import split_name

STEP_COST_COLUMNS = ["variant", "surface_variant", "concurrency", "forced_r", "forced_r_low", "forced_r_high",
                     "forced_cells", "real_r", "real_r_low", "real_r_high", "real_cells", "agree"]


Cell = tuple[float, float, float]  # one cell's (r, launch interval low, high); NaN ends without one


def _ratios(decomp: pd.DataFrame, chosen: Callable[[str], bool]) -> dict[int, list[Cell]]:
    """The closed-loop cells' finite step-cost ratios with their launch intervals per concurrency, of the
    variants `chosen` accepts; a decomposition.csv without the interval columns gives NaN ends."""
    out: dict[int, list[Cell]] = {}
    if not len(decomp):
        return out
    closed = decomp[decomp["rate"].isna()] if "rate" in decomp else decomp
    for _, r in closed.iterrows():
        x = float(r["step_cost_ratio"])
        if chosen(str(r["variant"])) and math.isfinite(x) and x > 0:
            lo, hi = (float(r.get(k, math.nan)) for k in ("step_cost_ratio_ci_low", "step_cost_ratio_ci_high"))
            out.setdefault(int(float(r["concurrency"])), []).append((x, lo, hi))
    return out


def _has_interval(c: Cell) -> bool:
    _, lo, hi = c
    return math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi


def _summary(cells: list[Cell]) -> tuple[float, float, float]:
    """(geometric mean of the cells' r, low, high): the interval the check compares is the geometric mean
    over the cells of each end of their launch intervals (the cells that have one), or, when none has,
    the range of the cells' r (lowest, highest)."""
    point = geomean([x for x, _, _ in cells])
    with_ci = [c for c in cells if _has_interval(c)]
    if with_ci:
        return point, geomean([lo for _, lo, _ in with_ci]), geomean([hi for _, _, hi in with_ci])
    xs = [x for x, _, _ in cells]
    return point, min(xs), max(xs)


def agree_word(forced: tuple[float, float, float], real: tuple[float, float, float]) -> str:
    """`yes` when the two intervals (point, low, high, as _summary gives them) overlap, `no` when they do
    not, `n/a` when neither side has one (one cell each without a launch interval: nothing to judge the gap
    against)."""
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
    forced r (geometric mean over the surface's forced lengths `<variant>-al<AL>` and points) with its
    interval (_summary: the cells' launch intervals pooled, else their range), the real r (the same over the
    run's points) and whether the intervals overlap. `forced=False`: the reference is another real head's
    run, its variant read under its own name."""
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
    (1 cell), agree no`, each bracket the side's interval as _summary gives it (launch intervals pooled over
    the cells, else the cells' range); `reference`: the word for the reference's r (`forced`, or
    `reference` for another real head's run)."""
    def cells(n: int) -> str:
        return f"{n} cell{'s' if n != 1 else ''}"

    return [f"step cost {r['variant']} C={int(r['concurrency'])}: {reference} r {r['forced_r']:.2f} "
            f"[{r['forced_r_low']:.2f}, {r['forced_r_high']:.2f}] ({cells(int(r['forced_cells']))}), real r "
            f"{r['real_r']:.2f} [{r['real_r_low']:.2f}, {r['real_r_high']:.2f}] ({cells(int(r['real_cells']))}), "
            f"agree {r['agree']}" for _, r in check.iterrows()]

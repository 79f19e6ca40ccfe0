"""A surface run's cells -> surface.csv (S per variant x forced length x concurrency x output and input length)
and break_even_al.csv (the time model per concurrency x output and input length: break-even AL, held-out check).

A surface point pools the run's cells at one concurrency, output length and input length (all categories and
temperatures the surface's sweep measured): the geometric mean of their speedups, and of their interval
ends (the ends move together: cells of one launch share its speed, so this bounds the pooled interval
instead of shrinking it as if the cells were independent). Output lengths are not pooled: the time model's
terms depend on them (docs/metrics.md, "Speedup surface"). The acceptance the engine reported (its
counters, the same figure as a run's acceptance_length) is read back next to the forced length; a point
that does not read back `ok` is left out of the model, the break-even and predictions, with the reason. A
point forcing a head's per-position profile (`forced_profile`) reads back against the length it implies and
is a check on the model, not one of its points (surface.md compares it with the model at that length).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from specbench.config import forced_length
from specbench.metrics.forced_surface import Curve, break_even_acceptance, fit, geomean, held_out
from specbench.metrics.makespan import Spread, request_acceptance, tail_factor, untailed_fit
from specbench.surface.derive import split_name

SURFACE_FILE = "surface.csv"
BREAK_EVEN_FILE = "break_even_al.csv"
READBACK_TOLERANCE = 0.10  # relative: forced 2.0 must read back within [1.8, 2.2]
SURFACE_COLUMNS = ["variant", "forced_acceptance", "concurrency", "speedup", "speedup_ci_low", "speedup_ci_high",
                   "measured_acceptance", "measured_acceptance_low", "measured_acceptance_high", "readback", "cells"]
# added with the time model; a surface.csv written before has them empty (one group, k + 1 unknown, no profile,
# no tail known: a prediction then takes the points as measured)
GROUP = ["output_len", "input_len"]
OPTIONAL_COLUMNS = [*GROUP, "max_acceptance", "forced_profile", "tail_factor"]
BREAK_EVEN_COLUMNS = ["variant", "concurrency", "break_even_acceptance", "break_even_acceptance_low",
                      "break_even_acceptance_high", "break_even_acceptance_at_most",
                      "break_even_acceptance_extrapolated", *GROUP, "max_acceptance", "break_even_acceptance_beyond",
                      "points", "dropped", "prefill_term", "decode_term", "heldout_acceptance", "heldout_measured",
                      "heldout_predicted", "heldout_error"]


def _mean(xs: pd.Series) -> float:
    vals = [float(x) for x in xs if math.isfinite(float(x))]
    return sum(vals) / len(vals) if vals else math.nan


def _pooled_end(ends: pd.Series) -> float:
    """The geometric mean of the cells' interval ends, or NaN (`none`) when a cell has no interval: the ends of
    the cells that have one do not bound the pooled point."""
    vals = [float(x) for x in ends]
    return geomean(vals) if vals and all(math.isfinite(x) and x > 0 for x in vals) else math.nan


def readback(forced: float, measured: float) -> str:
    """`ok` when the engine's acceptance is within READBACK_TOLERANCE of the forced length, `mismatch`
    otherwise, `unknown` without a measured acceptance."""
    if not math.isfinite(measured):
        return "unknown"
    return "ok" if abs(measured - forced) <= READBACK_TOLERANCE * forced else "mismatch"


def surface_table(cells: pd.DataFrame, top: Mapping[str, float] | None = None,
                  forced: Mapping[str, float | list[float]] | None = None,
                  acceptance: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per source variant x forced length x concurrency x output length x input length from a surface
    run's (normalized) cells; `top`: per source variant, k + 1 (the highest acceptance a step can reach);
    `forced`: per derived variant, its config's `forced_acceptance` (the length, or the profile whose length
    `forced_length` gives); a variant absent from it is read from its name; `acceptance`: the run's
    acceptance.csv, whose requests give each point its `tail_factor` (`tail_factors`; NaN without it)."""
    rows, spreads = [], []
    closed = cells[cells["rate"].isna()] if "rate" in cells else cells
    closed = closed.assign(**{g: closed[g] if g in closed else math.nan for g in GROUP})
    for name, g in closed[closed["valid"]].groupby("variant"):
        parsed = split_name(str(name))
        if parsed is None:
            continue
        base, length = parsed
        value = (forced or {}).get(str(name), length)
        length = forced_length(value)
        profile = json.dumps(value) if isinstance(value, list) else ""
        for (c, out_len, in_len), gc in g.groupby(["concurrency", *GROUP], dropna=False):
            measured = _mean(gc["acceptance_length"])
            rows.append(dict(variant=base, forced_acceptance=length, concurrency=int(float(c)),  # type: ignore[arg-type]
                             speedup=geomean(gc["speedup"].tolist()),
                             speedup_ci_low=_pooled_end(gc["speedup_ci_low"]),
                             speedup_ci_high=_pooled_end(gc["speedup_ci_high"]), measured_acceptance=measured,
                             measured_acceptance_low=_mean(gc["acceptance_length_ci_low"]),
                             measured_acceptance_high=_mean(gc["acceptance_length_ci_high"]),
                             readback=readback(length, measured), cells=len(gc), output_len=out_len,
                             input_len=in_len, max_acceptance=(top or {}).get(base, math.nan), forced_profile=profile))
            spreads.append(_spread(acceptance, str(name), gc["point_id"] if "point_id" in gc else []))
    out = pd.DataFrame(rows, columns=SURFACE_COLUMNS + OPTIONAL_COLUMNS)
    out["tail_factor"] = tail_factors(out, spreads) if acceptance is not None else math.nan
    return out.sort_values(["variant", "concurrency", *GROUP, "forced_acceptance"]).reset_index(drop=True)


def untail(surface: pd.DataFrame) -> pd.DataFrame:
    """`surface` with each point's speedup and its interval's ends divided by its `tail_factor` (1 where none is
    known): the speedups the points would have measured had every request taken their mean time."""
    f = surface["tail_factor"].where(surface["tail_factor"] > 0).fillna(1.0) if "tail_factor" in surface else 1.0
    return surface.assign(**{c: surface[c] / f for c in ("speedup", "speedup_ci_low", "speedup_ci_high")})


def _spread(acceptance: pd.DataFrame | None, variant: str, points: Iterable[object]) -> Spread:
    """The requests' acceptance of a derived variant's cells (`points`, their point ids) pooled into one
    point's Spread: every request, and the median of the cells' requests per window."""
    if acceptance is None:
        return Spread([], math.nan)
    each = [request_acceptance(acceptance, variant, str(p)) for p in points]
    sizes = sorted(s.per_window for s in each if math.isfinite(s.per_window))
    return Spread([a for s in each for a in s.acceptance], sizes[len(sizes) // 2] if sizes else math.nan)


def tail_factors(surface: pd.DataFrame, spreads: list[Spread]) -> list[float]:
    """Per row of `surface` (in its order; `spreads` its requests' acceptance), what its own window tail cost it
    (metrics.makespan.tail_factor): forced acceptance still draws each position's acceptance per step, so its
    requests spread (less than a real head's) and its slowest ones hold the window open. The points the model is
    fitted on get theirs from metrics.makespan.untailed_fit (the model fitted with every point's tail taken
    out); the group's other points (dropped, a profile) theirs under that model. A prediction divides a point's
    speedup by it before fitting (surface.reference), so it adds only the predicted head's tail."""
    out = [math.nan] * len(surface)
    for _, g in surface.groupby(["variant", "concurrency", *GROUP], dropna=False):
        ok = _used(g)
        ok = ok[ok["speedup"].map(lambda x: math.isfinite(float(x)))]
        used, c = list(ok.index), int(float(g["concurrency"].iloc[0]))
        al, measured = ok["forced_acceptance"].astype(float).tolist(), ok["speedup"].astype(float).tolist()
        model, factors = untailed_fit(al, measured, [spreads[i] for i in used], c)
        for i, f in zip(used, factors):
            out[i] = f
        for i in g.index.difference(used):
            out[i] = tail_factor(model, spreads[i], c)
    return out


def _groups(surface: pd.DataFrame, variant: str) -> list[tuple[tuple[int, float, float], pd.DataFrame]]:
    """The variant's points per (concurrency, output length, input length), sorted."""
    s = surface[surface["variant"] == variant]
    s = s.assign(**{g: s[g] if g in s else math.nan for g in OPTIONAL_COLUMNS})
    out = [((int(float(c)), float(o), float(i)), g)  # type: ignore[arg-type]
           for (c, o, i), g in s.groupby(["concurrency", *GROUP], dropna=False)]
    return sorted(out, key=lambda x: tuple(-1.0 if math.isnan(v) else v for v in x[0]))


def is_profile(g: pd.DataFrame) -> pd.Series:
    """The rows that force a head's per-position profile (not one length)."""
    return g["forced_profile"].map(lambda x: isinstance(x, str) and bool(x))


def _used(g: pd.DataFrame) -> pd.DataFrame:
    """The points the model is fitted on: forced lengths that read back `ok` (a point that did not is not at
    its forced length; a profile point checks the model instead)."""
    return g[(g["readback"] == "ok") & ~is_profile(g)]


def dropped(g: pd.DataFrame) -> str:
    """The points left out of the model, with why: `AL 2 (mismatch: read back 2.50)`; '' when none."""
    bad = g[g["readback"] != "ok"]
    return "; ".join(f"AL {r['forced_acceptance']:g} ({r['readback']}: read back "
                     f"{'n/a' if math.isnan(r['measured_acceptance']) else format(r['measured_acceptance'], '.2f')})"
                     for _, r in bad.iterrows())


def _curve(g: pd.DataFrame) -> Curve:
    return Curve.of(g["forced_acceptance"].tolist(), g["speedup"].tolist(), g["speedup_ci_low"].tolist(),
                    g["speedup_ci_high"].tolist())


def group_curves(surface: pd.DataFrame, variant: str) -> dict[tuple[int, float, float], Curve]:
    """Per (concurrency, output length, input length), the variant's S(AL) curve through the points that read
    back ok (points without a speedup are left out too)."""
    return {key: _curve(_used(g)) for key, g in _groups(surface, variant)}


def break_even_table(surface: pd.DataFrame) -> pd.DataFrame:
    """break_even_al.csv: per variant x concurrency x output x input length, the time model fitted on the
    points that read back ok, its break-even AL (metrics.forced_surface.break_even_acceptance, k + 1 from the
    surface's `max_acceptance`) and the held-out check of its shape (>= 3 forced lengths)."""
    rows = []
    for v in sorted(surface["variant"].unique()):
        for (c, out_len, in_len), g in _groups(surface, str(v)):
            curve = _curve(_used(g))
            top = float(g["max_acceptance"].max())
            be = break_even_acceptance(curve, top)
            model = fit(curve.al, curve.speedup)
            check = held_out(curve.al, curve.speedup)
            rows.append(dict(variant=v, concurrency=c, break_even_acceptance=be.value,
                             break_even_acceptance_low=be.low, break_even_acceptance_high=be.high,
                             break_even_acceptance_at_most=be.at_most, break_even_acceptance_extrapolated=be.model,
                             output_len=out_len, input_len=in_len, max_acceptance=top,
                             break_even_acceptance_beyond=be.beyond, points=len(curve), dropped=dropped(g),
                             prefill_term=model.prefill, decode_term=model.decode,
                             heldout_acceptance=check.al if check else math.nan,
                             heldout_measured=check.measured if check else math.nan,
                             heldout_predicted=check.predicted if check else math.nan,
                             heldout_error=check.error if check else math.nan))
    return pd.DataFrame(rows, columns=BREAK_EVEN_COLUMNS)


def load_surface(path: Path) -> pd.DataFrame:
    """surface.csv of a surface directory (or the file itself)."""
    from specbench.shared.errors import UsageError

    f = path / SURFACE_FILE if path.is_dir() else path
    if not f.exists():
        raise UsageError(f"surface: {f} not found (a `specbench surface` run directory has {SURFACE_FILE})")
    df = pd.read_csv(f)
    missing = [c for c in SURFACE_COLUMNS if c not in df]
    if missing:
        raise UsageError(f"surface: {f} lacks the column(s) {', '.join(missing)}")
    return df.assign(**{c: math.nan for c in OPTIONAL_COLUMNS if c not in df})

"""A run's measured acceptance -> its speedup at every concurrency predicted from a surface, next to the
speedup the run measured (prediction.csv); and the benchmark's summary of how well they agree.

Per point of the run (category x input length x output length x temperature) the acceptance is read at the
reference concurrency (default the run's lowest, normally C=1) and carried to every concurrency: that is
what a new head's C=1 run knows. The same prediction with the acceptance measured at each concurrency
(`predicted_at_c`) separates the surface's own error from the acceptance's drift with load.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from specbench.metrics.surface import Curve, Prediction, anchored, break_even_level, geomean, pooled, predict
from specbench.surface.table import curves

POINT = ["category", "input_len", "output_len", "temperature"]
# Two predictions (docs/metrics.md, "Speedup surface"): `surface`, S(C, a) itself; `anchored`, the run's own
# speedup at the reference concurrency times the surface's fall from there to C. Column of each, and its error.
METHODS = {"surface": ("predicted", "error"), "anchored": ("anchored", "anchored_error")}
DEFAULT_METHOD = "surface"  # what `specbench plan --surface --acceptance` and the benchmark's last line use
PREDICTION_FILE = "prediction.csv"
PREDICTION_COLUMNS = ["variant", "surface_variant", "concurrency", "reference_concurrency", "acceptance_ref",
                      "acceptance_at_c", "predicted", "predicted_low", "predicted_high", "extrapolated",
                      "predicted_at_c", "measured", "measured_low", "measured_high", "error", "disagree",
                      "anchored", "anchored_low", "anchored_high", "anchored_error", "anchored_disagree"]


def point_key(row: pd.Series) -> tuple:
    return tuple("" if isinstance(row[k], float) and math.isnan(row[k]) else row[k] for k in POINT)


def acceptance_by_point(cells: pd.DataFrame, variant: str, concurrency: int) -> dict[tuple, tuple[float, float, float]]:
    """(acceptance, 95% low, 95% high) per point of `variant` at `concurrency`; a missing interval end is the
    point estimate."""
    out = {}
    sel = cells[(cells["variant"] == variant) & (cells["concurrency"] == concurrency) & cells["valid"]]
    for _, r in sel.iterrows():
        a = float(r["acceptance_length"])
        if not math.isfinite(a):
            continue
        lo, hi = float(r["acceptance_length_ci_low"]), float(r["acceptance_length_ci_high"])
        out[point_key(r)] = (a, lo if math.isfinite(lo) else a, hi if math.isfinite(hi) else a)
    return out


def speedup_by_point(cells: pd.DataFrame, variant: str, concurrency: int) -> dict[tuple, Prediction]:
    """The measured speedup per point of `variant` at `concurrency`, as a Prediction (point, 95% ends; a
    missing end is the point)."""
    out = {}
    sel = cells[(cells["variant"] == variant) & (cells["concurrency"] == concurrency) & cells["valid"]]
    for _, r in sel.iterrows():
        s = float(r["speedup"])
        if not (math.isfinite(s) and s > 0):
            continue
        lo, hi = float(r["speedup_ci_low"]), float(r["speedup_ci_high"])
        out[point_key(r)] = Prediction(s, lo if math.isfinite(lo) else s, hi if math.isfinite(hi) else s, False)
    return out


def _part(curve: Curve, key: tuple) -> Curve:
    """The surface's model at the point's output and input length (POINT order), else the pooled one."""
    return curve.part_for(*(float(key[i]) if key[i] != "" else math.nan for i in (2, 1)))


def _predict_points(curve: Curve, acc: Mapping[tuple, tuple[float, float, float]], keys: list[tuple]) -> Prediction:
    return pooled([predict(_part(curve, k), *acc[k]) for k in keys if k in acc])


def _anchor_points(curve: Curve, ref_curve: Curve | None, acc: Mapping[tuple, tuple[float, float, float]],
                   measured_ref: Mapping[tuple, Prediction], keys: list[tuple]) -> Prediction:
    """The anchored prediction (metrics.surface.anchored) per point, pooled; NaN without the surface's curve
    at the reference concurrency."""
    if ref_curve is None:
        return Prediction(math.nan, math.nan, math.nan, False)
    return pooled([anchored(predict(_part(curve, k), *acc[k]), predict(_part(ref_curve, k), *acc[k]), measured_ref[k])
                   for k in keys if k in acc and k in measured_ref])


def reference_level(cells: pd.DataFrame, variant: str, reference: int | None = None) -> int | None:
    levels = sorted(int(c) for c in cells[(cells["variant"] == variant) & cells["valid"]]["concurrency"].unique())
    return reference if reference is not None else (levels[0] if levels else None)


def predicted_curve(cells: pd.DataFrame, variant: str, curve_at: Mapping[int, Curve],
                    reference: int | None = None, method: str = DEFAULT_METHOD) -> dict[int, Prediction]:
    """The variant's speedup predicted at every concurrency of the surface from what a run at the reference
    concurrency alone measured (what `specbench plan --surface` knows from a new head's C=1 run): its
    acceptance (`surface`), and its speedup there too (`anchored`)."""
    ref = reference_level(cells, variant, reference)
    if ref is None:
        return {}
    acc = acceptance_by_point(cells, variant, ref)
    if method == "anchored":
        speed = speedup_by_point(cells, variant, ref)
        return {c: _anchor_points(curve, curve_at.get(ref), acc, speed, list(acc))
                for c, curve in sorted(curve_at.items())}
    return {c: _predict_points(curve, acc, list(acc)) for c, curve in sorted(curve_at.items())}


def predict_variant(cells: pd.DataFrame, variant: str, curve_at: Mapping[int, Curve],
                    reference: int | None = None, ref_cells: pd.DataFrame | None = None) -> list[dict]:
    """Rows of prediction.csv for one run variant against one surface variant's curves. `ref_cells`: the
    cells the acceptance and speedup at the reference concurrency are read from (default `cells`, the run's
    own); another run's (a head's separate C=1 run) shares no launch with the speedups predicted."""
    mine = cells[(cells["variant"] == variant) & cells["valid"]]
    source = cells if ref_cells is None else ref_cells
    ref = reference_level(source, variant, reference)
    if mine.empty or ref is None:
        return []
    levels = sorted(int(c) for c in mine["concurrency"].unique())
    acc_ref = acceptance_by_point(source, variant, ref)
    speed_ref = speedup_by_point(source, variant, ref)
    rows = []
    for c in levels:
        if c not in curve_at:
            continue
        at_c = mine[mine["concurrency"] == c]
        keys = [point_key(r) for _, r in at_c.iterrows()]
        p = _predict_points(curve_at[c], acc_ref, keys)
        p_c = _predict_points(curve_at[c], acceptance_by_point(cells, variant, c), keys)
        a = _anchor_points(curve_at[c], curve_at.get(ref), acc_ref, speed_ref, keys)
        m, lo, hi = (geomean(at_c[col].tolist()) for col in ("speedup", "speedup_ci_low", "speedup_ci_high"))
        disagree = _apart((p.low, p.speedup, p.high), (lo, m, hi))
        rows.append(dict(variant=variant, concurrency=c, reference_concurrency=ref,
                         acceptance_ref=_mean([acc_ref[k][0] for k in keys if k in acc_ref]),
                         acceptance_at_c=_mean(at_c["acceptance_length"].tolist()),
                         predicted=p.speedup, predicted_low=p.low, predicted_high=p.high, extrapolated=p.extrapolated,
                         predicted_at_c=p_c.speedup, measured=m, measured_low=lo, measured_high=hi,
                         error=_error(p.speedup, m), disagree=disagree, anchored=a.speedup, anchored_low=a.low,
                         anchored_high=a.high, anchored_error=_error(a.speedup, m),
                         anchored_disagree=_apart((a.low, a.speedup, a.high), (lo, m, hi))))
    return rows


def _error(predicted: float, measured: float) -> float:
    return predicted / measured - 1 if measured > 0 and math.isfinite(predicted) else math.nan


def _apart(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    """Two (low, point, high) estimates whose intervals do not overlap; a missing end is the point, and two
    estimates without any interval are not judged (False)."""
    def ends(x: tuple[float, float, float]) -> tuple[float, float, bool]:
        lo, pt, hi = x
        has = math.isfinite(lo) and math.isfinite(hi) and lo < hi  # a zero-width interval is no interval
        return (lo if math.isfinite(lo) else pt), (hi if math.isfinite(hi) else pt), has

    (alo, ahi, ahas), (blo, bhi, bhas) = ends(a), ends(b)
    if not (ahas or bhas) or not all(math.isfinite(x) for x in (alo, ahi, blo, bhi)):
        return False
    return alo > bhi or ahi < blo


def _mean(xs: list[float]) -> float:
    vals = [x for x in xs if math.isfinite(x)]
    return sum(vals) / len(vals) if vals else math.nan


def predict_run(cells: pd.DataFrame, baseline: str, surface: pd.DataFrame, mapping: Mapping[str, str] | None = None,
                reference: int | None = None, ref_cells: pd.DataFrame | None = None) -> pd.DataFrame:
    """prediction.csv for every run variant that has a surface: `mapping` run variant -> surface variant
    (default: the same name); `ref_cells`: see predict_variant."""
    closed = _closed(cells)
    ref_closed = None if ref_cells is None else _closed(ref_cells)
    names = set(surface["variant"])
    pairs = dict(mapping or {})
    for v in closed["variant"].unique():
        if v != baseline and v in names and v not in pairs:
            pairs[str(v)] = str(v)
    rows = []
    for v, s in sorted(pairs.items()):
        for r in predict_variant(closed, v, curves(surface, s), reference, ref_closed):
            rows.append({**r, "surface_variant": s})
    return pd.DataFrame(rows, columns=PREDICTION_COLUMNS)




def _closed(cells: pd.DataFrame) -> pd.DataFrame:
    return cells[cells["rate"].isna()] if "rate" in cells else cells


def break_even_levels(pred: pd.DataFrame, method: str = DEFAULT_METHOD) -> dict[str, tuple[int, int, list[int]]]:
    """Per variant: (predicted break-even level, measured level, the levels) by `break_even_level`."""
    column = METHODS[method][0]
    out = {}
    for v, g in pred.groupby("variant"):
        g = g.sort_values("concurrency")
        levels = [int(c) for c in g["concurrency"]]
        out[str(v)] = (break_even_level(levels, g[column].tolist()),
                       break_even_level(levels, g["measured"].tolist()), levels)
    return out

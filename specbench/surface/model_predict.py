"""Prediction from the time model (docs/metrics.md, "Speedup surface", "Prediction from the model"): a head's
speedup at each concurrency from its acceptance at the reference concurrency (its lowest, normally a C=1 run)
and the step cost of an earlier run of the same drafter configuration: a surface (the model fitted on its
forced points) or a real head's run (the model from its decomposition.csv). The acceptance's spread over
requests is carried into the window's tail (metrics.makespan.window_speedup).

The one prediction path: `predict_point` computes a point's prediction, and every command goes through it:
`python -m benchmarks.prediction` and `specbench report --surface` (predict_from_model; the report writes it as
prediction.csv, surface.render) and `specbench plan --surface --acceptance` (predicted_curve).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from specbench.metrics.makespan import window_speedup
from specbench.metrics.surface import NAN, Prediction, TimeModel, apart, geomean, held_out
from specbench.metrics.timemodel import log_half_width, log_width, model_error_width, model_from_terms

Group = tuple[str, int, float, float]  # variant, concurrency, output length, input length
Models = tuple[TimeModel, TimeModel, TimeModel]  # the central model, the one giving the low end, the high end
Spread = tuple[list[float], float]  # request_acceptance's (per-request acceptance, median requests per window)
POINT = ["category", "input_len", "output_len", "temperature"]
MODEL_PREDICTION_COLUMNS = ["variant", "reference_variant", "concurrency", "reference_concurrency", "acceptance_ref",
                            "acceptance_at_c", "requests_per_window", "predicted", "predicted_low", "predicted_high",
                            "extrapolated", "predicted_at_c", "measured", "measured_low", "measured_high", "error",
                            "covered", "disagree", "break_even_model", "break_even_model_low",
                            "break_even_model_high", "break_even_run"]


def point_key(row: pd.Series) -> tuple:
    """A run's point (POINT: category x input length x output length x temperature) as a key."""
    return tuple("" if isinstance(row[k], float) and math.isnan(row[k]) else row[k] for k in POINT)


@dataclass
class Reference:
    """What an earlier run of the drafter configuration says: per group its time model (central, and the
    models giving the low and high ends), the model's own errors per variant and concurrency, and per group
    the acceptance lengths the model was fitted over (a prediction outside them extrapolates)."""

    models: dict[Group, Models] = field(default_factory=dict)
    errors: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    spans: dict[Group, tuple[float, float]] = field(default_factory=dict)

    def key(self, variant: str, c: int, out_len: float, in_len: float) -> Group | None:
        """The group a point at these lengths takes its model from; a reference that pooled a length (NaN)
        stands for every length."""
        for o, i in ((out_len, in_len), (out_len, NAN), (NAN, in_len), (NAN, NAN)):
            for key in self.models:
                if key[:2] == (variant, c) and _same(key[2], o) and _same(key[3], i):
                    return key
        return None

    def model(self, variant: str, c: int, out_len: float, in_len: float) -> Models | None:
        """The group's models (`key`)."""
        key = self.key(variant, c, out_len, in_len)
        return None if key is None else self.models[key]

    def levels(self, variant: str) -> list[int]:
        """The concurrencies the reference has a model of `variant` at."""
        return sorted({k[1] for k in self.models if k[0] == variant})


def _length(x: object) -> float:
    """A length as a group key: every missing length the one NaN object (two NaNs are not equal keys)."""
    v = float(x)  # type: ignore[arg-type]
    return NAN if math.isnan(v) else v


def _same(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or x == y


def reference_from_surface(surface: pd.DataFrame) -> Reference:
    """The models of a surface (surface.table.group_curves: fitted per group on the points read back ok) and
    their held-out errors."""
    from specbench.surface.table import group_curves

    ref = Reference()
    for v in sorted(surface["variant"].unique()):
        for (c, o, i), curve in group_curves(surface, str(v)).items():
            if not len(curve):
                continue
            key = (str(v), c, _length(o), _length(i))
            ref.models[key] = (curve.models["speedup"], curve.models["low"], curve.models["high"])
            ref.spans[key] = (curve.al[0], curve.al[-1])
            if (h := held_out(curve.al, curve.speedup)) is not None:
                ref.errors.setdefault((str(v), c), []).append(h.error)
    return ref


def reference_from_run(decomp: pd.DataFrame, cells: pd.DataFrame | None = None) -> Reference:
    """The models of a real head's run, one per decomposed cell (metrics.timemodel.model_from_terms), pooled
    per group (over categories and temperatures) as the mean terms. The ends are the same with each cell's
    speedup at its 95% interval's ends (`cells`, the run's cells.csv: the measured step cost's uncertainty, as
    a surface's ends come from its points' intervals); a cell without an interval gives its point."""
    ref = Reference()
    per: dict[Group, list[tuple[TimeModel, TimeModel, TimeModel, float]]] = {}
    closed = decomp[decomp["rate"].isna()] if "rate" in decomp else decomp
    ends = _speedup_ends(cells)
    for _, r in closed.iterrows():
        a, s = float(r["acceptance_length"]), float(r["speedup"])
        terms = (float(r["step_cost_ratio"]), a, float(r["baseline_prefill_share"]))
        m = model_from_terms(s, *terms)
        if math.isfinite(m.prefill):
            lo, hi = ends.get((str(r["variant"]), str(r["point_id"])), (s, s))
            key = (str(r["variant"]), int(float(r["concurrency"])), _length(r["output_len"]), _length(r["input_len"]))
            per.setdefault(key, []).append((m, model_from_terms(lo, *terms), model_from_terms(hi, *terms), a))
    for key, ms in per.items():
        ref.models[key] = (_mean_model([x[0] for x in ms]), _mean_model([x[1] for x in ms]),
                           _mean_model([x[2] for x in ms]))
        ref.spans[key] = (min(x[3] for x in ms), max(x[3] for x in ms))
    return ref


def _speedup_ends(cells: pd.DataFrame | None) -> dict[tuple[str, str], tuple[float, float]]:
    """(variant, point_id) -> the cell's speedup interval (low, high), where both ends are positive numbers."""
    if cells is None or not len(cells) or "speedup_ci_low" not in cells:
        return {}
    out = {}
    for _, c in cells.iterrows():
        lo, hi = float(c["speedup_ci_low"]), float(c["speedup_ci_high"])
        if math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi:
            out[(str(c["variant"]), str(c["point_id"]))] = (lo, hi)
    return out


def _mean_model(ms: list[TimeModel]) -> TimeModel:
    """The time model of the mean terms (a NaN term of an end left out: that end is then the point's)."""
    ok = [m for m in ms if math.isfinite(m.prefill)] or ms
    return TimeModel(sum(m.prefill for m in ok) / len(ok), sum(m.decode for m in ok) / len(ok))


def request_acceptance(acceptance: pd.DataFrame, variant: str, point_id: str) -> Spread:
    """(per-request acceptance in decode steps, (O - 1) / (target steps - 1), as the decomposition counts them;
    the median requests per window) of one cell from acceptance.csv; ([], NaN) without rows."""
    if not len(acceptance) or not point_id:
        return [], NAN
    rows = acceptance[(acceptance["variant"] == variant) & (acceptance["point_id"] == point_id)]
    out = [(float(n) - 1) / (float(k) - 1) for n, k in zip(rows["output_tokens"], rows["verify_steps"])
           if math.isfinite(float(n)) and math.isfinite(float(k)) and k > 1 and n > 1]
    sizes = sorted(rows.groupby("window_id").size().tolist())
    return out, (float(sizes[len(sizes) // 2]) if sizes else NAN)


@dataclass(frozen=True)
class PointPrediction:
    """One point's predicted speedup (with its 95% interval and whether it extrapolates) and the model's
    break-even acceptance a* (central, low, high)."""

    speedup: Prediction
    break_even: tuple[float, float, float]


def predict_point(ref: Reference, at: tuple[str, int], acc: pd.Series, spread: Spread,
                  seed: int = 0) -> PointPrediction | None:
    """The one prediction of a point at (reference variant, C) `at` from its cell `acc` (its acceptance_length,
    the acceptance's interval ends and the point's lengths): the window's speedup simulated over C slots with
    the per-request acceptance of `spread` (request_acceptance; none: every request at the cell's mean, a
    window of C requests), its interval the step cost's, the acceptance's and the model's own error in
    quadrature (docs/metrics.md, "Prediction from the model"). None without a model at the point's lengths."""
    (rv, c), (samples, n_req) = at, spread
    key = ref.key(rv, c, float(acc["output_len"]), float(acc["input_len"]))
    a = float(acc["acceptance_length"])
    if key is None or not math.isfinite(a):
        return None
    m, lo_m, hi_m = ref.models[key]
    a_lo, a_hi = (float(acc[f"acceptance_length_ci_{e}"]) for e in ("low", "high"))
    s = window_speedup(m, samples or [a], int(n_req) if math.isfinite(n_req) else c, c, seed)
    err = model_error_width(ref.errors.get((rv, c), []))
    below = log_half_width(log_width(m.at(a), lo_m.at(a)), log_width(m.at(a), m.at(a_lo)), err)
    above = log_half_width(log_width(hi_m.at(a), m.at(a)), log_width(m.at(a_hi), m.at(a)), err)
    lo, hi = ref.spans.get(key, (NAN, NAN))
    outside = any(math.isfinite(x) and not lo - 1e-9 <= x <= hi + 1e-9 for x in (a_lo, a, a_hi))
    return PointPrediction(Prediction(s, s * math.exp(-below), s * math.exp(above), outside),
                           (m.break_even(), hi_m.break_even(), lo_m.break_even()))


def _pooled(points: Iterable[PointPrediction]) -> tuple[Prediction, tuple[float, float, float]] | None:
    """Several points' predictions as the variant's: the geometric mean of each (and of each end: the ends
    move together, as they come from one reference); None without any."""
    pts = list(points)
    if not pts:
        return None
    s = [p.speedup for p in pts]
    return (Prediction(geomean([x.speedup for x in s]), geomean([x.low for x in s]), geomean([x.high for x in s]),
                       any(x.extrapolated for x in s)),
            (geomean([p.break_even[0] for p in pts]), geomean([p.break_even[1] for p in pts]),
             geomean([p.break_even[2] for p in pts])))


def _closed(cells: pd.DataFrame) -> pd.DataFrame:
    closed = cells[cells["rate"].isna()] if "rate" in cells else cells
    return closed[closed["valid"]]


def _spread(acceptance: pd.DataFrame, variant: str, row: pd.Series) -> Spread:
    return request_acceptance(acceptance, variant, str(row["point_id"]) if "point_id" in row else "")


def predicted_curve(cells: pd.DataFrame, acceptance: pd.DataFrame, variant: str, ref: Reference,
                    reference_variant: str | None = None, seed: int = 0) -> dict[int, Prediction]:
    """The variant's speedup predicted (predict_point, pooled over its points) at every concurrency the
    reference has a model at, from what a run at its lowest concurrency alone measured: what `specbench plan
    --surface --acceptance` knows from a new head's C=1 run."""
    rv = reference_variant or variant
    mine = _closed(cells)
    mine = mine[mine["variant"] == variant]
    if mine.empty:
        return {}
    at_ref = [r for _, r in mine[mine["concurrency"] == mine["concurrency"].min()].iterrows()]
    spread = [_spread(acceptance, variant, r) for r in at_ref]
    out = {}
    for c in ref.levels(rv):
        pooled = _pooled(p for r, sp in zip(at_ref, spread) if (p := predict_point(ref, (rv, c), r, sp, seed)))
        if pooled is not None:
            out[c] = pooled[0]
    return out


def variant_pairs(cells: pd.DataFrame, baseline: str, known: Iterable[str],
                  mapping: Mapping[str, str] | None = None) -> dict[str, str]:
    """Run variant -> reference variant: `mapping`, and every other drafter of the run the reference has
    under the same name."""
    names, pairs = set(known), dict(mapping or {})
    for v in cells["variant"].unique():
        if v != baseline and v in names and v not in pairs:
            pairs[str(v)] = str(v)
    return pairs


def predict_from_model(cells: pd.DataFrame, acceptance: pd.DataFrame, decomp: pd.DataFrame, ref: Reference,
                       pairs: Mapping[str, str], seed: int = 0) -> pd.DataFrame:
    """Rows of the model's prediction per run variant (`pairs`: run variant -> reference variant) and
    concurrency: predicted from the variant's acceptance at its lowest concurrency alone (`predicted_at_c`: from
    its acceptance at C, which tells the acceptance's drift with load from the model's error), next to the
    speedup measured, and the model's break-even AL next to the run's own (decomposition's)."""
    closed = _closed(cells)
    rows = []
    for v, rv in sorted(pairs.items()):
        mine = closed[closed["variant"] == v]
        if mine.empty:
            continue
        ref_c = int(mine["concurrency"].min())
        at_ref = {point_key(r): r for _, r in mine[mine["concurrency"] == ref_c].iterrows()}
        spread = {k: _spread(acceptance, v, r) for k, r in at_ref.items()}
        for c in sorted(int(x) for x in mine["concurrency"].unique()):
            at_c = [r for _, r in mine[mine["concurrency"] == c].iterrows() if point_key(r) in at_ref]
            pts = [(p, r) for r in at_c if (p := predict_point(ref, (rv, c), at_ref[point_key(r)],
                                                                spread[point_key(r)], seed)) is not None]
            if not (pooled := _pooled(p for p, _ in pts)):
                continue
            pred, be = pooled
            own = _pooled(p for _, r in pts if (p := predict_point(ref, (rv, c), r, _spread(acceptance, v, r), seed)))
            meas = [geomean([float(r[col]) for _, r in pts])
                    for col in ("speedup", "speedup_ci_low", "speedup_ci_high")]
            d = decomp[(decomp["variant"] == v) & (decomp["concurrency"] == c)] if len(decomp) else decomp
            rows.append(dict(variant=v, reference_variant=rv, concurrency=c, reference_concurrency=ref_c,
                             acceptance_ref=geomean([float(at_ref[point_key(r)]["acceptance_length"]) for _, r in pts]),
                             acceptance_at_c=geomean([float(r["acceptance_length"]) for _, r in pts]),
                             requests_per_window=geomean([spread[point_key(r)][1] for _, r in pts]),
                             predicted=pred.speedup, predicted_low=pred.low, predicted_high=pred.high,
                             extrapolated=pred.extrapolated, predicted_at_c=own[0].speedup if own else NAN,
                             measured=meas[0], measured_low=meas[1], measured_high=meas[2],
                             error=pred.speedup / meas[0] - 1 if meas[0] > 0 else NAN,
                             covered=bool(pred.low <= meas[0] <= pred.high),
                             disagree=apart((pred.low, pred.speedup, pred.high), (meas[1], meas[0], meas[2])),
                             break_even_model=be[0], break_even_model_low=be[1], break_even_model_high=be[2],
                             break_even_run=geomean(d["break_even_acceptance_length"].tolist()) if len(d) else NAN))
    return pd.DataFrame(rows, columns=MODEL_PREDICTION_COLUMNS)


def model_summary_line(pred: pd.DataFrame, at: tuple[int, ...] | None = None) -> str:
    """The benchmark's last line: errors and coverage at the concurrencies `at` (default all but the
    reference), and for how many drafters the run's own break-even AL lies within the model's interval at
    every one of them (a drafter with no break-even on either side at those levels is not counted)."""
    sel = (pred[pred["concurrency"] != pred["reference_concurrency"]] if at is None
           else pred[pred["concurrency"].isin(at)])
    sel = sel[[math.isfinite(float(e)) for e in sel["error"]]]
    errs = sorted(abs(float(e)) for e in sel["error"])
    med = (errs[(len(errs) - 1) // 2] + errs[len(errs) // 2]) / 2 if errs else NAN
    worst = errs[-1] if errs else NAN
    covered = int(sum(bool(x) for x in sel["covered"]))
    within: dict[str, bool] = {}
    for _, r in sel.iterrows():
        run, lo, hi = (float(r[c]) for c in ("break_even_run", "break_even_model_low", "break_even_model_high"))
        if math.isfinite(run) and not math.isnan(lo) and not math.isnan(hi):
            within[str(r["variant"])] = within.get(str(r["variant"]), True) and lo <= run <= hi
    return (f"prediction: {len(errs)} points, median error {100 * med:.1f}%, worst {100 * worst:.1f}%, "
            f"interval coverage {covered} of {len(errs)}, break-even AL from the run vs the surface within "
            f"intervals for {sum(within.values())} of {len(within)} drafters")


def load_reference(path: Path) -> tuple[Reference, str]:
    """A surface directory (its surface.csv) or a run directory (its decomposition.csv) as a Reference, and
    which it was (`surface` or `run`)."""
    from specbench.shared.errors import UsageError
    from specbench.surface.table import SURFACE_FILE, load_surface

    if (path / SURFACE_FILE).exists():
        return reference_from_surface(load_surface(path)), "surface"
    if (path / "decomposition.csv").exists():
        cells = pd.read_csv(path / "cells.csv") if (path / "cells.csv").exists() else None
        return reference_from_run(pd.read_csv(path / "decomposition.csv"), cells), "run"
    raise UsageError(f"reference: {path} has neither {SURFACE_FILE} (a surface) nor decomposition.csv (a run)")


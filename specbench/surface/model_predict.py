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
from dataclasses import dataclass

import pandas as pd
from scipy.stats import t as student_t

from specbench.metrics.forced_surface import NAN, Prediction, apart, geomean
from specbench.metrics.makespan import Spread, request_acceptance, window_speedup
from specbench.metrics.timemodel import log_half_width, log_width, model_error_width
from specbench.surface.reference import Reference

POINT = ["category", "input_len", "output_len", "temperature"]
MODEL_PREDICTION_COLUMNS = ["variant", "reference_variant", "concurrency", "reference_concurrency", "acceptance_ref",
                            "acceptance_at_c", "requests_per_window", "predicted", "predicted_low", "predicted_high",
                            "extrapolated", "predicted_at_c", "measured", "measured_low", "measured_high", "error",
                            "covered", "disagree", "break_even_model", "break_even_model_low",
                            "break_even_model_high", "break_even_run"]


def point_key(row: pd.Series) -> tuple:
    """A run's point (POINT: category x input length x output length x temperature) as a key."""
    return tuple("" if isinstance(row[k], float) and math.isnan(row[k]) else row[k] for k in POINT)


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
    (rv, c), (samples, n_req) = at, spread[:2]
    key = ref.key(rv, c, float(acc["output_len"]), float(acc["input_len"]))
    a = float(acc["acceptance_length"])
    if key is None or not math.isfinite(a):
        return None
    m, lo_m, hi_m = ref.models[key]
    a_lo, a_hi = (float(acc[f"acceptance_length_ci_{e}"]) for e in ("low", "high"))
    s = window_speedup(m, samples or [a], int(n_req) if math.isfinite(n_req) else c, c, seed)
    err = model_error_width(ref.errors.get((rv, c), []))
    p_lo, p_hi = _prompt_ends(spread, a)
    below = log_half_width(log_width(m.at(a), lo_m.at(a)), log_width(m.at(a), m.at(a_lo)),
                           log_width(m.at(a), m.at(p_lo)), err)
    above = log_half_width(log_width(hi_m.at(a), m.at(a)), log_width(m.at(a_hi), m.at(a)),
                           log_width(m.at(p_hi), m.at(a)), err)
    lo, hi = ref.spans.get(key, (NAN, NAN))
    outside = any(math.isfinite(x) and not lo - 1e-9 <= x <= hi + 1e-9 for x in (a_lo, a, a_hi))
    return PointPrediction(Prediction(s, s * math.exp(-below), s * math.exp(above), outside),
                           (m.break_even(), hi_m.break_even(), lo_m.break_even()))


def _prompt_ends(spread: Spread, a: float) -> tuple[float, float]:
    """The 95% interval of the acceptance `a` from the sampling of the cell's prompts (Student t at prompts - 1
    df on the SE of their mean): the prompts are a sample of the traffic, a width the launches' interval lacks
    when every launch sends the same prompts. NaN ends without two prompts."""
    if spread.prompts < 2 or not math.isfinite(spread.prompt_se):
        return NAN, NAN
    h = float(student_t.ppf(0.975, spread.prompts - 1)) * spread.prompt_se
    return (a - h if a - h > 0 else NAN), a + h


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

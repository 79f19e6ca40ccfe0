"""Prediction from the time model (docs/metrics.md, "Speedup surface", "Prediction from the model"): a head's
speedup at each concurrency from its acceptance at the reference concurrency (its lowest, normally a C=1 run)
and the step cost of an earlier run of the same drafter configuration: a surface (the model fitted on its
forced points) or a real head's run (the model from its decomposition.csv). The acceptance's spread over
requests is carried into the window's tail (metrics.makespan.window_speedup).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from specbench.metrics.makespan import window_speedup
from specbench.metrics.surface import NAN, TimeModel, geomean, held_out
from specbench.metrics.timemodel import log_half_width, log_width, model_error_width, model_from_terms
from specbench.surface.predict import point_key

Group = tuple[str, int, float, float]  # variant, concurrency, output length, input length
Models = tuple[TimeModel, TimeModel, TimeModel]  # the central model, the one giving the low end, the high end
MODEL_PREDICTION_COLUMNS = ["variant", "reference_variant", "concurrency", "reference_concurrency", "acceptance_ref",
                            "requests_per_window", "predicted", "predicted_low", "predicted_high", "measured",
                            "measured_low", "measured_high", "error", "covered", "break_even_model",
                            "break_even_model_low", "break_even_model_high", "break_even_run"]


@dataclass
class Reference:
    """What an earlier run of the drafter configuration says: per group its time model (central, and the
    models giving the low and high ends), the model's own errors per variant and concurrency."""

    models: dict[Group, Models] = field(default_factory=dict)
    errors: dict[tuple[str, int], list[float]] = field(default_factory=dict)

    def model(self, variant: str, c: int, out_len: float, in_len: float) -> Models | None:
        """The group's models; a reference that pooled a length (NaN) stands for every length."""
        for o, i in ((out_len, in_len), (out_len, NAN), (NAN, in_len), (NAN, NAN)):
            for key, m in self.models.items():
                if key[:2] == (variant, c) and _same(key[2], o) and _same(key[3], i):
                    return m
        return None


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
            ref.models[(str(v), c, o, i)] = (curve.models["speedup"], curve.models["low"], curve.models["high"])
            if (h := held_out(curve.al, curve.speedup)) is not None:
                ref.errors.setdefault((str(v), c), []).append(h.error)
    return ref


def reference_from_run(decomp: pd.DataFrame) -> Reference:
    """The models of a real head's run, one per decomposed cell (metrics.timemodel.model_from_terms), pooled
    per group (over categories and temperatures): the mean terms, and as its ends the cells' extreme terms
    (no intervals in the decomposition)."""
    ref = Reference()
    per: dict[Group, list[TimeModel]] = {}
    closed = decomp[decomp["rate"].isna()] if "rate" in decomp else decomp
    for _, r in closed.iterrows():
        m = model_from_terms(*(float(r[c]) for c in ("speedup", "step_cost_ratio", "acceptance_length",
                                                     "baseline_prefill_share")))
        if math.isfinite(m.prefill):
            key = (str(r["variant"]), int(float(r["concurrency"])), _length(r["output_len"]), _length(r["input_len"]))
            per.setdefault(key, []).append(m)
    for key, ms in per.items():
        ps, qs = [m.prefill for m in ms], [m.decode for m in ms]
        ref.models[key] = (TimeModel(sum(ps) / len(ps), sum(qs) / len(qs)), TimeModel(max(ps), max(qs)),
                           TimeModel(min(ps), min(qs)))
    return ref


def request_acceptance(acceptance: pd.DataFrame, variant: str, point_id: str) -> tuple[list[float], float]:
    """(per-request acceptance in decode steps, (O - 1) / (target steps - 1), as the decomposition counts them;
    the median requests per window) of one cell from acceptance.csv; ([], NaN) without rows."""
    if not len(acceptance):
        return [], NAN
    rows = acceptance[(acceptance["variant"] == variant) & (acceptance["point_id"] == point_id)]
    out = [(float(n) - 1) / (float(k) - 1) for n, k in zip(rows["output_tokens"], rows["verify_steps"])
           if math.isfinite(float(n)) and math.isfinite(float(k)) and k > 1 and n > 1]
    sizes = sorted(rows.groupby("window_id").size().tolist())
    return out, (float(sizes[len(sizes) // 2]) if sizes else NAN)


def _point(ref: Reference, at: tuple[str, int], row: pd.Series, acc: pd.Series, spread: tuple[list[float], float],
           seed: int) -> tuple[tuple[float, float, float], tuple[float, float, float]] | None:
    """One point's ((prediction, low, high), (a*, a* low, a* high)) at (reference variant, C) `at`; `acc`: its
    cell at the reference concurrency; `spread`: request_acceptance's (per-request acceptance, window size)."""
    (rv, c), (samples, n_req) = at, spread
    models = ref.model(rv, c, float(row["output_len"]), float(row["input_len"]))
    a = float(acc["acceptance_length"])
    if models is None or not math.isfinite(a):
        return None
    m, lo_m, hi_m = models
    a_lo, a_hi = (float(acc[f"acceptance_length_ci_{e}"]) for e in ("low", "high"))
    s = window_speedup(m, samples or [a], int(n_req) if math.isfinite(n_req) else c, c, seed)
    err = model_error_width(ref.errors.get((rv, c), []))
    below = log_half_width(log_width(m.at(a), lo_m.at(a)), log_width(m.at(a), m.at(a_lo)), err)
    above = log_half_width(log_width(hi_m.at(a), m.at(a)), log_width(m.at(a_hi), m.at(a)), err)
    return (s, s * math.exp(-below), s * math.exp(above)), (m.break_even(), hi_m.break_even(), lo_m.break_even())


def predict_from_model(cells: pd.DataFrame, acceptance: pd.DataFrame, decomp: pd.DataFrame, ref: Reference,
                       pairs: Mapping[str, str], seed: int = 0) -> pd.DataFrame:
    """Rows of the model's prediction per run variant (`pairs`: run variant -> reference variant) and
    concurrency: predicted from the variant's acceptance at its lowest concurrency alone, next to the speedup
    measured, and the model's break-even AL next to the run's own (decomposition's)."""
    closed = cells[cells["rate"].isna() & cells["valid"]] if "rate" in cells else cells[cells["valid"]]
    rows = []
    for v, rv in sorted(pairs.items()):
        mine = closed[closed["variant"] == v]
        if mine.empty:
            continue
        ref_c = int(mine["concurrency"].min())
        at_ref = {point_key(r): r for _, r in mine[mine["concurrency"] == ref_c].iterrows()}
        spread = {k: request_acceptance(acceptance, v, str(r["point_id"])) for k, r in at_ref.items()}
        for c in sorted(int(x) for x in mine["concurrency"].unique()):
            at_c = mine[mine["concurrency"] == c]
            pts = [(p, r) for _, r in at_c.iterrows() if (k := point_key(r)) in at_ref
                   and (p := _point(ref, (rv, c), r, at_ref[k], spread[k], seed)) is not None]
            if not pts:
                continue
            pred = [geomean([p[0][j] for p, _ in pts]) for j in range(3)]
            meas = [geomean([float(r[col]) for _, r in pts])
                    for col in ("speedup", "speedup_ci_low", "speedup_ci_high")]
            be = [geomean([p[1][j] for p, _ in pts]) for j in range(3)]
            d = decomp[(decomp["variant"] == v) & (decomp["concurrency"] == c)] if len(decomp) else decomp
            rows.append(dict(variant=v, reference_variant=rv, concurrency=c, reference_concurrency=ref_c,
                             acceptance_ref=geomean([float(at_ref[point_key(r)]["acceptance_length"]) for _, r in pts]),
                             requests_per_window=geomean([spread[point_key(r)][1] for _, r in pts]),
                             predicted=pred[0], predicted_low=pred[1], predicted_high=pred[2], measured=meas[0],
                             measured_low=meas[1], measured_high=meas[2],
                             error=pred[0] / meas[0] - 1 if meas[0] > 0 else NAN,
                             covered=bool(pred[1] <= meas[0] <= pred[2]), break_even_model=be[0],
                             break_even_model_low=be[1], break_even_model_high=be[2],
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
        return reference_from_run(pd.read_csv(path / "decomposition.csv")), "run"
    raise UsageError(f"reference: {path} has neither {SURFACE_FILE} (a surface) nor decomposition.csv (a run)")


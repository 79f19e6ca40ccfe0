"""The reference of a prediction (docs/metrics.md, "Prediction from the model"): what an earlier run of a
drafter configuration says about its step cost, as time models per variant x concurrency x output and input
length: a surface's (fitted on its forced points, with their held-out errors) or a real head's run's (from its
decomposition.csv, its ends from its cells' speedup intervals). surface.model_predict predicts from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from specbench.metrics.forced_surface import NAN, TimeModel, held_out
from specbench.metrics.makespan import request_acceptance, untailed
from specbench.metrics.timemodel import model_from_terms

Group = tuple[str, int, float, float]  # variant, concurrency, output length, input length
Models = tuple[TimeModel, TimeModel, TimeModel]  # the central model, the one giving the low end, the high end


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
    """The models of a surface (surface.table.group_curves: fitted per group on the points read back ok, each
    point's own window tail taken out where surface.csv has its `tail_factor`, so a prediction adds only the
    predicted head's) and their held-out errors."""
    from specbench.surface.table import group_curves, untail

    surface = untail(surface)
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


def reference_from_run(decomp: pd.DataFrame, cells: pd.DataFrame | None = None,
                       acceptance: pd.DataFrame | None = None) -> Reference:
    """The models of a real head's run, one per decomposed cell (metrics.timemodel.model_from_terms), pooled
    per group (over categories and temperatures) as the mean terms. The ends are the same with each cell's
    speedup at its 95% interval's ends (`cells`, the run's cells.csv: the measured step cost's uncertainty, as
    a surface's ends come from its points' intervals); a cell without an interval gives its point. With the
    run's acceptance.csv (`acceptance`), each cell's own window tail is taken out of its models
    (metrics.makespan.untailed): the prediction adds the predicted head's tail, not this one's on top."""
    ref = Reference()
    per: dict[Group, list[tuple[TimeModel, TimeModel, TimeModel, float]]] = {}
    closed = decomp[decomp["rate"].isna()] if "rate" in decomp else decomp
    ends = _speedup_ends(cells)
    for _, r in closed.iterrows():
        a, s = float(r["acceptance_length"]), float(r["speedup"])
        terms = (float(r["step_cost_ratio"]), a, float(r["baseline_prefill_share"]))
        if not math.isfinite(model_from_terms(s, *terms).prefill):
            continue
        v, c, point = str(r["variant"]), int(float(r["concurrency"])), str(r.get("point_id", ""))
        spread = request_acceptance(acceptance if acceptance is not None else pd.DataFrame(), v, point)
        lo, hi = ends.get((v, point), (s, s))
        m, m_lo, m_hi = (untailed(model_from_terms(x, *terms), x, spread, c) for x in (s, lo, hi))
        per.setdefault((v, c, _length(r["output_len"]), _length(r["input_len"])), []).append((m, m_lo, m_hi, a))
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


def load_reference(path: Path) -> tuple[Reference, str]:
    """A surface directory (its surface.csv) or a run directory (its decomposition.csv) as a Reference, and
    which it was (`surface` or `run`)."""
    from specbench.shared.errors import UsageError
    from specbench.surface.table import SURFACE_FILE, load_surface

    if (path / SURFACE_FILE).exists():
        return reference_from_surface(load_surface(path)), "surface"
    if (path / "decomposition.csv").exists():
        cells, acc = (pd.read_csv(path / f) if (path / f).exists() else None for f in ("cells.csv", "acceptance.csv"))
        return reference_from_run(pd.read_csv(path / "decomposition.csv"), cells, acc), "run"
    raise UsageError(f"reference: {path} has neither {SURFACE_FILE} (a surface) nor decomposition.csv (a run)")


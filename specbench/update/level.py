"""Per level, the new head's word: predicted from RUN's step cost and the head's new acceptance where the
prediction's interval decides (docs/metrics.md, "Update: a predicted word"), else measured where the update's
run has the level, else marked to measure."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from specbench.decide.decision import WORD, classify
from specbench.metrics.forced_surface import NAN, Prediction, geomean, has_interval
from specbench.surface.model_predict import predicted_curve
from specbench.surface.reference import Reference

PREDICTED, MEASURED, TO_MEASURE = "predicted", "measured", "to measure"


@dataclass(frozen=True)
class LevelWord:
    """One level's word and where it comes from (`source`: predicted, measured, or to measure), with the
    prediction and the measured speedup (central, low, high; NaN where there is none)."""

    concurrency: int
    word: str
    source: str
    predicted: Prediction | None
    measured: tuple[float, float, float]


def word_of(low: float, high: float, min_speedup: float) -> str:
    """The verdict's word for an interval (decide.decision.classify); `undecided` without two finite ends."""
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        return WORD[classify(NAN, NAN, min_speedup)]
    return WORD[classify(low, high, min_speedup)]


def measured_at(cells: pd.DataFrame, variant: str, c: int) -> tuple[float, float, float]:
    """The variant's measured speedup at level `c`: the geometric mean over its valid closed-loop points of the
    speedup and of each interval end (NaN where a point has none)."""
    sel = cells[(cells["variant"] == variant) & (cells["concurrency"] == c) & cells["valid"].astype(bool)]
    if "rate" in sel:
        sel = sel[sel["rate"].isna()]
    if not len(sel):
        return NAN, NAN, NAN
    return tuple(geomean([float(x) for x in sel[col]])  # type: ignore[return-value]
                 for col in ("speedup", "speedup_ci_low", "speedup_ci_high"))


@dataclass(frozen=True)
class StepCost:
    """RUN's step cost of the variant the new head replaces: its time models (a Reference) and its name."""

    ref: Reference
    variant: str

    @property
    def levels(self) -> list[int]:
        """RUN's levels with a model of the variant: the levels the update gives a word at."""
        return self.ref.levels(self.variant)


def level_words(new_cells: pd.DataFrame, new_acceptance: pd.DataFrame, name: str, step: StepCost,
                min_speedup: float) -> list[LevelWord]:
    """The words of `name` at each of RUN's levels: the prediction (surface.model_predict.predicted_curve from
    the update run's acceptance and RUN's step cost) where its interval decides; otherwise the update run's own
    measurement at that level if it has one (its word, decided or not); otherwise `to measure`."""
    curve = predicted_curve(new_cells, new_acceptance, name, step.ref, step.variant)
    out = []
    for c in step.levels:
        p = curve.get(c)
        meas = measured_at(new_cells, name, c)
        if p is not None and has_interval(p) and (w := word_of(p.low, p.high, min_speedup)) != "undecided":
            out.append(LevelWord(c, w, PREDICTED, p, meas))
        elif math.isfinite(meas[0]):
            out.append(LevelWord(c, word_of(meas[1], meas[2], min_speedup), MEASURED, p, meas))
        else:
            out.append(LevelWord(c, "undecided", TO_MEASURE, p, meas))
    return out

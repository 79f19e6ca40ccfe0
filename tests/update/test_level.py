"""update.level: a level's word is predicted where the prediction's interval decides, else measured in the
update's run, else left to measure."""

from __future__ import annotations

import math

import pandas as pd

from specbench.metrics.forced_surface import TimeModel
from specbench.surface.reference import Reference
from specbench.update.level import MEASURED, PREDICTED, TO_MEASURE, StepCost, level_words, word_of

NAN = math.nan


def _cells(rows: list[tuple[int, float, float, float]]) -> pd.DataFrame:
    """The head's cells at acceptance 2 (interval 1.9-2.1): (C, speedup, low, high)."""
    return pd.DataFrame([dict(variant="head", category="chat", input_len=NAN, output_len=64.0, temperature=0.0,
                              rate=NAN, point_id=f"chat|c{c}", valid=True, concurrency=c, acceptance_length=2.0,
                              acceptance_length_ci_low=1.9, acceptance_length_ci_high=2.1, speedup=s,
                              speedup_ci_low=lo, speedup_ci_high=hi) for c, s, lo, hi in rows])


def _step(models: dict[int, tuple[float, float]], spread: float = 0.1) -> StepCost:
    """RUN's step cost: per level 1/S = p + q/AL, the ends from p -/+ spread."""
    ref = Reference()
    for c, (p, q) in models.items():
        ref.models[("old", c, 64.0, NAN)] = (TimeModel(p, q), TimeModel(p + spread, q), TimeModel(p - spread, q))
        ref.spans[("old", c, 64.0, NAN)] = (1.0, 4.0)
    return StepCost(ref, "old")


def test_a_decided_prediction_is_the_word_and_an_undecided_one_is_measured_or_left():
    # at AL 2, p -/+ 0.1 at the ends: C=1 1/(0.05 + 0.5) = 1.82 [1.54, 2.2] adopt; C=4 1/(0.2 + 0.8) = 1.0
    # [0.9, 1.1] undecided, measured here; C=16 1/(0.3 + 0.7) the same, not measured
    step = _step({1: (0.05, 1.0), 4: (0.2, 1.6), 16: (0.3, 1.4)})
    words = level_words(_cells([(4, 0.8, 0.7, 0.9)]), pd.DataFrame(), "head", step, 1.05)
    got = {w.concurrency: (w.word, w.source) for w in words}
    assert got == {1: ("adopt", PREDICTED), 4: ("slower", MEASURED), 16: ("undecided", TO_MEASURE)}
    one = next(w for w in words if w.concurrency == 1)
    assert one.predicted is not None and one.predicted.low > 1.05
    assert math.isclose(one.predicted.speedup, 1 / 0.55, rel_tol=1e-6)


def test_a_prediction_without_an_interval_decides_nothing():
    step = _step({4: (0.05, 1.0)}, spread=0.0)
    cells = _cells([(4, 1.2, NAN, NAN)]).assign(acceptance_length_ci_low=NAN, acceptance_length_ci_high=NAN)
    (w,) = level_words(cells, pd.DataFrame(), "head", step, 1.05)
    assert (w.word, w.source) == ("undecided", MEASURED)


def test_the_words_are_the_verdicts():
    assert word_of(1.1, 1.3, 1.05) == "adopt"
    assert word_of(0.97, 1.02, 1.05) == "same"
    assert word_of(0.7, 0.9, 1.05) == "slower"
    assert word_of(0.9, 1.2, 1.05) == "undecided"
    assert word_of(NAN, 1.2, 1.05) == "undecided"

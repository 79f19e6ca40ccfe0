"""A run's speedups predicted from a surface next to the ones it measured (prediction.csv, `specbench report
--surface`), and the break-even concurrency each gives. The prediction itself is surface.model_predict's
(predict_from_model: the one path every command takes), with the surface as its reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from specbench.metrics.forced_surface import break_even_level
from specbench.stores.prediction_history import RunLedger
from specbench.surface.model_predict import (
    MODEL_PREDICTION_COLUMNS,
    predict_from_model,
    variant_pairs,
)
from specbench.surface.reference import reference_from_surface

PREDICTION_FILE = "prediction.csv"
# predict_from_model's columns, the reference named as what it is here: a surface
PREDICTION_COLUMNS = [c if c != "reference_variant" else "surface_variant" for c in MODEL_PREDICTION_COLUMNS]


@dataclass(frozen=True)
class RunExtras:
    """What a run has besides its cells, each optional: acceptance.csv (per-request acceptance for the window's
    tail), decomposition.csv (its break-even AL) and its prediction ledger (past errors of its setup join the
    model's own error)."""

    acceptance: pd.DataFrame | None = None
    decomp: pd.DataFrame | None = None
    ledger: RunLedger | None = None


def predict_run(cells: pd.DataFrame, baseline: str, surface: pd.DataFrame, mapping: Mapping[str, str] | None = None,
                extras: RunExtras = RunExtras()) -> pd.DataFrame:
    """prediction.csv for every run variant that has a surface: `mapping` run variant -> surface variant
    (default: the same name)."""
    ref = reference_from_surface(surface)
    pairs = variant_pairs(cells, baseline, set(surface["variant"]), mapping)
    if extras.ledger is not None:
        extras.ledger.widen(ref.errors, pairs)
    empty = pd.DataFrame()
    pred = predict_from_model(cells, empty if extras.acceptance is None else extras.acceptance,
                              empty if extras.decomp is None else extras.decomp, ref, pairs)
    return pred.rename(columns={"reference_variant": "surface_variant"})


def break_even_levels(pred: pd.DataFrame) -> dict[str, tuple[int, int, list[int]]]:
    """Per variant: (predicted break-even level, measured level, the levels) by `break_even_level`."""
    out = {}
    for v, g in pred.groupby("variant"):
        g = g.sort_values("concurrency")
        levels = [int(c) for c in g["concurrency"]]
        out[str(v)] = (break_even_level(levels, g["predicted"].tolist()),
                       break_even_level(levels, g["measured"].tolist()), levels)
    return out

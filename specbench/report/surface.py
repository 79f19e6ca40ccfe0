"""Report sections of the speedup surface: the note on forced-acceptance variants, and the speedups
predicted from a surface next to the measured ones (prediction.csv, written by `specbench report --surface`)."""

from __future__ import annotations

import pandas as pd

from .document import Block, Bullets, Code, Heading, Inline, Paragraph, Table
from .fmt import fmt, fmt_interval
from .load import RunData, read_csv

FORCED_NOTE = ("): the engine accepted drafts at a set mean acceptance length whatever "
               "the target said, so these outputs are not the target's and their losslessness is not checked; they "
               "measure the cost of drafting and verifying at that length (docs/surface.md).")


def forced_section(data: RunData) -> list[Block]:
    forced = [v.get("name", "") for v in data.config.get("variants", []) if v.get("forced_acceptance") is not None]
    if not forced:
        return []
    return [Paragraph(["Forced acceptance (", Code(", ".join(forced)), FORCED_NOTE], "warn")]


def _error(x: object) -> str:
    return f"{100 * float(x):+.1f}%" if pd.notna(x) else "n/a"  # type: ignore[arg-type]


def _true(x: object) -> bool:
    return str(x).lower() == "true"


def prediction_section(data: RunData) -> list[Block]:
    pred = read_csv(data.path / "prediction.csv")
    if not len(pred):
        return []
    if "anchored" not in pred:  # a prediction.csv written before the anchored prediction existed
        for col in ("anchored", "anchored_low", "anchored_high", "anchored_error", "anchored_disagree"):
            pred[col] = float("nan") if col != "anchored_disagree" else False
    rows: list[list[str]] = []
    flagged: list[list[Inline]] = []
    for _, r in pred.iterrows():
        apart = [name for name, col in (("surface", "disagree"), ("anchored", "anchored_disagree")) if _true(r[col])]
        rows.append([str(r["variant"]), fmt(r["concurrency"], 0), fmt(r["acceptance_ref"]), fmt(r["acceptance_at_c"]),
                     fmt_interval(r["predicted"], r["predicted_low"], r["predicted_high"]), _error(r["error"]),
                     fmt_interval(r["anchored"], r["anchored_low"], r["anchored_high"]), _error(r["anchored_error"]),
                     fmt_interval(r["measured"], r["measured_low"], r["measured_high"]),
                     "disagree (" + ", ".join(apart) + ")" if apart else ""])
        if apart:
            flagged.append([f"{r['variant']} at C={int(r['concurrency'])}: the {' and the '.join(apart)} "
                            f"prediction{'s' if len(apart) > 1 else ''} and the measured interval do not overlap"])
    blocks: list[Block] = [
        Heading("Predicted from the speedup surface"),
        Paragraph(["Each drafter's speedup predicted from the speedup surface, next to the measured speedup "
                   "(docs/metrics.md, \"Speedup surface\"): ", Code("surface"), ", the surface's speedup at the "
                   "acceptance the drafter measured at the reference concurrency; ", Code("anchored"), ", the "
                   "speedup the run measured at the reference concurrency times the surface's fall from there to C."],
                  "note"),
        Table(["variant", "C", "AL (ref)", "AL at C", "surface", "error", "anchored", "error", "measured", ""], rows,
              numeric=frozenset({1, 2, 3, 5, 7}))]
    if flagged:
        blocks.append(Bullets(flagged, "warn"))
    return blocks

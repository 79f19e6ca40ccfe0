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


def prediction_section(data: RunData) -> list[Block]:
    pred = read_csv(data.path / "prediction.csv")
    if not len(pred):
        return []
    rows: list[list[str]] = []
    flagged: list[list[Inline]] = []
    for _, r in pred.iterrows():
        disagree = str(r["disagree"]).lower() == "true"
        rows.append([str(r["variant"]), fmt(r["concurrency"], 0), fmt(r["acceptance_ref"]), fmt(r["acceptance_at_c"]),
                     fmt_interval(r["predicted"], r["predicted_low"], r["predicted_high"]),
                     fmt_interval(r["measured"], r["measured_low"], r["measured_high"]),
                     f"{100 * r['error']:+.1f}%" if pd.notna(r["error"]) else "n/a", "disagree" if disagree else ""])
        if disagree:
            flagged.append([f"{r['variant']} at C={int(r['concurrency'])}: predicted and measured intervals do not "
                            "overlap"])
    blocks: list[Block] = [
        Heading("Predicted from the speedup surface"),
        Paragraph(["Each drafter's speedup predicted from the speedup surface at the acceptance it measured at the "
                   "reference concurrency (docs/metrics.md, \"Speedup surface\"), next to the measured speedup."],
                  "note"),
        Table(["variant", "C", "AL (ref)", "AL at C", "predicted", "measured", "error", ""], rows,
              numeric=frozenset({1, 2, 3, 6}))]
    if flagged:
        blocks.append(Bullets(flagged, "warn"))
    return blocks

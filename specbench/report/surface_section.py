"""Report sections of the speedup surface: the note on forced-acceptance variants, a surface run's break-even
acceptance (break_even_al.csv), and the speedups predicted from a surface next to the measured ones
(prediction.csv, written by `specbench report --surface`)."""

from __future__ import annotations

import math

import pandas as pd

from specbench.report.derived import RunData, read_csv
from specbench.report.document import Block, Bullets, Code, Heading, Inline, Paragraph, Table
from specbench.report.fmt import fmt, fmt_interval

FORCED_NOTE = ("): the engine accepted drafts at a set mean acceptance length whatever "
               "the target said, so these outputs are not the target's and their losslessness is not checked; they "
               "measure the cost of drafting and verifying at that length (docs/surface.md).")


def forced_section(data: RunData) -> list[Block]:
    forced = [v.get("name", "") for v in data.config.get("variants", []) if v.get("forced_acceptance") is not None]
    if not forced:
        return []
    return [Paragraph(["Forced acceptance (", Code(", ".join(forced)), FORCED_NOTE], "warn")]


def _al(x: float) -> str:
    return "beyond" if x == math.inf else (f"{x:.2f}" if math.isfinite(x) else "n/a")


def break_even_text(row: pd.Series | dict) -> tuple[str, str]:
    """A break_even_al.csv row as words: the break-even (`at most 1.00` when the drafter pays at the lowest
    forced length, `beyond k+1 = 4` when the model's a* lies past the most a step can accept) and its 95%
    interval (`none` without one; an end past k + 1 is `beyond`)."""
    value, lo, hi = (float(row[c]) for c in ("break_even_acceptance", "break_even_acceptance_low",
                                             "break_even_acceptance_high"))
    at_most = str(row.get("break_even_acceptance_at_most", False)).lower() == "true"
    top = float(row.get("max_acceptance", math.nan))
    interval = "none" if math.isnan(lo) and math.isnan(hi) else f"[{_al(lo)}, {_al(hi)}]"
    if value == math.inf and math.isfinite(top):
        return f"beyond k+1 = {top:g}", interval
    return (f"at most {_al(value)}" if at_most else _al(value)), interval


def lengths_text(output_len: float, input_len: float) -> str:
    """`O=64 I=512`: the output and input length of a surface group; a length the surface pooled is left out."""
    return " ".join(f"{n}={int(x)}" for n, x in (("O", output_len), ("I", input_len)) if math.isfinite(x))


def group_text(row: pd.Series) -> str:
    """lengths_text of a surface.csv or break_even_al.csv row (written before the time model: '')."""
    return lengths_text(*(float(row[c]) if c in row else math.nan for c in ("output_len", "input_len")))


def break_even_al_section(data: RunData) -> list[Block]:
    """A surface run's break-even acceptance per drafter, concurrency and output length, with its interval and
    the time model's held-out error."""
    be = read_csv(data.path / "break_even_al.csv")
    if not len(be):
        return []
    rows = []
    for _, r in be.iterrows():
        value, interval = break_even_text(r)
        held = float(r["heldout_error"]) if "heldout_error" in r else math.nan
        rows.append([str(r["variant"]), fmt(r["concurrency"], 0), group_text(r), value, interval,
                     _al(float(r["break_even_acceptance_extrapolated"])), _error(held)])
    return [Heading("Break-even acceptance"),
            Paragraph(["The acceptance length (tokens per target step) at which each drafter's speedup reaches 1.0 "
                       "at each concurrency and output length, from the time model fitted on the forced lengths "
                       "(docs/metrics.md, \"Speedup surface\"; the curves: ", Code("surface.md"), "). ",
                       Code("beyond k+1"), ": no acceptance a step can reach pays; ", Code("at most"),
                       ": the lowest forced length pays already; model: the model's a* wherever it lies; held-out: "
                       "the model fitted without the middle forced length, its error there."], "note"),
            Table(["drafter", "C", "lengths", "break-even AL", "95% interval", "model", "held-out"], rows,
                  numeric=frozenset({1, 3, 5, 6}))]


def _error(x: float) -> str:
    return f"{100 * x:+.1f}%" if math.isfinite(x) else "n/a"


def _true(x: object) -> bool:
    return str(x).lower() == "true"


def prediction_section(data: RunData) -> list[Block]:
    pred = read_csv(data.path / "prediction.csv")
    if not len(pred):
        return []
    rows: list[list[str]] = []
    flagged: list[list[Inline]] = []
    for _, r in pred.iterrows():
        apart = _true(r["disagree"])
        rows.append([str(r["variant"]), fmt(r["concurrency"], 0), fmt(r["acceptance_ref"]), fmt(r["acceptance_at_c"]),
                     fmt_interval(r["predicted"], r["predicted_low"], r["predicted_high"]),
                     _error(float(r["error"])),
                     fmt_interval(r["measured"], r["measured_low"], r["measured_high"]),
                     "disagree" if apart else ""])
        if apart:
            flagged.append([f"{r['variant']} at C={int(r['concurrency'])}: the prediction and the measured interval "
                            "do not overlap"])
    blocks: list[Block] = [
        Heading("Predicted from the speedup surface"),
        Paragraph(["Each drafter's speedup predicted from the speedup surface's time model at the acceptance the "
                   "drafter measured at the reference concurrency (the window's tail simulated with its requests' "
                   "acceptance), next to the measured speedup (docs/metrics.md, \"Prediction from the model\")."],
                  "note"),
        Table(["variant", "C", "AL (ref)", "AL at C", "predicted", "error", "measured", ""], rows,
              numeric=frozenset({1, 2, 3, 5}))]
    if flagged:
        blocks.append(Bullets(flagged, "warn"))
    return blocks

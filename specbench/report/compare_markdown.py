"""`specbench compare` as Markdown: fits a pull-request comment, the regressions first, the quiet cells folded."""

from __future__ import annotations

import math
from collections.abc import Sequence

from specbench.decide.change import GATE_ALPHA, POWER, required_drop
from specbench.report.compare import STATUS_ORDER, CellChange, Comparison, pct
from specbench.report.document import Table
from specbench.report.fmt import UNDEFINED, fmt
from specbench.report.markdown import code_span, escape, table

_COLUMNS = ["variant", "cell", "speedup A", "speedup B", "change", "accept len A", "accept len B", "Δ accept", "note"]


def underpowered_text(cells: Sequence[CellChange], threshold: float) -> str:
    """Why "no regression" is not a finding: how many cells, the drop the gate could have detected at
    POWER (the worst cell's) against the drop it must see, and the remedy."""
    known = [c for c in cells if not math.isnan(c.detectable)]
    worst = max(known, key=lambda c: c.detectable) if known else None
    could = (f"at {POWER:.0%} power it could have detected a drop of {worst.detectable:.1%} "
             f"(in {worst.name}), not the {required_drop(threshold):.2%} it must"
             if worst is not None else "no change could be established in them (no launch variance)")
    return (f"the gate was underpowered in {len(cells)} compared cell(s): {could}. More launches per variant "
            "(`specbench plan` says how many), or `specbench calibrate`, make it a finding (exit code 3).")



def _rows(changes: list[CellChange]) -> list[list[str]]:
    return [[c.variant, c.point_id, str(c.speedup_a or UNDEFINED), str(c.speedup_b or UNDEFINED),
             pct(c.speedup_change), str(c.accept_a or UNDEFINED), str(c.accept_b or UNDEFINED), fmt(c.accept_delta),
             c.reason] for c in changes]


def _table(changes: list[CellChange]) -> str:
    return table(Table(_COLUMNS, _rows(changes), numeric=frozenset({2, 3, 4, 5, 6, 7})))


def comparison_markdown(cmp: Comparison, *, max_noise_rows: int = 200) -> str:
    n = cmp.counts()
    by: dict[str, list[CellChange]] = {s: [c for c in cmp.changes if c.status == s] for s in STATUS_ORDER}
    head = (f"## specbench compare: {code_span(cmp.label_a)} → {code_span(cmp.label_b)}\n\n"
            f"**{n['regressed']} regressed**, {n['indicative_drop']} dropped (indicative only), {n['improved']} "
            f"improved, {n['indicative_gain']} rose (indicative only), {n['within_noise']} within noise, "
            f"{n['only_a'] + n['only_b']} only in one run"
            + (f", {n['undefined']} undefined" if n["undefined"] else "")
            + f" (threshold {cmp.threshold:.0%} relative speedup change; exit code {cmp.exit_code}).")
    parts = [head] + [f"⚠ {escape(note)}" for note in cmp.notes]
    weak = cmp.underpowered
    if by["regressed"]:
        parts += ["### ❌ Regressed", _table(by["regressed"])]
    elif weak:
        parts.append("No cell regressed (established), but that is no finding: "
                     + underpowered_text(weak, cmp.threshold))
    else:
        parts.append(f"No regression: no drop established beyond {cmp.threshold:.0%}, and every compared cell had "
                     f"{POWER:.0%} power against a drop of {required_drop(cmp.threshold):.2%}.")
    if by["indicative_drop"]:
        parts += ["### ⚠ Dropped, indicative only", "These drops cannot be established: an interval does not "
                  "carry the variance between launches. Rerun both with `sweep.launches: 2` or more, or "
                  "calibrate this machine (`specbench calibrate`).", _table(by["indicative_drop"])]
    for status, title in (("improved", "### Improved"), ("indicative_gain", "### Rose, indicative only")):
        if by[status]:
            parts += [title, _table(by[status])]
    quiet = by["within_noise"] + by["undefined"]
    if quiet:
        shown = quiet[:max_noise_rows]
        more = f"\n\n({len(quiet) - len(shown)} more rows not shown)" if len(quiet) > len(shown) else ""
        parts.append(f"<details><summary>Within noise ({len(quiet)} cells)</summary>\n\n{_table(shown)}{more}"
                     "\n\n</details>")
    only = by["only_a"] + by["only_b"]
    if only:
        parts.append("### Only in one run\n\n" + "\n".join(
            f"- {code_span(c.name)}: {escape(c.reason)}" for c in only))
    parts.append(f"*Rule: a cell regresses when its speedup's drop is established beyond the threshold: both "
                 f"runs' intervals carry the variance between launches (2+ launches or a variance history) and "
                 f"the t test of the log change against ln(1 - threshold), Holm-corrected over the cells at "
                 f"{GATE_ALPHA:.0%} family-wise, rejects. Other drops beyond the threshold are indicative only "
                 f"(exit code 3); so is \"no regression\" where the gate had less than {POWER:.0%} power against a "
                 f"drop of {required_drop(cmp.threshold):.2%} in some cell (exit code 3, underpowered). Speedups in "
                 "brackets are `value [95% interval]`; acceptance length is shown, not gated.*")
    return "\n\n".join(parts) + "\n"

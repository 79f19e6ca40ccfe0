"""Compare two runs cell by cell: the regression gate for drafter updates.

Cells are joined on variant + point_id (the sweep point without the variant). Speedup is each run's own
drafter-over-baseline throughput ratio, so the comparison survives a different baseline measurement.
The baseline variant itself is not compared (its speedup is 1 by definition).

The rule, per cell present in both runs with a defined speedup A (run A) and B (run B),
relative change r = (B - A) / A:

* both runs have a 95% interval for the cell:
  - regressed:    r < -threshold and B's interval lies wholly below A's (B.high < A.low)
  - improved:     r > +threshold and B's interval lies wholly above A's (B.low > A.high)
  - within noise: otherwise (the intervals overlap, or they are apart but the change is under the threshold)
* either run lacks the interval (a single repeat): regressed when r < -threshold, improved when
  r > +threshold, within noise otherwise.

Acceptance length changes are shown with their intervals but never gate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from ..errors import RunDirError, UsageError
from ..hardware import describe, differences, variant_fingerprints
from ..rundir import RunDir
from .document import Table
from .fmt import UNDEFINED, fmt, fmt_interval, num
from .load import config_caps, normalize_cells, read_config, read_json
from .markdown import code_span, escape, table

Status = Literal["regressed", "improved", "within_noise", "only_a", "only_b", "undefined"]
STATUS_ORDER: tuple[Status, ...] = ("regressed", "improved", "within_noise", "undefined", "only_a", "only_b")


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float = math.nan
    high: float = math.nan

    @property
    def defined(self) -> bool:
        return not math.isnan(self.value)

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    def __str__(self) -> str:
        return fmt_interval(self.value, self.low, self.high)


@dataclass(frozen=True)
class CellChange:
    variant: str
    point_id: str
    status: Status
    reason: str
    speedup_a: Estimate | None = None
    speedup_b: Estimate | None = None
    accept_a: Estimate | None = None
    accept_b: Estimate | None = None

    @property
    def name(self) -> str:
        return f"{self.variant} {self.point_id}"

    def __str__(self) -> str:
        """`ngram code|in-|out256|c4|t0 (1.10 [1.05, 1.15] -> 0.88 [0.83, 0.93], -20.0%)`, for CLI messages."""
        return (f"{self.name} ({self.speedup_a or UNDEFINED} -> {self.speedup_b or UNDEFINED}, "
                f"{_pct(self.speedup_change)})")

    @property
    def speedup_change(self) -> float:
        """Relative change (B - A) / A; NaN when undefined."""
        if self.speedup_a is None or self.speedup_b is None or not self.speedup_a.value:
            return math.nan
        return (self.speedup_b.value - self.speedup_a.value) / self.speedup_a.value

    @property
    def accept_delta(self) -> float:
        if self.accept_a is None or self.accept_b is None:
            return math.nan
        return self.accept_b.value - self.accept_a.value


def classify(a: Estimate, b: Estimate, threshold: float) -> tuple[Status, str]:
    """Apply the module's rule to one cell's speedups."""
    if not (a.defined and b.defined) or a.value == 0:
        return "undefined", "speedup undefined in one run"
    r = (b.value - a.value) / a.value
    if a.has_interval and b.has_interval:
        if b.high < a.low:
            return ("regressed", "interval clear below A") if r < -threshold else \
                ("within_noise", f"clear but under {threshold:.0%}")
        if b.low > a.high:
            return ("improved", "interval clear above A") if r > threshold else \
                ("within_noise", f"clear but under {threshold:.0%}")
        return "within_noise", "intervals overlap"
    if r < -threshold:
        return "regressed", "no interval; drop beyond threshold"
    if r > threshold:
        return "improved", "no interval; gain beyond threshold"
    return "within_noise", f"no interval; change under {threshold:.0%}"


def estimate(row: pd.Series | None, col: str) -> Estimate | None:
    """A cells.csv figure with its 95% interval (`col`, `col_ci_low`, `col_ci_high`); None without a row."""
    if row is None:
        return None
    return Estimate(num(row.get(col)), num(row.get(f"{col}_ci_low")), num(row.get(f"{col}_ci_high")))


@dataclass
class Comparison:
    run_a: Path
    run_b: Path
    threshold: float
    changes: list[CellChange]
    label_a: str = "A"
    label_b: str = "B"
    notes: tuple[str, ...] = ()

    @property
    def regressed(self) -> list[CellChange]:
        """Cells whose speedup dropped beyond the threshold with intervals clear of noise (see module rule)."""
        return [c for c in self.changes if c.status == "regressed"]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {s: 0 for s in STATUS_ORDER}
        for c in self.changes:
            out[c.status] += 1
        return out

    def to_markdown(self, *, max_noise_rows: int = 200) -> str:
        return comparison_markdown(self, max_noise_rows=max_noise_rows)


def load_cells(run: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A finished run's cells.csv (typed) and run.json; RunDirError without cells.csv."""
    rd = RunDir(Path(run))
    if not rd.cells.exists():
        raise RunDirError(f"no cells.csv in {rd.path}: is it a finished run directory?")
    meta = read_json(rd.meta) or {}
    return normalize_cells(pd.read_csv(rd.cells)), meta


def _label(path: Path, meta: dict[str, Any]) -> str:
    return str(meta.get("run_id") or meta.get("name") or path.name)


def _hardware_note(run_a: Path, meta_a: dict[str, Any], run_b: Path, meta_b: dict[str, Any],
                   allow_mixed_hardware: bool) -> str | None:
    """Refuse (UsageError) to compare runs whose baselines ran on unlike hardware, unless allowed: then
    the note that says so. None when the fingerprints match or a run does not record them."""
    fps = [variant_fingerprints(read_json(RunDir(p).environment) or {}).get(str(m.get("baseline")))
           for p, m in ((run_a, meta_a), (run_b, meta_b))]
    if fps[0] is None or fps[1] is None or not (diff := differences(fps[0], fps[1])):
        return None
    if not allow_mixed_hardware:
        raise UsageError(f"compare: the runs were measured on unlike hardware ({describe(diff)}): a change "
                         f"could be the hardware, not the drafter; pass --allow-mixed-hardware to compare anyway")
    return f"compared across unlike hardware (--allow-mixed-hardware): {describe(diff)}"


def compare(run_a: str | Path, run_b: str | Path, threshold: float = 0.05,
            allow_mixed_hardware: bool = False) -> Comparison:
    """Per-cell change in speedup and acceptance length from run A (before) to run B (after)."""
    if not 0 <= threshold < 1:
        raise ValueError(f"threshold must be in [0, 1), got {threshold}")
    cells_a, meta_a = load_cells(run_a)
    cells_b, meta_b = load_cells(run_b)
    baselines = {str(m.get("baseline")) for m in (meta_a, meta_b) if m.get("baseline")}
    notes: list[str] = []
    hw_note = _hardware_note(Path(run_a), meta_a, Path(run_b), meta_b, allow_mixed_hardware)
    if hw_note:
        notes.append(hw_note)
    if len(baselines) > 1:
        notes.append(f"the runs name different baselines ({', '.join(sorted(baselines))}); "
                     "each speedup is against its own run's baseline")
    caps_a, caps_b = (config_caps(read_config(RunDir(Path(r)))) for r in (run_a, run_b))
    rows_a = {(r["variant"], r["point_id"]): r for _, r in cells_a.iterrows() if r["variant"] not in baselines}
    rows_b = {(r["variant"], r["point_id"]): r for _, r in cells_b.iterrows() if r["variant"] not in baselines}
    changes = []
    for key in list(rows_a) + [k for k in rows_b if k not in rows_a]:
        a, b = rows_a.get(key), rows_b.get(key)
        sa, sb = estimate(a, "speedup"), estimate(b, "speedup")
        if sa is None or sb is None:
            status: Status = "only_a" if sb is None else "only_b"
            reason = f"only in {'A' if sb is None else 'B'}"
            row, other = (a, caps_b) if sb is None else (b, caps_a)
            cap = other.get(str(key[0]))
            if row is not None and cap is not None and num(row["concurrency"]) > cap:
                reason += f" (not measured in {'B' if sb is None else 'A'}: max_concurrency {cap})"
        else:
            status, reason = classify(sa, sb, threshold)
            invalid = [n for n, r in (("A", a), ("B", b)) if r is not None and not r["valid"]]
            if invalid:
                reason += f"; invalid cell in {' and '.join(invalid)}"
        changes.append(CellChange(variant=key[0], point_id=key[1], status=status, reason=reason, speedup_a=sa,
                                  speedup_b=sb, accept_a=estimate(a, "acceptance_length"),
                                  accept_b=estimate(b, "acceptance_length")))
    changes.sort(key=lambda c: STATUS_ORDER.index(c.status))  # stable: run order within a status
    return Comparison(run_a=Path(run_a), run_b=Path(run_b), threshold=threshold, changes=changes,
                      label_a=_label(Path(run_a), meta_a), label_b=_label(Path(run_b), meta_b), notes=tuple(notes))


# ------------------------------------------------------------------------------------------------
# Markdown (fits a pull-request comment: the regressions first, the quiet cells folded)
# ------------------------------------------------------------------------------------------------

_COLUMNS = ["variant", "cell", "speedup A", "speedup B", "change", "accept len A", "accept len B", "Δ accept", "note"]


def _pct(x: float) -> str:
    return UNDEFINED if math.isnan(x) else f"{x:+.1%}"


def _rows(changes: list[CellChange]) -> list[list[str]]:
    return [[c.variant, c.point_id, str(c.speedup_a or UNDEFINED), str(c.speedup_b or UNDEFINED),
             _pct(c.speedup_change), str(c.accept_a or UNDEFINED), str(c.accept_b or UNDEFINED), fmt(c.accept_delta),
             c.reason] for c in changes]


def _table(changes: list[CellChange]) -> str:
    return table(Table(_COLUMNS, _rows(changes), numeric=frozenset({2, 3, 4, 5, 6, 7})))


def comparison_markdown(cmp: Comparison, *, max_noise_rows: int = 200) -> str:
    n = cmp.counts()
    by: dict[str, list[CellChange]] = {s: [c for c in cmp.changes if c.status == s] for s in STATUS_ORDER}
    head = (f"## specbench compare: {code_span(cmp.label_a)} → {code_span(cmp.label_b)}\n\n"
            f"**{n['regressed']} regressed**, {n['improved']} improved, {n['within_noise']} within noise, "
            f"{n['only_a'] + n['only_b']} only in one run"
            + (f", {n['undefined']} undefined" if n["undefined"] else "")
            + f" (threshold {cmp.threshold:.0%} relative speedup change).")
    parts = [head] + [f"⚠ {escape(note)}" for note in cmp.notes]
    if by["regressed"]:
        parts += ["### ❌ Regressed", _table(by["regressed"])]
    else:
        parts.append("No cell regressed beyond the threshold.")
    if by["improved"]:
        parts += ["### Improved", _table(by["improved"])]
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
    parts.append("*Rule: a cell regresses when its speedup drops by more than the threshold and, where both runs "
                 "have 95% intervals, run B's interval lies wholly below run A's. Speedups in brackets are "
                 "`value [95% interval]`; acceptance length is shown, not gated.*")
    return "\n\n".join(parts) + "\n"

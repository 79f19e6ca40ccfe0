"""Compare two runs cell by cell: the regression gate for drafter updates (docs/metrics.md, "Comparing runs").

Cells are joined on variant + point_id (the sweep point without the variant). Speedup is each run's own
drafter-over-baseline throughput ratio, so the comparison survives a different baseline measurement.
The baseline variant itself is not compared (its speedup is 1 by definition).

The rule, per cell present in both runs with a defined speedup A (run A) and B (run B), relative change
r = B / A - 1:

* established (both runs' intervals carry the variance between launches: 2+ launches, or a variance
  history; `launch_variance_carried`): the t test of ln B - ln A against its combined standard error
  (decide/change.py), against the threshold, not against 0: Holm-corrected over every such cell of the
  comparison at 5% family-wise per direction.
  - regressed: the drop beyond the threshold is established (H0: B / A >= 1 - threshold rejected)
  - improved:  the gain beyond the threshold is established (H0: B / A <= 1 + threshold rejected)
  - within noise: otherwise; with the drop the cell could have detected at 80% power (`detectable`), and
    whether that is at most one threshold beyond the threshold (`change.required_drop`: 9.75% at 5%)
* indicative (anything else: an interval without launch variance, or none): "dropped (indicative)" when
  r < -threshold and, where both have intervals, their own test (uncorrected) says the drop is real;
  "rose (indicative)" alike; within noise otherwise. Such a cell has no power the gate can state.

Exit codes (cli): 1 when some cell regressed (established), else 3 when some cell dropped (indicative) or
the gate was underpowered in a compared cell (a calibration that lets one-launch cells be established no
longer silences it: their power is stated too), else 0 ("no regression": 80% power in every compared cell).
Acceptance length changes are shown with their intervals but never gate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import pandas as pd

from specbench.decide.change import (
    GATE_ALPHA,
    POWER,
    Side,
    beyond,
    change_test,
    detectable_drop,
    holm,
    required_drop,
)
from specbench.decide.hardware import describe, differences, variant_fingerprints
from specbench.records.rundir import RunDir
from specbench.report.derived import config_caps, normalize_cells, read_config, read_json
from specbench.report.fmt import UNDEFINED, fmt_interval, num
from specbench.shared.errors import RunDirError, UsageError

Status = Literal["regressed", "indicative_drop", "improved", "indicative_gain", "within_noise", "only_a", "only_b",
                 "undefined"]
STATUS_ORDER: tuple[Status, ...] = ("regressed", "indicative_drop", "improved", "indicative_gain", "within_noise",
                                    "undefined", "only_a", "only_b")
EXIT_OK, EXIT_REGRESSED, EXIT_INDICATIVE = 0, 1, 3  # docs/metrics.md and README state them
EXIT_UNDERPOWERED = EXIT_INDICATIVE  # 3: no regression established, but the gate could not have seen one
GATED: frozenset[Status] = frozenset({"regressed", "indicative_drop", "within_noise", "indicative_gain"})

# interval_unit values (cells.csv) whose intervals carry launch variance: measured, or from a history
LAUNCH_UNITS = frozenset({"launch", "launch+history"})
HISTORY_UNITS = frozenset({"launch+history", "repeat+calibration", "history"})


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float = math.nan
    high: float = math.nan
    df: float = math.nan  # the interval's degrees of freedom
    launch_variance: bool = False  # the interval carries the variance between launches
    history: bool = False  # ... taken (in part) from a variance history

    @property
    def defined(self) -> bool:
        return not math.isnan(self.value)

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def side(self) -> Side:
        return Side(self.value, self.low, self.high, self.df, self.history)

    def __str__(self) -> str:
        return fmt_interval(self.value, self.low, self.high)


def launch_variance_carried(row: Mapping[str, Any]) -> tuple[bool, bool]:
    """(the cell's speedup interval carries launch variance, part of it comes from a variance history),
    from what cells.csv records about the interval's units. The one place that decides it: runs written
    before `interval_unit` existed count launches alone."""
    unit = row.get("interval_unit")
    if isinstance(unit, str) and unit:
        return unit in LAUNCH_UNITS | HISTORY_UNITS, unit in HISTORY_UNITS
    return num(row.get("launches")) >= 2, False


def _interval_df(row: Mapping[str, Any], col: str) -> float:
    """The interval's df: cells.csv's `<col>_df`, else (older runs) Welch's with equal variances on the
    units, 2 (n - 1), n = launches when launches are the units, else repeats."""
    df = num(row.get(f"{col}_df"))
    if df > 0:
        return df
    launches, repeats = num(row.get("launches")), num(row.get("repeats"))
    n = launches if launches >= 2 else repeats
    return max(1.0, 2.0 * (n - 1)) if n >= 2 else math.nan


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
    detectable: float = math.nan  # the drop the gate could have detected at POWER (NaN: none established)
    powered: bool = False  # ... at most compare.required_drop(threshold)

    @property
    def underpowered(self) -> bool:
        """A compared cell where "no regression" would not be a finding: the gate lacked POWER against
        required_drop (or could establish no change at all). An established gain needs no power."""
        return self.status in GATED and not self.powered

    @property
    def name(self) -> str:
        return f"{self.variant} {self.point_id}"

    def __str__(self) -> str:
        """`ngram code|in-|out256|c4|t0 (1.10 [1.05, 1.15] -> 0.88 [0.83, 0.93], -20.0%)`, for CLI messages."""
        return (f"{self.name} ({self.speedup_a or UNDEFINED} -> {self.speedup_b or UNDEFINED}, "
                f"{pct(self.speedup_change)})")

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


def _p(p: float) -> str:
    return f"p = {p:.2g}" if p >= 1e-4 else "p < 0.0001"


def _why_indicative(a: Estimate, b: Estimate) -> str:
    missing = [n for n, e in (("A", a), ("B", b)) if not e.has_interval]
    if missing:
        return f"indicative: no interval in {' and '.join(missing)}"
    short = [n for n, e in (("A", a), ("B", b)) if not e.launch_variance]
    return (f"indicative: {' and '.join(short)} measured in one launch without a variance history (its interval "
            "lacks the variance between launches)")


class Decision(NamedTuple):
    """The gate's word on one cell: its status, why, and the drop it could have detected (1 - s_B / s_A at
    POWER; NaN where no change can be established) and whether that meets `required_drop`."""

    status: Status
    reason: str
    detectable: float = math.nan
    powered: bool = False


def gate(pairs: Sequence[tuple[Estimate, Estimate]], threshold: float,
         alpha: float = GATE_ALPHA) -> list[Decision]:
    """The module's rule over one comparison's cells (speedup in A, in B): a Decision per pair. Holm's
    correction runs over the pairs whose change can be established, each tested beyond the threshold."""
    tests = [change_test(a.side, b.side) if a.defined and b.defined else None for a, b in pairs]
    family = [i for i, (a, b) in enumerate(pairs)
              if tests[i] is not None and a.launch_variance and b.launch_variance]
    p_beyond = {i: beyond(tests[i], threshold) for i in family}  # type: ignore[arg-type]
    drops = holm([p_beyond[i][0] for i in family], alpha)
    gains = holm([p_beyond[i][1] for i in family], alpha)
    established = {i: (d, g) for i, d, g in zip(family, drops, gains)}
    need = required_drop(threshold)
    out: list[Decision] = []
    for i, (a, b) in enumerate(pairs):
        if not (a.defined and b.defined) or not a.value > 0:
            out.append(Decision("undefined", "speedup undefined in one run"))
            continue
        r, t = b.value / a.value - 1, tests[i]
        if i in established and t is not None:
            drop, gain = established[i]
            mdd = detectable_drop(t.se, t.df, threshold, alpha / len(family))
            powered = mdd <= need
            p = p_beyond[i][0] if r < 0 else p_beyond[i][1]
            holm_note = (f"{_p(p)} beyond {threshold:.0%}, Holm over {len(family)} "
                         f"cell{'s' if len(family) != 1 else ''}; detectable drop {mdd:.1%} at {POWER:.0%} power")
            if drop:
                out.append(Decision("regressed", f"drop established beyond {threshold:.0%} ({holm_note})", mdd,
                                    powered))
            elif gain:
                out.append(Decision("improved", f"gain established beyond {threshold:.0%} ({holm_note})", mdd,
                                    powered))
            else:
                out.append(Decision("within_noise", f"not established beyond {threshold:.0%} ({holm_note}"
                                    + ("" if powered else f"; underpowered: needs {need:.2%} or less") + ")",
                                    mdd, powered))
            continue
        why = _why_indicative(a, b)
        p = math.nan if t is None else (t.p_drop if r < 0 else t.p_gain)
        if abs(r) <= threshold:
            out.append(Decision("within_noise", f"change under {threshold:.0%}; {why}"))
        elif t is not None and not p < alpha:
            out.append(Decision("within_noise", f"the intervals' own test: {_p(p)}; {why}"))
        else:
            out.append(Decision("indicative_drop" if r < 0 else "indicative_gain", why))
    return out


def classify(a: Estimate, b: Estimate, threshold: float) -> tuple[Status, str]:
    """The rule for a single cell (a family of one)."""
    return gate([(a, b)], threshold)[0][:2]


def estimate(row: Mapping[Any, Any] | None, col: str) -> Estimate | None:
    """A cells.csv figure with its 95% interval (`col`, `col_ci_low`, `col_ci_high`), the interval's df and
    whether it carries launch variance; None without a row."""
    if row is None:
        return None
    carried, history = launch_variance_carried(row)
    return Estimate(num(row.get(col)), num(row.get(f"{col}_ci_low")), num(row.get(f"{col}_ci_high")),
                    _interval_df(row, f"{col}_ci"), carried, history)


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
        """Cells whose speedup drop is established (see module rule)."""
        return [c for c in self.changes if c.status == "regressed"]

    @property
    def indicative(self) -> list[CellChange]:
        """Cells that dropped beyond the threshold where no change can be established."""
        return [c for c in self.changes if c.status == "indicative_drop"]

    @property
    def underpowered(self) -> list[CellChange]:
        """Compared cells where the gate lacked POWER against required_drop (see CellChange.underpowered)."""
        return [c for c in self.changes if c.underpowered and c.status != "indicative_drop"]

    @property
    def exit_code(self) -> int:
        return exit_code(self.changes)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {s: 0 for s in STATUS_ORDER}
        for c in self.changes:
            out[c.status] += 1
        return out



def exit_code(changes: Sequence[CellChange]) -> int:
    """1 (EXIT_REGRESSED) when a cell regressed, else 3 when one dropped indicatively (EXIT_INDICATIVE) or
    the gate was underpowered in a compared cell (EXIT_UNDERPOWERED), else 0: no regression, with POWER
    against compare.required_drop in every compared cell."""
    statuses = {c.status for c in changes}
    if "regressed" in statuses:
        return EXIT_REGRESSED
    if "indicative_drop" in statuses or any(c.underpowered for c in changes):
        return EXIT_UNDERPOWERED
    return EXIT_OK


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


Caps = Mapping[str, int]


def _records(cells: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in r.items()} for r in cells.to_dict("records")]


def compare_cells(cells_a: pd.DataFrame, cells_b: pd.DataFrame, baselines: set[str], threshold: float,
                  caps: tuple[Caps, Caps] = ({}, {})) -> list[CellChange]:
    """Per-cell change from cells table A to cells table B (the module's rule, `gate`), regressions first.
    `caps`: each run's max_concurrency per variant, to say why a cell is only in one run."""
    rows_a: dict[tuple[str, str], dict[str, Any]] = {
        (r["variant"], r["point_id"]): r for r in _records(cells_a) if r["variant"] not in baselines}
    rows_b: dict[tuple[str, str], dict[str, Any]] = {
        (r["variant"], r["point_id"]): r for r in _records(cells_b) if r["variant"] not in baselines}
    keys = list(rows_a) + [k for k in rows_b if k not in rows_a]
    both = [k for k in keys if k in rows_a and k in rows_b]
    pairs = [(estimate(rows_a[k], "speedup"), estimate(rows_b[k], "speedup")) for k in both]
    decided = dict(zip(both, gate(pairs, threshold)))  # type: ignore[arg-type]
    changes = []
    for key in keys:
        a, b = rows_a.get(key), rows_b.get(key)
        detectable, powered = math.nan, False
        if key in decided:
            status, reason, detectable, powered = decided[key]
            invalid = [n for n, r in (("A", a), ("B", b)) if r is not None and not r["valid"]]
            if invalid:
                reason += f"; invalid cell in {' and '.join(invalid)}"
        else:
            status = "only_a" if b is None else "only_b"
            reason = f"only in {'A' if b is None else 'B'}"
            row, other = (a, caps[1]) if b is None else (b, caps[0])
            cap = other.get(str(key[0]))
            if row is not None and cap is not None and num(row["concurrency"]) > cap:
                reason += f" (not measured in {'B' if b is None else 'A'}: max_concurrency {cap})"
        changes.append(CellChange(variant=key[0], point_id=key[1], status=status, reason=reason,
                                  speedup_a=estimate(a, "speedup"), speedup_b=estimate(b, "speedup"),
                                  accept_a=estimate(a, "acceptance_length"), accept_b=estimate(b, "acceptance_length"),
                                  detectable=detectable, powered=powered))
    changes.sort(key=lambda c: STATUS_ORDER.index(c.status))  # stable: run order within a status
    return changes


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
    changes = compare_cells(cells_a, cells_b, baselines, threshold, (caps_a, caps_b))
    return Comparison(run_a=Path(run_a), run_b=Path(run_b), threshold=threshold, changes=changes,
                      label_a=_label(Path(run_a), meta_a), label_b=_label(Path(run_b), meta_b), notes=tuple(notes))


def pct(x: float) -> str:
    """A relative change as a signed percentage (`+3.1%`), or the undefined mark."""
    return UNDEFINED if math.isnan(x) else f"{x:+.1%}"

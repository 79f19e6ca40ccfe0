"""A drafter's speedup across many runs of one matrix: `specbench history RUN_DIR... [--variant V]`.

Reads run directories only (cells.csv, run.json, environment.json), never the runner. The runs are put in
time order (run.json `created`); they must share the sweep points, or the command refuses and says which
points differ. For every drafter variant and point it lists the speedup [95% interval] run by run with the
variant's fingerprint (run.json: everything that determines the measurement: drafter, engine, model, launch
settings, hardware) and the engine version, and marks each step from one run to the next with compare.py's
rule (`compare.gate`, Holm-corrected over the step's cells): a change is established only when both
intervals carry the variance between launches (2+ launches, or the pooled launch variance of a variance
history: the run's calibration.json, shown per run) and its t test rejects; other changes beyond the
threshold are indicative only.

Outputs: markdown fit for a pull-request comment (stdout and history.md) and one PNG per variant
(speedup with intervals over the runs, a line per point, changed steps ringed), in --out or else in
`<newest run>/history/`. The exit code is `specbench compare <previous> <newest>`'s for the variants shown
(1: an established regression, 3: an indicative drop or an underpowered gate, 0: no regression with 80%
power in every compared cell; its hardware refusal included). A variance history no longer silences it:
the power of its one-launch cells is stated like any other's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.records.rundir import RunDir
from specbench.report.compare import (
    CellChange,
    Comparison,
    Estimate,
    Status,
    compare,
    estimate,
    exit_code,
    gate,
    load_cells,
)
from specbench.report.compare_markdown import underpowered_text
from specbench.report.derived import read_json
from specbench.report.document import Table
from specbench.report.fmt import UNDEFINED
from specbench.report.markdown import code_span, escape, table
from specbench.shared.errors import UsageError
from specbench.stores import variance_history

MARKED = ("regressed", "improved", "indicative_drop", "indicative_gain")  # the steps outside the noise


@dataclass(frozen=True)
class RunInfo:
    path: Path
    label: str
    created: str
    cells: pd.DataFrame
    meta: dict[str, Any]
    engine: str  # engine kind and version from environment.json
    pooled: str  # the pooled launch variance the run's intervals carry (its calibration.json), or "-"

    def fingerprint(self, variant: str) -> str:
        return str(((self.meta.get("variants") or {}).get(variant) or {}).get("fingerprint") or UNDEFINED)


@dataclass(frozen=True)
class Step:
    """One point of one variant in one run, with the change from the run before (None for the first)."""

    estimate: Estimate | None
    status: Status | None = None
    reason: str = ""
    detectable: float = math.nan  # the drop the step's gate could have detected at 80% power
    powered: bool = False


@dataclass
class History:
    runs: list[RunInfo]
    threshold: float
    series: dict[tuple[str, str], list[Step]]  # (variant, point_id) -> one Step per run, in time order
    newest: Comparison  # compare(previous, newest): the exit code's decision

    @property
    def regressed(self) -> list[CellChange]:
        """The newest run's regressions against the run before, for the variants shown."""
        return [c for c in self.newest.regressed if any(v == c.variant for v, _ in self.series)]

    @property
    def indicative(self) -> list[CellChange]:
        """The newest run's indicative drops against the run before, for the variants shown."""
        return [c for c in self.newest.indicative if any(v == c.variant for v, _ in self.series)]

    @property
    def underpowered(self) -> list[CellChange]:
        """The newest run's compared cells where the gate lacked power, for the variants shown."""
        return [c for c in self.newest.underpowered if any(v == c.variant for v, _ in self.series)]

    @property
    def exit_code(self) -> int:
        return exit_code([c for c in self.newest.changes if any(v == c.variant for v, _ in self.series)])

    @property
    def variants(self) -> list[str]:
        return sorted({v for v, _ in self.series})

    def changes(self) -> list[tuple[str, str, int, Step]]:
        """(variant, point, run index, step) of every step outside the noise, in time order."""
        return [(v, p, i, s) for (v, p), steps in self.series.items() for i, s in enumerate(steps)
                if s.status in MARKED]


def _run(path: Path) -> RunInfo:
    cells, meta = load_cells(path)
    env = read_json(RunDir(path).environment) or {}
    eng = env.get("engine") or {}
    cal = variance_history.load(path / variance_history.FILE)
    pooled = f"CV {100 * cal.launch_cv:.1f}%, df {cal.df:g}" if cal is not None else "-"
    return RunInfo(path=path, label=str(meta.get("run_id") or path.name), created=str(meta.get("created") or ""),
                   cells=cells, meta=meta, engine=f"{eng.get('kind', '?')} {eng.get('version', '?')}", pooled=pooled)


def _points(run: RunInfo) -> set[str]:
    return set(run.cells["point_id"]) if len(run.cells) else set()


def _ordered_points(run: RunInfo) -> list[str]:
    """The points in cells.csv's order (category, lengths, temperature, concurrency), each once."""
    return list(dict.fromkeys(str(p) for p in run.cells["point_id"]))


def history(paths: list[Path], variant: str | None = None, threshold: float = 0.05,
            allow_mixed_hardware: bool = False) -> History:
    if len(paths) < 2:
        raise UsageError("history: give at least two run directories")
    runs = sorted((_run(Path(p)) for p in paths), key=lambda r: r.created)
    first = runs[0]
    for r in runs[1:]:
        if _points(r) != _points(first):
            only_a, only_b = sorted(_points(first) - _points(r)), sorted(_points(r) - _points(first))
            raise UsageError(f"history: {r.path} and {first.path} do not share the sweep points "
                             f"({len(only_a)} only in the first, e.g. {(only_a or ['-'])[0]}; {len(only_b)} only in "
                             f"the second, e.g. {(only_b or ['-'])[0]}): they are not runs of one matrix")
    baselines = {str(r.meta.get("baseline")) for r in runs}
    names = sorted({str(v) for r in runs for v in r.cells["variant"]} - baselines)
    if variant is not None:
        if variant not in names:
            raise UsageError(f"history: no variant {variant!r} in these runs (drafters: {', '.join(names) or 'none'})")
        names = [variant]
    estimates: dict[tuple[str, str], list[Estimate | None]] = {}
    for v in names:
        for point in _ordered_points(first):
            estimates[(v, point)] = []
            for r in runs:
                rows = r.cells[(r.cells["variant"] == v) & (r.cells["point_id"] == point)]
                estimates[(v, point)].append(estimate(rows.iloc[0].to_dict(), "speedup") if len(rows) else None)
    series: dict[tuple[str, str], list[Step]] = {k: [Step(e[0])] for k, e in estimates.items()}
    for i in range(1, len(runs)):  # each step is one comparison: Holm over its cells
        keys = [k for k, e in estimates.items() if e[i - 1] is not None and e[i] is not None]
        decided = dict(zip(keys, gate([(estimates[k][i - 1], estimates[k][i]) for k in keys],  # type: ignore[misc]
                                      threshold)))
        for k, e in estimates.items():
            series[k].append(Step(e[i], *decided[k]) if k in decided else Step(e[i]))
    newest = compare(runs[-2].path, runs[-1].path, threshold=threshold, allow_mixed_hardware=allow_mixed_hardware)
    return History(runs=runs, threshold=threshold, series=series, newest=newest)


# ---------------------------------------------------------------------------------------------------------
def _mark(step: Step) -> str:
    return {"regressed": " ▼", "improved": " ▲", "indicative_drop": " ▽", "indicative_gain": " △"}.get(
        step.status or "", "")


def to_markdown(h: History, plots: list[Path] | None = None) -> str:
    regressed, indicative = h.regressed, h.indicative
    against = f"{code_span(h.runs[-1].label)} against {code_span(h.runs[-2].label)}, threshold {h.threshold:.0%}"
    blocks = [f"## specbench history: {len(h.runs)} runs, {len(h.variants)} drafter(s)",
              (f"**{len(regressed)} cell(s) regressed in the newest run** ({against})." if regressed else
               f"No cell regressed (established) in the newest run ({against}).")
              + (f" {len(indicative)} cell(s) dropped, indicative only (their intervals lack the variance between "
                 "launches)." if indicative else "")
              + (f" Not a finding: {underpowered_text(h.underpowered, h.threshold)}"
                 if h.underpowered and not regressed else "") + f" Exit code {h.exit_code}."]
    blocks.append(table(Table(["#", "run", "created", "engine", "pooled launch variance"]
                              + [f"{v} fingerprint" for v in h.variants],
                              [[str(i), r.label, r.created, r.engine, r.pooled] + [r.fingerprint(v) for v in h.variants]
                               for i, r in enumerate(h.runs, 1)])))
    blocks.append("### Changes outside the noise")
    changes = h.changes()
    blocks.append("\n".join(f"- {code_span(v)} {code_span(p)}: run {i} → {i + 1}: {s.status} "
                            f"({h.series[(v, p)][i - 1].estimate} → {s.estimate}; {escape(s.reason)})"
                            for v, p, i, s in changes) if changes else "None: every step is within the noise.")
    for v in h.variants:
        rows = [[p] + [f"{s.estimate or UNDEFINED}{_mark(s)}" for s in steps]
                for (var, p), steps in h.series.items() if var == v]
        blocks += [f"### {escape(v)}: speedup per run",
                   table(Table(["point"] + [str(i) for i in range(1, len(h.runs) + 1)], rows,
                               numeric=frozenset(range(1, len(h.runs) + 1))))]
    if plots:
        blocks.append("Plots: " + ", ".join(code_span(str(p)) for p in plots))
    blocks.append("*▲/▼: the speedup changed from the run before by more than the threshold, established "
                  "(compare's rule: both intervals carry the variance between launches, and the t test of the log "
                  "change against ln(1 - threshold), Holm-corrected over the step's cells, rejects); △/▽: beyond "
                  "the threshold, indicative only. Intervals are the cells' own (launches, or repeats plus the pooled "
                  "launch variance of calibration.json where the run had one).*")
    return "\n\n".join(blocks) + "\n"


def plot(h: History, out_dir: Path) -> list[Path]:
    """One PNG per variant: speedup [95% interval] against the run number, one line per point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    x = list(range(1, len(h.runs) + 1))
    for v in h.variants:
        fig, ax = plt.subplots(figsize=(9, 4), dpi=100)
        for (var, p), steps in h.series.items():
            if var != v:
                continue
            y = [s.estimate.value if s.estimate else math.nan for s in steps]
            lo = [y_ - s.estimate.low if s.estimate and s.estimate.has_interval else 0 for y_, s in zip(y, steps)]
            hi = [s.estimate.high - y_ if s.estimate and s.estimate.has_interval else 0 for y_, s in zip(y, steps)]
            line = ax.errorbar(x, y, yerr=[lo, hi], marker="o", capsize=3, label=p)
            for xi, yi, s in zip(x, y, steps):
                if s.status in MARKED:
                    ax.plot([xi], [yi], "o", ms=14, mfc="none", mec=line[0].get_color())
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xticks(x, [f"{i}\n{r.label[:12]}" for i, r in zip(x, h.runs)])
        ax.set_xlabel("run (time order)")
        ax.set_ylabel("speedup [95% interval]")
        ax.set_title(f"{v}: speedup over runs (ringed: change outside the noise)")
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        fig.tight_layout()
        path = out_dir / f"history-{''.join(ch if ch.isalnum() or ch in '-_' else '_' for ch in v)}.png"
        fig.savefig(path, metadata={"Software": None})
        plt.close(fig)
        paths.append(path)
    return paths

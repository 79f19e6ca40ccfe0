"""`update_words`: the new head's word per level of RUN, read from RUN (its step cost: decomposition.csv,
cells.csv, acceptance.csv) and the update's run (the head's new acceptance), each word marked predicted or
measured; written as update.csv in the update's run directory, which the report reads."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from specbench.config import RunConfig, load_yaml, parse_config
from specbench.records.rundir import RunDir
from specbench.report.derived import normalize_cells
from specbench.report.update_section import UPDATE_FILE
from specbench.shared.errors import UsageError
from specbench.stores import prediction_history
from specbench.surface.reference import reference_from_run
from specbench.update.level import StepCost, level_words

UPDATE_COLUMNS = ["variant", "reference_run", "reference_variant", "concurrency", "word", "source", "predicted",
                  "predicted_low", "predicted_high", "measured", "measured_low", "measured_high"]


def read_config(run_dir: Path) -> RunConfig:
    """A finished run's config.yaml."""
    rd = RunDir(run_dir)
    if not rd.config.exists():
        raise UsageError(f"update: {run_dir} has no config.yaml (not a specbench run directory?)")
    return parse_config(load_yaml(rd.config.read_text(), str(rd.config)), str(rd.config))


def _csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path) if path.exists() else pd.DataFrame()


def update_words(run_dir: Path, new_dir: Path, name: str, ref_variant: str) -> pd.DataFrame:
    """UPDATE_COLUMNS per level of RUN (`run_dir`) at which it measured `ref_variant`: the word of the new head
    `name` measured in the update's run `new_dir`, and whether it was predicted or measured (or is left to
    measure). The model's own error in each predicted interval takes the prediction ledger's past errors of
    the update run's setup (stores.prediction_history)."""
    run, new = RunDir(run_dir), RunDir(new_dir)
    if not run.cells.exists() or not (run.path / "decomposition.csv").exists():
        raise UsageError(f"update: {run_dir} has no cells.csv and decomposition.csv (not a finished specbench run)")
    if not new.cells.exists():
        raise UsageError(f"update: {new_dir} has no cells.csv (not a finished specbench run)")
    decomp = _csv(run.path / "decomposition.csv")
    ref = reference_from_run(decomp[decomp["variant"] == ref_variant], _csv(run.cells), _csv(run.acceptance))
    if not ref.models:
        raise UsageError(f"update: {run_dir} has no step cost of {ref_variant} (no decomposed cell)")
    new_cfg = read_config(new_dir)
    prediction_history.for_run(new, new_cfg).widen(ref.errors, {name: ref_variant})
    cells = normalize_cells(pd.read_csv(new.cells))
    words = level_words(cells, _csv(new.acceptance), name, StepCost(ref, ref_variant), new_cfg.verdict.min_speedup)
    nan = float("nan")
    rows = [dict(variant=name, reference_run=str(run_dir), reference_variant=ref_variant, concurrency=w.concurrency,
                 word=w.word, source=w.source,
                 predicted=w.predicted.speedup if w.predicted else nan,
                 predicted_low=w.predicted.low if w.predicted else nan,
                 predicted_high=w.predicted.high if w.predicted else nan,
                 measured=w.measured[0], measured_low=w.measured[1], measured_high=w.measured[2]) for w in words]
    return pd.DataFrame(rows, columns=UPDATE_COLUMNS)


def write_update(new_dir: Path, words: pd.DataFrame) -> Path:
    """update.csv in the update's run directory (atomically)."""
    from specbench.records.rundir import atomic_write

    path = new_dir / UPDATE_FILE
    atomic_write(path, words.to_csv(index=False))
    return path


def word_lines(words: pd.DataFrame) -> list[str]:
    """The console's lines: per level, the word and whether it was predicted or measured."""
    out = []
    for _, r in words.iterrows():
        est = ("predicted", "predicted_low", "predicted_high") if r["source"] == "predicted" else \
            ("measured", "measured_low", "measured_high")
        pt, lo, hi = (float(r[c]) for c in est)
        num = f"{pt:.3f} [{lo:.3f}, {hi:.3f}]" if pt == pt else "n/a"
        out.append(f"  {r['variant']} C={int(r['concurrency'])}: {r['word']} ({r['source']}, {num})")
    return out

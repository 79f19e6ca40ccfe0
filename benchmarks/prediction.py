"""How well a speedup surface predicts a run: each drafter's speedup at every concurrency predicted from its
acceptance at the run's lowest concurrency (normally C=1), against the speedup the run measured.

    python -m benchmarks.prediction RUN_DIR SURFACE_DIR [--at 4,16] [--method anchored|surface]
                                    [--reference C1_RUN_DIR] [--as RUN_VARIANT=SURFACE_VARIANT ...]

RUN_DIR: a finished `specbench run` (its cells.csv); SURFACE_DIR: a finished `specbench surface` run (its
surface.csv). The variants predicted are the run's drafters that have a surface of the same name (or given
by --as). The acceptance (and, for `anchored`, the speedup) at the reference concurrency is read from RUN_DIR
itself, or with --reference from another run (a head's separate C=1 run: the prediction then shares no
launch with the speedups it is compared with, as when it stands in for a matrix not measured). Errors are
|predicted / measured - 1| at the concurrencies --at (default: every level but the reference); break-even
concurrency is the first sweep level with speedup below 1.0, predicted and measured
(metrics.surface.break_even_level). Both predictions are shown (docs/metrics.md, "Speedup surface"):
`surface`, the surface's speedup at the head's acceptance, and `anchored`, the surface's fall from the
reference concurrency applied to the speedup the run measured there; the summary of the other method comes
first, the one of --method last. Writes nothing; uses the product's own functions (specbench.surface).
The last line reads

    prediction: <N> points, median error <E>%, worst <W>%, break-even within one level for <B> of <V> variants

The goal (issue 32): median and worst error within 10% at C = 4 and 16, and B = V.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from specbench.config import load_yaml, parse_config
from specbench.records.rundir import RunDir
from specbench.report.load import normalize_cells
from specbench.surface.predict import DEFAULT_METHOD, METHODS, break_even_levels, predict_run, summary_line
from specbench.surface.table import load_surface


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.prediction")
    p.add_argument("run_dir")
    p.add_argument("surface_dir")
    p.add_argument("--at", help="concurrencies whose errors count, comma-separated (default: all but the reference)")
    p.add_argument("--method", choices=sorted(METHODS), default=DEFAULT_METHOD,
                   help=f"whose summary is the last line (default {DEFAULT_METHOD})")
    p.add_argument("--reference", metavar="C1_RUN_DIR",
                   help="read the reference concurrency's acceptance and speedup from this run (default RUN_DIR)")
    p.add_argument("--as", dest="as_", action="append", default=[], metavar="RUN_VARIANT=SURFACE_VARIANT")
    a = p.parse_args(argv)
    rd = RunDir(Path(a.run_dir))
    if not rd.cells.exists():
        print(f"error: {rd.path} has no cells.csv (not a finished specbench run)", file=sys.stderr)
        return 2
    ref_cells = None
    if a.reference:
        ref = RunDir(Path(a.reference))
        if not ref.cells.exists():
            print(f"error: --reference: {ref.path} has no cells.csv (not a finished specbench run)", file=sys.stderr)
            return 2
        ref_cells = normalize_cells(pd.read_csv(ref.cells))
    cfg = parse_config(load_yaml(rd.config.read_text(), str(rd.config)), str(rd.config))
    pred = predict_run(normalize_cells(pd.read_csv(rd.cells)), cfg.baseline.name, load_surface(Path(a.surface_dir)),
                       dict(x.split("=", 1) for x in a.as_), ref_cells=ref_cells)
    if pred.empty:
        print("error: no run variant has a surface (name them with --as RUN_VARIANT=SURFACE_VARIANT)", file=sys.stderr)
        return 2
    at = tuple(int(x) for x in a.at.split(",")) if a.at else None
    print(f"{'variant':<14} {'C':>3} {'AL ref':>6} {'AL at C':>7} {'surface':>22} {'at C':>6} {'error':>7}  "
          f"{'anchored':>22} {'error':>7}  {'measured':>22}")
    for _, r in pred.iterrows():
        print(f"{r['variant']:<14} {int(r['concurrency']):>3} {r['acceptance_ref']:>6.2f} {r['acceptance_at_c']:>7.2f} "
              f"{_est(r, 'predicted')} {r['predicted_at_c']:>6.3f} {_err(r, 'error', 'disagree')}  "
              f"{_est(r, 'anchored')} {_err(r, 'anchored_error', 'anchored_disagree')}  {_est(r, 'measured')}")
    for method in sorted(METHODS, key=lambda m: m == a.method):
        for v, (pl, ml, levels) in sorted(break_even_levels(pred, method).items()):
            name = lambda i, levels=levels: f"C={levels[i]}" if i < len(levels) else "beyond"  # noqa: E731
            print(f"break-even {v} ({method}): predicted {name(pl)}, measured {name(ml)}")
    other = [m for m in sorted(METHODS) if m != a.method]
    for method in other:
        print(f"{method}: {summary_line(pred, at, method)}")
    print(summary_line(pred, at, a.method))
    return 0


def _est(r: pd.Series, col: str) -> str:
    pt, lo, hi = (float(r[c]) for c in (col, f"{col}_low", f"{col}_high"))
    return f"{pt:>6.3f} [{lo:.3f}, {hi:.3f}]" if math.isfinite(pt) else f"{'n/a':>22}"


def _err(r: pd.Series, col: str, flag: str) -> str:
    e = float(r[col])
    return (f"{100 * e:>+6.1f}%" + ("!" if r[flag] else " ")) if math.isfinite(e) else f"{'n/a':>8}"


if __name__ == "__main__":
    sys.exit(main())

"""How well a speedup surface predicts a run: each drafter's speedup at every concurrency predicted from its
acceptance at the run's lowest concurrency (normally C=1), against the speedup the run measured.

    python -m benchmarks.prediction RUN_DIR SURFACE_DIR [--at 4,16] [--as RUN_VARIANT=SURFACE_VARIANT ...]

RUN_DIR: a finished `specbench run` (its cells.csv); SURFACE_DIR: a finished `specbench surface` run (its
surface.csv). The variants predicted are the run's drafters that have a surface of the same name (or given
by --as). Errors are |predicted / measured - 1| at the concurrencies --at (default: every level but the
reference); break-even concurrency is the first sweep level with speedup below 1.0, predicted and measured
(metrics.surface.break_even_level). Writes nothing; uses the product's own functions (specbench.surface).
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
from specbench.report.load import normalize_cells
from specbench.rundir import RunDir
from specbench.surface.predict import break_even_levels, predict_run, summary_line
from specbench.surface.table import load_surface


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.prediction")
    p.add_argument("run_dir")
    p.add_argument("surface_dir")
    p.add_argument("--at", help="concurrencies whose errors count, comma-separated (default: all but the reference)")
    p.add_argument("--as", dest="as_", action="append", default=[], metavar="RUN_VARIANT=SURFACE_VARIANT")
    a = p.parse_args(argv)
    rd = RunDir(Path(a.run_dir))
    if not rd.cells.exists():
        print(f"error: {rd.path} has no cells.csv (not a finished specbench run)", file=sys.stderr)
        return 2
    cfg = parse_config(load_yaml(rd.config.read_text(), str(rd.config)), str(rd.config))
    pred = predict_run(normalize_cells(pd.read_csv(rd.cells)), cfg.baseline.name, load_surface(Path(a.surface_dir)),
                       dict(x.split("=", 1) for x in a.as_))
    if pred.empty:
        print("error: no run variant has a surface (name them with --as RUN_VARIANT=SURFACE_VARIANT)", file=sys.stderr)
        return 2
    at = tuple(int(x) for x in a.at.split(",")) if a.at else None
    print(f"{'variant':<14} {'C':>3} {'AL ref':>6} {'AL at C':>7} {'predicted':>22} {'at C':>6} {'measured':>22} "
          f"{'error':>7}")
    for _, r in pred.iterrows():
        flag = " disagree" if r["disagree"] else ""
        print(f"{r['variant']:<14} {int(r['concurrency']):>3} {r['acceptance_ref']:>6.2f} {r['acceptance_at_c']:>7.2f} "
              f"{r['predicted']:>6.3f} [{r['predicted_low']:.3f}, {r['predicted_high']:.3f}] "
              f"{r['predicted_at_c']:>6.3f} "
              f"{r['measured']:>6.3f} [{r['measured_low']:.3f}, {r['measured_high']:.3f}] "
              f"{100 * r['error']:>+6.1f}%{flag}"
              if math.isfinite(r["error"]) else f"{r['variant']} C={r['concurrency']}: n/a")
    for v, (pl, ml, levels) in sorted(break_even_levels(pred).items()):
        name = lambda i, levels=levels: f"C={levels[i]}" if i < len(levels) else "beyond"  # noqa: E731
        print(f"break-even {v}: predicted {name(pl)}, measured {name(ml)}")
    print(summary_line(pred, at))
    return 0


if __name__ == "__main__":
    sys.exit(main())

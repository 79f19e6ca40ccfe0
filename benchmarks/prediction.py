"""How well the time model predicts a run: each drafter's speedup at every concurrency predicted from its
acceptance at the run's lowest concurrency (normally C=1) and the step cost of an earlier run of the same
drafter configuration, against the speedup the run measured.

    python -m benchmarks.prediction RUN_DIR REFERENCE [--at 4,16] [--as RUN_VARIANT=REFERENCE_VARIANT ...]
                                    [--no-record]

RUN_DIR: a finished `specbench run` (its cells.csv, acceptance.csv and decomposition.csv). REFERENCE: a
finished `specbench surface` run (its surface.csv: the time model fitted on the forced points) or a finished
run of another head of the same drafter configuration (its decomposition.csv: the model from its step costs
and prefill shares). The variants predicted are the run's drafters that the reference has under the same name
(or given by --as). Per point the model's request times are simulated over the window's slots with the
acceptance of each request drawn from the run's own requests at the reference concurrency (seeded), so the
acceptance's spread reaches the window's tail (docs/metrics.md, "Speedup surface"). Errors are
|predicted / measured - 1| at the concurrencies --at (default: every level but the reference); coverage counts
the measured speedups inside the predicted 95% intervals; the break-even AL of the run is decomposition.csv's
break_even_acceptance_length, compared with the model's a* interval at each of those concurrencies. The
step-cost check follows the rows (surface.stepcost: r of the reference's forced variants, or of its cells,
against r of RUN_DIR's decomposition). The model's own error in each interval takes, besides the reference's
held-out errors, the past errors of the prediction ledger (stores.prediction_history: earlier runs of
RUN_DIR's setup, same drafter family and C; column `past`: how many). Writes nothing but the ledger: each
row whose measurement has an interval or 2+ launches is recorded there unless --no-record (a run with no
setup in run.json is neither widened nor recorded). Uses the product's own functions. The last line reads
(one line; surface.model_predict.model_summary_line)

    prediction: <N> points, median error <E>%, worst <W>%, interval coverage <K> of <N>,
    break-even AL from the run vs the surface within intervals for <B> of <V> drafters

The goal (issue 38): E <= 7, W <= 15, K = N, against a measured truth of at least 3 launches per variant.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from specbench.config import load_yaml, parse_config
from specbench.records.rundir import RunDir
from specbench.report.derived import normalize_cells
from specbench.shared.errors import UsageError
from specbench.stores import prediction_history
from specbench.surface.model_predict import model_summary_line, predict_from_model, variant_pairs
from specbench.surface.reference import load_reference
from specbench.surface.stepcost import read_decomposition, step_cost_check, step_cost_lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.prediction")
    p.add_argument("run_dir")
    p.add_argument("reference", help="a surface directory or a run directory of the same drafter configuration")
    p.add_argument("--at", help="concurrencies whose errors count, comma-separated (default: all but the reference)")
    p.add_argument("--as", dest="as_", action="append", default=[], metavar="RUN_VARIANT=REFERENCE_VARIANT")
    p.add_argument("--no-record", action="store_true", help="do not record the errors in the prediction ledger")
    a = p.parse_args(argv)
    rd = RunDir(Path(a.run_dir))
    if not rd.cells.exists():
        print(f"error: {rd.path} has no cells.csv (not a finished specbench run)", file=sys.stderr)
        return 2
    try:
        ref, kind = load_reference(Path(a.reference))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cfg = parse_config(load_yaml(rd.config.read_text(), str(rd.config)), str(rd.config))
    cells = normalize_cells(pd.read_csv(rd.cells))
    pairs = variant_pairs(cells, cfg.baseline.name, {k[0] for k in ref.models}, dict(x.split("=", 1) for x in a.as_))
    acceptance = pd.read_csv(rd.acceptance) if rd.acceptance.exists() else pd.DataFrame()
    decomp = read_decomposition(rd.path)
    ledger = prediction_history.for_run(rd, cfg)
    past = ledger.widen(ref.errors, pairs)
    pred = predict_from_model(cells, acceptance, decomp, ref, pairs)
    if pred.empty:
        print(f"error: no run variant has a model in the {kind} (name them with --as RUN_VARIANT=REFERENCE_VARIANT)",
              file=sys.stderr)
        return 2
    print(f"{'variant':<14} {'C':>3} {'AL ref':>6} {'req/win':>7} {'predicted':>22} {'measured':>22} {'error':>7}  "
          f"{'a* model':>22} {'a* run':>6} {'past':>4}")
    for _, r in pred.iterrows():
        print(f"{r['variant']:<14} {int(r['concurrency']):>3} {r['acceptance_ref']:>6.2f} "
              f"{r['requests_per_window']:>7.0f} {_est(r, 'predicted')} {_est(r, 'measured')} "
              f"{_err(r)}  {_est(r, 'break_even_model')} {r['break_even_run']:>6.2f} "
              f"{past.get((str(r['reference_variant']), int(r['concurrency'])), 0):>4}")
    check = step_cost_check(decomp, read_decomposition(Path(a.reference)), pairs, forced=kind == "surface")
    for line in step_cost_lines(check, "forced" if kind == "surface" else "reference"):
        print(line)
    if not a.no_record and (recorded := ledger.record(pred, cells, str(Path(a.reference).resolve()))):
        print(f"ledger: {len(recorded)} error{'s' if len(recorded) != 1 else ''} recorded in {ledger.path}")
    at = tuple(int(x) for x in a.at.split(",")) if a.at else None
    print(model_summary_line(pred, at))
    return 0


def _est(r: pd.Series, col: str) -> str:
    pt, lo, hi = (float(r[c]) for c in (col, f"{col}_low", f"{col}_high"))
    return f"{pt:>6.3f} [{lo:.3f}, {hi:.3f}]" if math.isfinite(pt) else f"{'n/a':>22}"


def _err(r: pd.Series) -> str:
    e = float(r["error"])
    return (f"{100 * e:>+6.1f}%" + (" " if r["covered"] else "!")) if math.isfinite(e) else f"{'n/a':>8}"


if __name__ == "__main__":
    sys.exit(main())

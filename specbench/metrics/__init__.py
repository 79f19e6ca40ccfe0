"""From raw records to one row per variant x sweep point (the "cells" table), and break-even.

Inputs are DataFrames of RequestRecord / WindowRecord `model_dump()` rows. Warmup requests and
requests whose window has no WindowRecord (an unfinished window) are ignored. Every metric is
defined in docs/metrics.md; each formula is written once, in one module, next to a comment that
states it. Pure: no I/O, printing or plotting. Undefined values are NaN (None for whole lists), never 0.

Modules: requests (per-request and per-window formulas), acceptance (tau and acceptance figures),
lossless (output comparison against the baseline), reconcile (per-window cross-checks of per-request
acceptance and client timing against the engine's counters and histograms), cells (compute_cells: the
per-cell summary and speedups), decomposition (decomposition.csv: speedup = AL / r x residual per drafter cell),
breakeven (break_even_table), adaptive (the runner's stopping rule),
common (shared helpers).
"""

from __future__ import annotations

from specbench.decide.adaptive import adaptive_done
from specbench.metrics.acceptance import (
                         REQUEST_ACCEPTANCE_COLUMNS,
                         draft_acceptance_length,
                         request_acceptance_length,
                         request_acceptance_table,
                         tau_from_counters,
)
from specbench.metrics.breakeven import BREAK_EVEN_COLUMNS, BREAK_EVEN_GROUP, break_even_table
from specbench.metrics.cells import CellOptions, compute_cells
from specbench.metrics.columns import CELL_COLUMNS, INVALID_BLANKED, KEY_COLUMNS
from specbench.metrics.common import NAN
from specbench.metrics.lossless import common_prefix_len, compare_outputs
from specbench.metrics.reconcile import acceptance_checks, reconciliation_table, timing_checks
from specbench.metrics.requests import (
                         measured_requests,
                         request_itls,
                         request_output_tokens,
                         request_tpot,
                         window_throughput_arrays,
)
from specbench.metrics.steady import window_throughput

__all__ = [
    "BREAK_EVEN_COLUMNS",
    "BREAK_EVEN_GROUP",
    "CELL_COLUMNS",
    "CellOptions",
    "INVALID_BLANKED",
    "KEY_COLUMNS",
    "NAN",
    "REQUEST_ACCEPTANCE_COLUMNS",
    "acceptance_checks",
    "adaptive_done",
    "break_even_table",
    "common_prefix_len",
    "compare_outputs",
    "compute_cells",
    "draft_acceptance_length",
    "measured_requests",
    "reconciliation_table",
    "request_acceptance_length",
    "request_acceptance_table",
    "request_itls",
    "request_output_tokens",
    "request_tpot",
    "tau_from_counters",
    "timing_checks",
    "window_throughput",
    "window_throughput_arrays",
]

"""The runner, in parts that each do one job:

    prepare    config -> Plan (engine, every variant's launch, the sweep); the run directory (--force/--resume)
    state      run.json as a typed model (RunState, VariantState with Literal statuses)
    session    VariantSession: one live engine (process, HTTP client, headers, URLs) and its RecordSink
    window     measure_window: one measurement window, records written as they come
    repeats    RepeatRule: the (adaptive) repeats stopping rule
    unit       measure_launch: the unit of work, one launch of one variant (placeable anywhere)
    scheduler  the order of units and the loop that runs them (no engines, no HTTP)
    matrix     run_matrix: `specbench run` from start to report, interrupts included
"""

from specbench.runner.finalize import finalize
from specbench.runner.matrix import RunOptions, RunResult, run_matrix
from specbench.runner.session import RecordSink, VariantSession
from specbench.runner.state import RunState, VariantState, VariantStatus
from specbench.runner.unit import LaunchUnit, RunContext, measure_launch, open_context
from specbench.runner.window import counter_delta, measure_window

__all__ = ["LaunchUnit", "RecordSink", "RunContext", "RunOptions", "RunResult", "RunState", "VariantSession",
           "VariantState", "VariantStatus", "counter_delta", "finalize", "measure_launch", "measure_window",
           "open_context", "run_matrix"]

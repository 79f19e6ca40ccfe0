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

from .finalize import finalize
from .matrix import RunOptions, RunResult, run_matrix
from .session import RecordSink, VariantSession
from .state import RunState, VariantState, VariantStatus
from .unit import LaunchUnit, RunContext, measure_launch, open_context
from .window import counter_delta, measure_window

__all__ = ["LaunchUnit", "RecordSink", "RunContext", "RunOptions", "RunResult", "RunState", "VariantSession",
           "VariantState", "VariantStatus", "counter_delta", "finalize", "measure_launch", "measure_window",
           "open_context", "run_matrix"]

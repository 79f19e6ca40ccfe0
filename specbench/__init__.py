"""specbench: decide whether a speculative-decoding drafter pays, from one YAML file.

    import specbench
    run = specbench.load_run("runs/demo-cpu-20261130-101500")
    run.cells        # one row per variant x sweep point (pandas DataFrame)
    run.requests     # one row per request, raw timings and token counts
"""

from .rundir import Run, load_run

__all__ = ["Run", "load_run"]

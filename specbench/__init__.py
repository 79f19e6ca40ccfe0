"""specbench: decide whether a speculative-decoding drafter pays, from one YAML file.

    import specbench
    run = specbench.load_run("runs/demo-cpu-20261130-101500")
    run.cells        # one row per variant x sweep point (pandas DataFrame)
    run.requests     # one row per request, raw timings and token counts
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specbench.records.loaded_run import Run, load_run

__all__ = ["Run", "load_run"]


def __getattr__(name: str) -> Any:
    """`load_run` and `Run` are imported on first use: the CLI imports this package and must start
    without pandas (`specbench --help` stays instant)."""
    if name in __all__:
        from specbench.records import loaded_run

        return getattr(loaded_run, name)
    raise AttributeError(f"module 'specbench' has no attribute {name!r}")

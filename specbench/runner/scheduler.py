"""Which unit runs when: the order of launches and the loop that runs them one after another.

Knows units (variant, launch) and run state only; what a unit does (engines, HTTP, records) is the
`execute` callable it is given, in this process today, on a cluster node tomorrow.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from .state import RunState, VariantState
from .unit import LaunchUnit

Execute = Callable[[LaunchUnit, VariantState], Awaitable[VariantState]]


def launch_order(variants: Sequence[str], launches: int = 1) -> list[LaunchUnit]:
    """Every variant's launches interleaved (A B A B ...), so slow drift of the machine spreads over all
    variants instead of landing on one. One launch per variant: the config order."""
    return [LaunchUnit(v, n) for n in range(1, launches + 1) for v in variants]


async def run_schedule(units: Sequence[LaunchUnit], state: RunState, execute: Execute,
                       has_work: Callable[[str], bool], save: Callable[[], None]) -> None:
    """Run the units in order; the state is saved after each. A reused variant is never launched, and a
    variant with nothing left to measure (resume) is done without a launch."""
    for unit in units:
        vs = state.variants[unit.variant]
        if vs.status == "reused":
            continue
        if not has_work(unit.variant):
            vs.status = "done"
            continue
        await execute(unit, vs)
        save()

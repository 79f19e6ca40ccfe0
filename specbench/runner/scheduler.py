"""Which unit runs when: the order of launches and the loop that runs them one after another.

Knows units (variant, launch) and run state only; what a unit does (engines, HTTP, records) is the
`execute` callable it is given, in this process today, on a cluster node tomorrow.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from specbench.runner.state import RunState, VariantState
from specbench.runner.unit import LaunchUnit

Execute = Callable[[LaunchUnit, VariantState], Awaitable[VariantState]]


ORDERS = ("abba", "interleaved")  # run.json `launch_order`; "interleaved": runs started before ABBA (A B A B)


def round_order(variants: Sequence[str], launch: int, order: str = "abba") -> list[str]:
    """The variants of round `launch` (1-based) in the order they launch. "abba": the config order in odd
    rounds, reversed in even ones (A B, B A, A B, ...), so a drift linear in time lands on every variant's
    mean launch time alike (with 2 rounds, A B B A: both at the same mean position) and cancels from the
    speedup; "interleaved" (runs started before it): the config order in every round."""
    if order not in ORDERS:
        raise ValueError(f"launch order {order!r} (known: {', '.join(ORDERS)})")
    names = list(variants)
    return names[::-1] if order == "abba" and launch % 2 == 0 else names


def launch_order(variants: Sequence[str], launches: int = 1, order: str = "abba") -> list[LaunchUnit]:
    """Every variant's launches, round by round (`round_order`): A B B A A B ... One launch per variant:
    the config order. Reproducible from the config and run.json's `launch_order` alone (resume)."""
    return [LaunchUnit(v, n) for n in range(1, launches + 1) for v in round_order(variants, n, order)]


async def run_schedule(units: Sequence[LaunchUnit], state: RunState, execute: Execute,
                       has_work: Callable[[LaunchUnit], bool], save: Callable[[], None]) -> None:
    """Run the units in order; the state is saved after each. A reused variant is never launched, a launch
    with nothing left to measure (resume) is skipped, and a variant that failed in one launch is not
    launched again in this run (its reason stays; --resume tries it again)."""
    failed: set[str] = set()
    for unit in units:
        vs = state.variants[unit.variant]
        if vs.status == "reused" or unit.variant in failed:
            continue
        if not has_work(unit):
            if vs.status != "failed":
                vs.status = "done"
            continue
        await execute(unit, vs)
        if vs.status == "failed":
            failed.add(unit.variant)
        save()

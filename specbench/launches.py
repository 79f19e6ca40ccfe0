"""Launches as a level of variation: the order in which variants are (re)launched, and window ids.

Each variant is launched `sweep.launches` times, interleaved (A B C A B C ...), so that slow drift of the
machine (thermal state, other tenants, memory fragmentation) spreads over every variant instead of
favouring whichever ran first, and the between-launch variance enters every interval comparing
variants (docs/metrics.md, Intervals). A scheduler measures one unit of work, (variant, launch index),
at a time in this order.
"""

from __future__ import annotations

from collections.abc import Sequence


def launch_order(variants: Sequence[str], launches: int) -> list[tuple[str, int]]:
    """(variant, launch) pairs, launch-major: [(A, 1), (B, 1), (A, 2), (B, 2), ...]; launches count from 1."""
    return [(v, la) for la in range(1, launches + 1) for v in variants]


def window_id(cell_id: str, launch: int, repeat: int) -> str:
    """A window's id: `<cell>|r<repeat>` in the first launch (as runs without launches have always written
    it, so they resume unchanged), `<cell>|l<launch>r<repeat>` in later ones."""
    return f"{cell_id}|r{repeat}" if launch == 1 else f"{cell_id}|l{launch}r{repeat}"

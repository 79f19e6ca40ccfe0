"""How many windows (repeats) a cell gets: `sweep.repeats`, then, in adaptive mode, one more at a time
until the interval of the mean window throughput is narrow enough or `adaptive.max_repeats` is reached.

The stopping rule lives in `RepeatRule.wanted`, used both to measure and to plan (progress, ETA).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from specbench.config import SweepConfig
from specbench.metrics import adaptive_done
from specbench.plan.windows import window_id


class RepeatRule:
    def __init__(self, sweep: SweepConfig):
        self.repeats = sweep.repeats
        self.adaptive = sweep.adaptive
        self.max_repeats = max(self.repeats, self.adaptive.max_repeats) if self.adaptive else self.repeats

    def wanted(self, repeat: int, earlier_throughputs: list[float]) -> bool:
        """The stopping rule: is window `repeat` (1-based) wanted, given the throughputs of the earlier ones?"""
        if repeat <= self.repeats:
            return True
        a = self.adaptive
        return a is not None and repeat <= a.max_repeats and \
            not adaptive_done(earlier_throughputs, a.target_rel_half_width)

    def next_repeats(self, cell_id: str, done: Collection[str], throughput: Mapping[str, float],
                     launch: int = 1) -> list[int]:
        """The repeats of one launch still to measure as far as is known now: the missing fixed ones, then
        (adaptive, within the launch) the next one if the rule wants it. Measuring calls this again after
        every window."""
        out = []
        for r in range(1, self.max_repeats + 1):
            earlier = [throughput[w] for i in range(1, r) if (w := window_id(cell_id, i, launch)) in throughput]
            if not self.wanted(r, earlier):
                break
            if window_id(cell_id, r, launch) not in done:
                out.append(r)
                if r > self.repeats:
                    break  # whether a further one is wanted depends on this one's throughput
        return out

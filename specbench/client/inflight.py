"""Which planned request a closed loop sends next: the first in the plan's order whose prompt is not already
in flight (plan.window_prompts; docs/guide.md, "The workload of a window").

A window's list holds every prompt of its category several times over, so taking it strictly in order could
put two copies of one prompt in flight side by side (a slow request of one pass next to the same prompt of
the next), where the engine would batch or cache identical text. Each prompt may be in flight at most
ceil(C / distinct prompts) times: once whenever the window has at least C distinct prompts. When every
request left is of a prompt at its cap (only at the tail of a window), the loop waits for one to finish.
Both closed loops (in one process, client.stream.run_closed_loop; sharded, client.shards) take from it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from specbench.plan.windows import PlannedRequest


class InFlightQueue:
    def __init__(self, requests: Sequence[PlannedRequest], concurrency: int):
        self._pending = list(requests)
        distinct = len({_prompt(r) for r in self._pending}) or 1
        self.cap = math.ceil(min(concurrency, max(1, len(self._pending))) / distinct)
        self._flying: Counter[str] = Counter()

    def __len__(self) -> int:
        """Requests not yet taken."""
        return len(self._pending)

    def take(self) -> PlannedRequest | None:
        """The next request to send, marked in flight; None when none may go now (all taken, or every one
        left is of a prompt at its cap: call again after `done`)."""
        for i, r in enumerate(self._pending):
            if self._flying[_prompt(r)] < self.cap:
                self._flying[_prompt(r)] += 1
                return self._pending.pop(i)
        return None

    def done(self, prompt_id: str) -> None:
        """A request of `prompt_id` finished (its record's prompt_id)."""
        self._flying[prompt_id] -= 1


def _prompt(r: PlannedRequest) -> str:
    return r.fields["prompt_id"]

"""The closed loop: exactly `concurrency` requests in flight until all are done (client.run_closed_loop)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.client.load.interface import OnRecord, Target
from specbench.client.stream import run_closed_loop
from specbench.plan.windows import PlannedRequest
from specbench.shared.schema import RequestRecord


@dataclass(frozen=True)
class ClosedLoop:
    concurrency: int

    async def send(self, target: Target, planned: Sequence[PlannedRequest],
                   on_record: OnRecord) -> list[RequestRecord]:
        return await run_closed_loop(target, planned, self.concurrency, on_record)

"""The closed loop sharded across client worker processes (`client.processes > 1`): C requests in flight in
total, each worker holding its share (client_shards.ShardedClient.run_closed_loop). The workers stream
through their own Endpoints, so `target` is not used."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specbench.client.load.interface import OnRecord, Target
from specbench.client.shards import ShardedClient
from specbench.plan.windows import PlannedRequest
from specbench.shared.schema import RequestRecord


@dataclass(frozen=True)
class ShardedClosedLoop:
    shards: ShardedClient
    concurrency: int

    async def send(self, target: Target, planned: Sequence[PlannedRequest],
                   on_record: OnRecord) -> list[RequestRecord]:
        window_id = planned[0].fields["window_id"] if planned else "a window"
        return await self.shards.run_closed_loop(planned, self.concurrency, on_record, window_id)

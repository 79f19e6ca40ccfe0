"""The interface every way of sending load implements, what it sends to (`Target` = `client.Endpoint`), and
the one function every load loop calls per request (`client.stream_planned`: one planned request -> its
RequestRecord)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from specbench.client.stream import Endpoint, stream_planned
from specbench.plan.windows import PlannedRequest
from specbench.shared.schema import RequestRecord

OnRecord = Callable[[RequestRecord], None]


Target = Endpoint  # where requests go (client.Endpoint: engine, clients, URL, timeout, headers, clock)


class Load(Protocol):
    async def send(self, target: Target, planned: Sequence[PlannedRequest],
                   on_record: OnRecord) -> list[RequestRecord]:
        """Send every planned request; call `on_record` as each finishes; return the records."""
        ...


__all__ = ["Load", "OnRecord", "Target", "stream_planned"]

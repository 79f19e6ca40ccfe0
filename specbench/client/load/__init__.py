"""How a window's planned requests are sent: one interface, one module per way of offering load.

    load = make_load(planned, shards)              # closed (sharded or not) or open, from the plan
    records = await load.send(target, planned, on_record)

closed.py keeps `concurrency` requests in flight (the classic sweep), sharded.py the same across the client
worker processes of `client.processes > 1`; open.py sends each request at its
planned time (`PlannedRequest.at_s`) whatever is in flight, up to a safety cap. The runner calls `send` and
knows no arrival process: the schedule is part of the plan (plan.windows.window_requests, plan/arrivals.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from specbench.client.load.closed import ClosedLoop
from specbench.client.load.interface import Load, OnRecord, Target
from specbench.client.load.open import OpenLoop
from specbench.client.load.sharded import ShardedClosedLoop
from specbench.client.shards import ShardedClient
from specbench.plan.windows import PlannedRequest


def make_load(planned: Sequence[PlannedRequest], shards: ShardedClient | None = None) -> Load:
    """The load a window's requests ask for: open when they carry send times (in one process: its send
    times are kept by one loop), else closed at their concurrency, across the worker processes `shards`
    when the session has them."""
    first = planned[0]
    if first.at_s is not None:
        return OpenLoop(max_in_flight=first.fields["concurrency"])
    if shards is not None:
        return ShardedClosedLoop(shards, concurrency=first.fields["concurrency"])
    return ClosedLoop(concurrency=first.fields["concurrency"])


__all__ = ["ClosedLoop", "Load", "OnRecord", "OpenLoop", "ShardedClosedLoop", "Target", "make_load"]

"""The interface every way of sending load implements, what it sends to (`Target`), and the one function
every load loop calls per request (`stream_planned`: one planned request -> its RequestRecord). Both have the
shape of the lean client's `client.Endpoint` and `client.stream_planned` (issue 21), which replace them when
that client is merged."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import httpx

from ..client import stream_request
from ..engines.base import Engine
from ..plan import PlannedRequest
from ..records import RequestRecord

OnRecord = Callable[[RequestRecord], None]


@dataclass(frozen=True)
class Target:
    """Where requests go: the engine (request shapes), a pooled client, the URL, timeout and headers."""

    engine: Engine
    http: httpx.AsyncClient
    base_url: str
    timeout_s: float
    headers: dict[str, str] | None = None


class Load(Protocol):
    async def send(self, target: Target, planned: Sequence[PlannedRequest],
                   on_record: OnRecord) -> list[RequestRecord]:
        """Send every planned request; call `on_record` as each finishes; return the records."""
        ...


async def stream_planned(target: Target, planned: PlannedRequest) -> RequestRecord:
    """Stream one planned request and return its record (the function every load loop calls)."""
    t_send = time.time()
    res = await stream_request(target.engine, target.http, target.base_url, planned.spec, target.timeout_s,
                               target.headers)
    return RequestRecord(
        **planned.fields, t_send=t_send, ttft_s=res.ttft_s, e2e_s=res.e2e_s,
        chunk_offsets_s=res.chunk_offsets_s or [], chunk_tokens=res.chunk_tokens or [],
        prompt_tokens=res.prompt_tokens, output_tokens=res.output_tokens, token_ids=res.token_ids,
        text=res.text, finish_reason=res.finish_reason, spec=res.spec, error=res.error)

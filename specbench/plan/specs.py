"""What the plan hands to the engines, typed once and to the left of both: `RequestSpec` (one request as
planned, the same for every variant; plan.py builds it, an engine turns it into a body) and `SweepFacts`
(what an engine is told of the sweep; server/launch.py builds it, the engines read it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class RequestSpec:
    """Everything that defines one request; identical across variants for the same sweep point."""

    messages: list[dict[str, str]]
    prompt_text: str  # for the completions endpoint: the user text (no chat template)
    max_tokens: int
    temperature: float
    seed: int
    endpoint: str = "chat"
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    ignore_eos: bool = True  # False with sweep.stop_at_eos: the request ends where the model ends


@dataclass(frozen=True)
class SweepFacts:
    """What an engine needs from the sweep: the endpoint its readiness probe generates on, and the largest
    concurrency (the fairness pins size the engine's batch by it)."""

    endpoint: Literal["chat", "completions"]
    max_concurrency: int

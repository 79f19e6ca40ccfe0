"""Engines by name, imported lazily: `vllm`, `sglang`, `command` (any OpenAI-compatible server started
from an argv template) and `external` (an endpoint that is already running)."""

from __future__ import annotations

from ..registry import Registry
from .base import ChunkInfo, Engine, LaunchSpec, RequestSpec

ENGINES: Registry[type[Engine]] = Registry("engine", {
    "vllm": "specbench.engines.vllm:VLLMEngine",
    "sglang": "specbench.engines.sglang:SGLangEngine",
    "command": "specbench.engines.command:CommandEngine",
    "external": "specbench.engines.external:ExternalEngine",
})

__all__ = ["ENGINES", "ChunkInfo", "Engine", "LaunchSpec", "RequestSpec"]

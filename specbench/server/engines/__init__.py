"""Engines by name, imported lazily: `vllm`, `sglang`, `command` (any OpenAI-compatible server started
from an argv template) and `external` (an endpoint that is already running)."""

from __future__ import annotations

from specbench.server.engines.base import ChunkInfo, Engine, LaunchSpec, RequestSpec
from specbench.shared.registry import ENGINE_TARGETS, Registry

ENGINES: Registry[type[Engine]] = Registry("engine", ENGINE_TARGETS)

__all__ = ["ENGINES", "ChunkInfo", "Engine", "LaunchSpec", "RequestSpec"]

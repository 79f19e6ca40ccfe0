"""An endpoint that is already running (`engine.kind: external`): nothing is launched or stopped.

`variants[].url` (or engine.url) is the endpoint; engine.metrics_url optionally names its Prometheus
endpoint. Acceptance options are those of the command engine (a response field or a counter).
"""

from __future__ import annotations

from specbench.config import VariantConfig
from specbench.server.engines.base import LaunchSpec
from specbench.server.engines.command import CommandEngine


class ExternalEngine(CommandEngine):
    kind = "external"
    forced_acceptance = None  # specbench does not launch it: nothing to force

    def launch_spec(self, variant: VariantConfig, drafter_args: list[str], port: int,
                    where: str) -> LaunchSpec | None:
        return None

    def base_url(self, variant: VariantConfig, port: int) -> str:
        return (variant.url or self.config.url or "").rstrip("/")

    def metrics_url(self, variant: VariantConfig, port: int) -> str:
        return self.config.metrics_url or f"{self.base_url(variant, port)}/metrics"

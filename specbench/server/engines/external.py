"""An endpoint that is already running (`engine.kind: external`): nothing is launched or stopped.

`variants[].url` (or engine.url) is the endpoint; engine.metrics_url optionally names its Prometheus
endpoint. `engine.protocol` says what it speaks: `vllm` or `sglang` read its acceptance as specbench reads
a server it launches (the same request fields, per-response details and Prometheus counters, by the same
functions); `openai` (the default) only what acceptance_field / acceptance_metric name, as the command
engine does.
"""

from __future__ import annotations

from typing import Any

import httpx

from specbench.config import VariantConfig
from specbench.server.engines import sglang, vllm
from specbench.server.engines.base import LaunchSpec, RequestSpec
from specbench.server.engines.command import CommandEngine
from specbench.shared.schema import SpecDetails


class ExternalEngine(CommandEngine):
    kind = "external"
    forced_acceptance = None  # specbench does not launch it: nothing to force
    launched = False
    user_command = False

    def launch_spec(self, variant: VariantConfig, drafter_args: list[str], port: int,
                    where: str) -> LaunchSpec | None:
        return None

    def base_url(self, variant: VariantConfig, port: int) -> str:
        return (variant.url or self.config.url or "").rstrip("/")

    def metrics_url(self, variant: VariantConfig, port: int) -> str:
        return self.config.metrics_url or f"{self.base_url(variant, port)}/metrics"

    # -- the endpoint's own protocol (engine.protocol) ------------------------------------------------------
    @property
    def counter_acceptance(self) -> bool:  # type: ignore[override]
        """vLLM's acceptance counters bracket every window, as for a vLLM server specbench launches."""
        return self.config.protocol == "vllm" or bool(self.config.acceptance_metric)

    def request_body(self, req: RequestSpec) -> dict[str, Any]:
        body = super().request_body(req)
        if self.config.protocol == "vllm":
            body["return_token_ids"] = True
        elif self.config.protocol == "sglang":  # its version is unknown: older servers ignore the field
            body["return_spec_tokens_details"] = True
        return body

    def parse_spec(self, data: dict[str, Any]) -> SpecDetails | None:
        if self.config.protocol == "vllm":
            return vllm.parse_vllm_spec(data)
        if self.config.protocol == "sglang":
            return sglang.parse_sglang_spec(data)
        return super().parse_spec(data)

    def spec_keys(self) -> tuple[str, ...] | None:
        return {"vllm": ("metrics",), "sglang": ("sglext", "meta_info")}.get(self.config.protocol) or \
            super().spec_keys()

    async def read_counters(self, http: httpx.AsyncClient, metrics_url: str) -> dict[str, Any] | None:
        if self.config.protocol == "vllm":
            return await vllm.VLLMEngine.read_counters(self, http, metrics_url)  # type: ignore[arg-type]
        if self.config.protocol == "sglang":
            return await sglang.SGLangEngine.read_counters(self, http, metrics_url)  # type: ignore[arg-type]
        return await super().read_counters(http, metrics_url)

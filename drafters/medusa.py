"""Medusa: extra decoding heads on the target's last hidden state, one head per future position.

vLLM only (0.32 `SpeculativeConfig`, method `medusa`): `{"method": "medusa", "model": <heads folder>,
"num_speculative_tokens": k}`. vLLM needs k (a Medusa config has no `n_predict` to default it from) and builds
k heads (`num_lookahead_tokens` = k), so k above the checkpoint's head count (`num_heads`, or any
`*num*heads*` key, as vLLM's MedusaConfig reads it) has no weights: refused here.
"""

from __future__ import annotations

from pydantic import Field

from specbench.plan.drafter import (
    VLLM_ACCEPTANCE,
    Drafter,
    DrafterParams,
    LaunchContext,
    vllm_speculative_config,
)

from ._sglang import missing_path, model_hf_config


class MedusaParams(DrafterParams):
    draft_model_path: str = Field(description="the Medusa heads folder")
    num_tokens: int = Field(ge=1, le=64, description="draft tokens per step: heads used (vLLM requires it)")


class Medusa(Drafter[MedusaParams]):
    name = "medusa"
    Params = MedusaParams
    acceptance = {"vllm": VLLM_ACCEPTANCE}

    def vllm(self, p: MedusaParams, ctx: LaunchContext) -> list[str]:
        return vllm_speculative_config({"method": "medusa", "model": p.draft_model_path,
                                        "num_speculative_tokens": p.num_tokens})

    def check(self, p: MedusaParams, ctx: LaunchContext) -> list[str]:
        out = missing_path("params.draft_model_path", p.draft_model_path, "the Medusa heads folder", ctx)
        hf = model_hf_config(p.draft_model_path) or {}
        heads = next((v for k, v in hf.items() if "num" in k and "heads" in k and isinstance(v, int)), None)
        if heads is not None and p.num_tokens > heads:
            out.append(f"params.num_tokens: {p.num_tokens} is more than the checkpoint's {heads} Medusa heads "
                       f"(vLLM would build heads it has no weights for)")
        return out


DRAFTER = Medusa()

"""N-gram prompt lookup: drafts by copying what followed the last n-gram's earlier occurrence. Model-free."""

from __future__ import annotations

from pydantic import Field, model_validator

from specbench.drafter import Drafter, DrafterParams, LaunchContext, vllm_speculative_config


class NgramParams(DrafterParams):
    num_tokens: int = Field(4, ge=1, le=64, description="draft tokens proposed per step")
    lookup_max: int = Field(4, ge=1, description="longest n-gram matched")
    lookup_min: int = Field(2, ge=1, description="shortest n-gram matched")

    @model_validator(mode="after")
    def _range(self) -> "NgramParams":
        if self.lookup_min > self.lookup_max:
            raise ValueError("lookup_min must be <= lookup_max")
        return self


class Ngram(Drafter):
    name = "ngram"
    Params = NgramParams
    acceptance = {"vllm": "/metrics vllm:spec_decode_* counter deltas per window"}

    def vllm(self, p: NgramParams, ctx: LaunchContext) -> list[str]:
        return vllm_speculative_config({"method": "ngram", "num_speculative_tokens": p.num_tokens,
                                        "prompt_lookup_max": p.lookup_max, "prompt_lookup_min": p.lookup_min})


DRAFTER = Ngram()

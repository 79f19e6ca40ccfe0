"""Suffix decoding: drafts from suffix trees over the prompt and earlier responses (model-free, like n-gram,
but the tree also remembers past outputs across requests).

vLLM only (0.32 `SpeculativeConfig`, method `suffix`; needs `arctic-inference` installed next to vLLM,
else vLLM exits at startup). num_speculative_tokens is a maximum (vLLM defaults it to the tree depth);
the other parameters are vLLM's `suffix_decoding_*` fields with vLLM's defaults and bounds. The global
tree caches responses across requests: with repeated prompts (repeats, waves) later windows draft from
earlier windows' outputs, which a fair comparison should say; `max_cached_requests: 0` turns it off.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from specbench.plan.drafter import (
    VLLM_ACCEPTANCE,
    Drafter,
    DrafterParams,
    LaunchContext,
    vllm_speculative_config,
)


class SuffixParams(DrafterParams):
    num_tokens: int | None = Field(None, ge=1, le=64, description="most draft tokens per step (None: tree depth)")
    max_tree_depth: int = Field(24, ge=1, description="depth of the suffix trees (prefix match + speculation)")
    max_cached_requests: int = Field(10000, ge=0, description="responses kept in the global tree (0: off)")
    max_spec_factor: float = Field(1.0, ge=0, description="speculation length per matched prefix token")
    min_token_prob: float = Field(0.1, ge=0, le=1, description="least estimated probability of a drafted token")

    @model_validator(mode="after")
    def _depth(self) -> SuffixParams:
        if self.num_tokens is not None and self.num_tokens > self.max_tree_depth:
            raise ValueError("num_tokens must be <= max_tree_depth (the tree depth bounds what is drafted)")
        return self


class Suffix(Drafter[SuffixParams]):
    name = "suffix"
    Params = SuffixParams
    acceptance = {"vllm": VLLM_ACCEPTANCE}

    def vllm(self, p: SuffixParams, ctx: LaunchContext) -> list[str]:
        """num_speculative_tokens is always given (vLLM's own default, the tree depth, when num_tokens is None):
        without it vLLM 0.32 leaves `model` unset for suffix."""
        return vllm_speculative_config({
            "method": "suffix", "num_speculative_tokens": p.num_tokens or p.max_tree_depth,
            "suffix_decoding_max_tree_depth": p.max_tree_depth,
            "suffix_decoding_max_cached_requests": p.max_cached_requests,
            "suffix_decoding_max_spec_factor": p.max_spec_factor,
            "suffix_decoding_min_token_prob": p.min_token_prob})


DRAFTER = Suffix()

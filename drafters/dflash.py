"""DFlash: a block-diffusion drafter proposes a whole block in one forward, conditioned on target hidden states.

SGLang `--speculative-algorithm DFLASH` (not in 0.5.9), block size via `--speculative-dflash-block-size`
(the verify window; an alias of --speculative-num-draft-tokens for DFLASH, srt/arg_groups/fields/spec.py).
vLLM (0.32, CPU too): `--speculative-config {"method": "dflash", ...}`, drafting block_size - 1 tokens per
step (the anchor is the bonus token). The demo head `smollm2-dflash` is trained here on CPU.
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

from ._eagle_family import SGLANG_ACCEPTANCE, demo_or_path
from ._sglang import algorithm_known, missing_path, spec_args


class DFlashParams(DrafterParams):
    draft_model_path: str = Field(description="DFlash draft model folder (or the demo head smollm2-dflash)")
    block_size: int | None = Field(None, ge=2, le=1024, description="verify window; None = the draft's own")


class DFlash(Drafter[DFlashParams]):
    name = "dflash"
    Params = DFlashParams
    acceptance = {"sglang": SGLANG_ACCEPTANCE, "vllm": VLLM_ACCEPTANCE}

    def vllm(self, p: DFlashParams, ctx: LaunchContext) -> list[str]:
        """vLLM drafts block_size - 1 tokens per step (num_speculative_tokens; check() requires block_size)."""
        return vllm_speculative_config({"method": "dflash", "model": demo_or_path(p.draft_model_path),
                                        "num_speculative_tokens": (p.block_size or 2) - 1})

    def sglang(self, p: DFlashParams, ctx: LaunchContext) -> list[str]:
        out = spec_args("DFLASH", draft=demo_or_path(p.draft_model_path))
        if p.block_size is not None:
            out += ["--speculative-dflash-block-size", str(p.block_size)]
        return out

    def check(self, p: DFlashParams, ctx: LaunchContext) -> list[str]:
        out = missing_path("params.draft_model_path", demo_or_path(p.draft_model_path), "the DFlash draft folder", ctx)
        if ctx.engine == "vllm" and p.block_size is None:
            # vLLM 0.32 refuses a draft model without num_speculative_tokens, even one whose config has it
            out.append("params.block_size: required on vLLM (it drafts block_size - 1 tokens per step; "
                       "the demo head smollm2-dflash is trained with 4)")
        if ctx.engine == "sglang" and not algorithm_known("DFLASH", ctx):
            out.append("drafter: DFLASH is not an algorithm of this SGLang version (0.5.9 offers "
                       "EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM)")
        return out


DRAFTER = DFlash()

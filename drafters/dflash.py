"""DFlash: a block-diffusion drafter proposes a whole block in one forward, conditioned on target hidden states.

SGLang `--speculative-algorithm DFLASH` (not in 0.5.9), block size via `--speculative-dflash-block-size`
(the verify window; an alias of --speculative-num-draft-tokens for DFLASH, srt/arg_groups/fields/spec.py).
"""

from __future__ import annotations

from pydantic import Field

from specbench.drafter import Drafter, DrafterParams, LaunchContext

from ._eagle_family import SGLANG_ACCEPTANCE
from ._sglang import algorithm_known, missing_path, spec_args


class DFlashParams(DrafterParams):
    draft_model_path: str = Field(description="DFlash draft model folder")
    block_size: int | None = Field(None, ge=2, le=1024, description="verify window; None = the draft's own")


class DFlash(Drafter[DFlashParams]):
    name = "dflash"
    Params = DFlashParams
    acceptance = {"sglang": SGLANG_ACCEPTANCE}

    def sglang(self, p: DFlashParams, ctx: LaunchContext) -> list[str]:
        out = spec_args("DFLASH", draft=p.draft_model_path)
        if p.block_size is not None:
            out += ["--speculative-dflash-block-size", str(p.block_size)]
        return out

    def check(self, p: DFlashParams, ctx: LaunchContext) -> list[str]:
        out = missing_path("params.draft_model_path", p.draft_model_path, "the DFlash draft folder", ctx)
        if ctx.engine == "sglang" and not algorithm_known("DFLASH", ctx):
            out.append("drafter: DFLASH is not an algorithm of this SGLang version (0.5.9 offers "
                       "EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM)")
        return out


DRAFTER = DFlash()

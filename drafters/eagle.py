"""EAGLE (EAGLE-1/2): a draft head fed by the target's last hidden state; chain or tree.

SGLang `--speculative-algorithm EAGLE` (tree: steps, topk, num_draft_tokens). vLLM 0.32
`--speculative-config {"method": "eagle", "model": ..., "num_speculative_tokens": steps}`: a chain only, so
topk and num_draft_tokens (SGLang's tree shape) are refused on vLLM rather than silently dropped. The recipe
is EAGLE-3's with another algorithm and method name.
"""

from __future__ import annotations

from specbench.plan.drafter import LaunchContext

from ._eagle_family import EagleParams
from .eagle3 import Eagle3


class Eagle(Eagle3):
    name = "eagle"
    algorithm = "EAGLE"
    path_what = "the EAGLE draft head folder"
    vllm_method = "eagle"

    def check(self, p: EagleParams, ctx: LaunchContext) -> list[str]:
        out = super().check(p, ctx)
        if ctx.engine == "vllm":
            out += [f"params.{f}: SGLang's tree shape; vLLM's eagle drafts a chain of `steps` tokens and would "
                    f"ignore it (remove it)" for f in ("topk", "num_draft_tokens") if f in p.model_fields_set]
        return out


DRAFTER = Eagle()

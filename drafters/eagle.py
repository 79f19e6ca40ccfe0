"""EAGLE (EAGLE-1/2): a draft head fed by the target's last hidden state; chain or tree.

SGLang `--speculative-algorithm EAGLE` (tree: steps, topk, num_draft_tokens). vLLM 0.32
`--speculative-config {"method": "eagle", "model": ..., "num_speculative_tokens": steps}`: a chain only, so
topk and num_draft_tokens (SGLang's tree shape) are refused on vLLM rather than silently dropped.
"""

from __future__ import annotations

from specbench.plan.drafter import VLLM_ACCEPTANCE, LaunchContext, vllm_speculative_config

from ._eagle_family import EagleFamily, EagleParams, demo_or_path


class Eagle(EagleFamily):
    name = "eagle"
    algorithm = "EAGLE"
    path_what = "the EAGLE draft head folder"
    acceptance = {**EagleFamily.acceptance, "vllm": VLLM_ACCEPTANCE}

    def vllm(self, p: EagleParams, ctx: LaunchContext) -> list[str]:
        return vllm_speculative_config({"method": "eagle", "model": demo_or_path(p.draft_model_path),
                                        "num_speculative_tokens": p.steps or 3})

    def check(self, p: EagleParams, ctx: LaunchContext) -> list[str]:
        out = super().check(p, ctx)
        if ctx.engine == "vllm":
            out += [f"params.{f}: SGLang's tree shape; vLLM's eagle drafts a chain of `steps` tokens and would "
                    f"ignore it (remove it)" for f in ("topk", "num_draft_tokens") if f in p.model_fields_set]
        return out


DRAFTER = Eagle()

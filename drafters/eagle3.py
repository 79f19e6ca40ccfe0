"""EAGLE-3: a small draft head fed by the target's low/mid/high hidden states; chain (topk=1) or tree.

K2.6 heads (lightseekorg/kimi-k2.6-eagle3, nvidia/Kimi-K2.6-Eagle3) recommend steps 3, topk 1, 4 draft tokens.
The demo head `smollm2-eagle3` (a demo model name, resolved to its folder) is trained here on CPU.
"""

from __future__ import annotations

from typing import ClassVar

from specbench.plan.drafter import VLLM_ACCEPTANCE, LaunchContext, vllm_speculative_config

from ._eagle_family import EagleFamily, EagleParams, demo_or_path


class Eagle3(EagleFamily):
    name = "eagle3"
    algorithm = "EAGLE3"
    path_what = "the EAGLE-3 draft head folder"
    acceptance = {**EagleFamily.acceptance, "vllm": VLLM_ACCEPTANCE}
    vllm_method: ClassVar[str] = "eagle3"  # SpeculativeConfig.method

    def vllm(self, p: EagleParams, ctx: LaunchContext) -> list[str]:
        """vLLM drafts a chain of `steps` tokens (default 3); topk/num_draft_tokens are SGLang's tree shape."""
        return vllm_speculative_config({"method": self.vllm_method, "model": demo_or_path(p.draft_model_path),
                                        "num_speculative_tokens": p.steps or 3})


DRAFTER = Eagle3()

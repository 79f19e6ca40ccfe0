"""A smaller language model with the target's tokenizer drafts tokens autoregressively."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from specbench.plan.drafter import (
    VLLM_ACCEPTANCE,
    Drafter,
    DrafterParams,
    LaunchContext,
    vllm_speculative_config,
)


class DraftModelParams(DrafterParams):
    model: str = Field(description="draft model folder (or a demo model name such as smollm2-draft)")
    num_tokens: int = Field(4, ge=1, le=64, description="draft tokens proposed per step")


class DraftModel(Drafter[DraftModelParams]):
    name = "draft_model"
    draft_role = "model"
    Params = DraftModelParams
    acceptance = {"vllm": VLLM_ACCEPTANCE,
                  "sglang": "per request: sglext.spec_tokens_details or /generate meta_info spec_* fields"}

    def vllm(self, p: DraftModelParams, ctx: LaunchContext) -> list[str]:
        return vllm_speculative_config({"method": "draft_model", "model": resolve_draft(p.model),
                                        "num_speculative_tokens": p.num_tokens})

    def sglang(self, p: DraftModelParams, ctx: LaunchContext) -> list[str]:
        """SGLang's STANDALONE algorithm as a chain: num_tokens steps, topk 1, num_tokens + 1 verified."""
        from ._sglang import spec_args

        return spec_args("STANDALONE", draft=resolve_draft(p.model), steps=p.num_tokens, topk=1,
                         draft_tokens=p.num_tokens + 1)

    def check(self, p: DraftModelParams, ctx: LaunchContext) -> list[str]:
        """A folder is looked for only when the context checks paths on this host; a demo model name
        needs no folder yet (specbench run builds it before launching)."""
        from specbench.demo_models import DEMO_MODELS

        if p.model in DEMO_MODELS or not ctx.check_paths:
            return []
        path = resolve_draft(p.model)
        return [] if Path(path).exists() else [f"params.model: draft model folder not found: {path}"]


def resolve_draft(name_or_path: str) -> str:
    """Demo model names resolve to their prepared folder; anything else is a path."""
    from specbench.demo_models import demo_model_path

    return str(demo_model_path(name_or_path) or Path(name_or_path).expanduser())


DRAFTER = DraftModel()

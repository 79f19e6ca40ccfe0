"""MTP / NextN: the model's own multi-token-prediction layers draft (SGLang NEXTN = alias of EAGLE).

SGLang fills a missing draft path with the target itself for DeepSeek-V3-family architectures, Kimi K2
included (see drafters/_sglang.py). A K2 checkpoint without MTP layers then fails or drafts garbage, so
specbench wants the path explicit: the model folder itself when its config.json has
`num_nextn_predict_layers` >= 1, or a separate MTP checkpoint.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specbench.plan.drafter import DrafterParams, LaunchContext

from ._eagle_family import EagleRules
from ._sglang import auto_fill_architecture, eagle_shape_problems, missing_path, model_hf_config, spec_args


class MtpParams(DrafterParams):
    draft_model_path: str | None = Field(None, description="MTP layers: the model folder itself or a separate one")
    algorithm: Literal["NEXTN", "EAGLE"] = "NEXTN"
    steps: int | None = Field(None, ge=1, le=32)
    topk: int | None = Field(None, ge=1, le=64)
    num_draft_tokens: int | None = Field(None, ge=2, le=1024)


class Mtp(EagleRules[MtpParams]):
    name = "mtp"
    Params = MtpParams

    def sglang(self, p: MtpParams, ctx: LaunchContext) -> list[str]:
        return spec_args(p.algorithm, draft=p.draft_model_path, steps=p.steps, topk=p.topk,
                         draft_tokens=p.num_draft_tokens)

    def check(self, p: MtpParams, ctx: LaunchContext) -> list[str]:
        out = eagle_shape_problems(p.steps, p.topk, p.num_draft_tokens)
        if p.draft_model_path:
            out += missing_path("params.draft_model_path", p.draft_model_path, "the MTP draft folder", ctx)
            same = p.draft_model_path.rstrip("/") == ctx.model_path.rstrip("/")
            hf = model_hf_config(ctx.model_path) if same else None
            if hf is not None and not hf.get("num_nextn_predict_layers"):
                out.append("params.draft_model_path: the target checkpoint has no MTP layers "
                           "(config.json num_nextn_predict_layers is 0 or missing)")
            return out
        arch = auto_fill_architecture(ctx.model_path)
        if arch:
            out.append(f"params.draft_model_path: required for {arch}: SGLang would silently use the target "
                       f"checkpoint as the MTP draft; give the path explicitly")
        return out


DRAFTER = Mtp()

"""MTP / NextN: the model's own multi-token-prediction layers draft.

The DeepSeek-V3 recipe: a checkpoint whose config.json records MTP layers (DeepSeek-V3/R1 and Kimi K2 ship
one, `num_nextn_predict_layers: 1`) drafts with them from the target checkpoint itself. SGLang
(`--speculative-algorithm NEXTN`, an alias of EAGLE) fills a missing `--speculative-draft-model-path` with
the target for the DeepSeek-V3 family (drafters/_sglang.py's list) and says "DeepSeek MTP does not require
setting speculative_draft_model_path"; vLLM's `method: mtp` loads the target's MTP layers when no `model`
is given. So no draft path is the right recipe when the target has MTP layers. The hazard is a checkpoint
without them (a pruned or converted one): SGLang would load it as its own draft. specbench refuses that,
and a draft path pointing at such a checkpoint; the count is read where the engines read it
(drafters/_mtp_layers.py: top level, `text_config`, `mtp_num_hidden_layers`, ...).

vLLM 0.32 (`SpeculativeConfig`): `{"method": "mtp", "num_speculative_tokens": steps}` (the model-specific
names `deepseek_mtp`, `qwen3_next_mtp`, ... are deprecated aliases of `mtp`); a chain, no tree: topk and
num_draft_tokens are SGLang's and refused on vLLM. num_speculative_tokens above the MTP layer count must be
a multiple of it (vLLM reuses the layers).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specbench.plan.drafter import VLLM_ACCEPTANCE, DrafterParams, LaunchContext, vllm_speculative_config

from ._eagle_family import SGLANG_ACCEPTANCE, EagleRules
from ._mtp_layers import describe_keys, mtp_layers
from ._sglang import auto_fill_architecture, eagle_shape_problems, missing_path, model_hf_config, spec_args


class MtpParams(DrafterParams):
    draft_model_path: str | None = Field(None, description="MTP layers: none = the target's own, or a separate folder")
    algorithm: Literal["NEXTN", "EAGLE"] = Field("NEXTN", description="SGLang only: its algorithm name")
    steps: int | None = Field(None, ge=1, le=32, description="draft tokens per step (vLLM: num_speculative_tokens)")
    topk: int | None = Field(None, ge=1, le=64, description="SGLang only: branching per step")
    num_draft_tokens: int | None = Field(None, ge=2, le=1024, description="SGLang only: tokens verified per step")


class Mtp(EagleRules[MtpParams]):
    name = "mtp"
    Params = MtpParams
    acceptance = {"sglang": SGLANG_ACCEPTANCE, "vllm": VLLM_ACCEPTANCE}

    def sglang(self, p: MtpParams, ctx: LaunchContext) -> list[str]:
        return spec_args(p.algorithm, draft=p.draft_model_path, steps=p.steps, topk=p.topk,
                         draft_tokens=p.num_draft_tokens)

    def vllm(self, p: MtpParams, ctx: LaunchContext) -> list[str]:
        """One draft token per step unless steps says more (DeepSeek-V3 has one MTP layer)."""
        cfg: dict[str, object] = {"method": "mtp", "num_speculative_tokens": p.steps or 1}
        if p.draft_model_path:
            cfg["model"] = p.draft_model_path
        return vllm_speculative_config(cfg)

    def check(self, p: MtpParams, ctx: LaunchContext) -> list[str]:
        out = _engine_only_params(p, ctx)
        if ctx.engine == "sglang":
            out += eagle_shape_problems(p.steps, p.topk, p.num_draft_tokens)
        if p.draft_model_path:
            out += missing_path("params.draft_model_path", p.draft_model_path, "the MTP draft folder", ctx)
        same = not p.draft_model_path or p.draft_model_path.rstrip("/") == ctx.model_path.rstrip("/")
        hf = model_hf_config(p.draft_model_path or ctx.model_path)
        if hf is None:
            return out  # not readable here (validate on a laptop): the host check reads it
        layers = mtp_layers(hf)
        count = layers[0] if layers else 0
        if same and count == 0:
            out.append(_no_layers(p, ctx, layers))
        if ctx.engine == "vllm" and p.steps and count and p.steps > count and p.steps % count:
            out.append(f"params.steps: {p.steps} is not a multiple of the checkpoint's {count} MTP layers "
                       f"({layers[1] if layers else ''}): vLLM refuses it; use {count} or a multiple")
        return out


def _engine_only_params(p: MtpParams, ctx: LaunchContext) -> list[str]:
    """Parameters the other engine has and this one would drop: refused, not ignored."""
    if ctx.engine != "vllm":
        return []
    given = [f for f in ("topk", "num_draft_tokens", "algorithm") if f in p.model_fields_set]
    return [f"params.{f}: an SGLang setting; vLLM's mtp drafts a chain of `steps` tokens and would ignore it "
            f"(remove it)" for f in given]


def _no_layers(p: MtpParams, ctx: LaunchContext, layers: tuple[int, str] | None) -> str:
    where = f"{layers[1]} is 0" if layers else f"none of {describe_keys()}"
    what = f"the target checkpoint has no MTP layers (config.json: {where})"
    if p.draft_model_path:
        return f"params.draft_model_path: {what}"
    if ctx.engine == "vllm":
        return (f"params.draft_model_path: {what}, and vLLM's mtp drafts with the target's own MTP layers; "
                f"give the folder of a separate MTP checkpoint")
    arch = auto_fill_architecture(ctx.model_path)
    if arch:
        return (f"params.draft_model_path: {what}, and SGLang fills a missing path with the target for {arch}; "
                f"give the folder of a separate MTP checkpoint")
    return f"params.draft_model_path: {what}; give the folder of a separate MTP checkpoint"


DRAFTER = Mtp()

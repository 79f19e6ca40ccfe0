"""EAGLE-family drafters on SGLang (EAGLE3, STANDALONE, NEXTN/MTP): one recipe, three algorithms."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from pydantic import Field

from specbench.plan.drafter import ArgProblem, Drafter, DrafterParams, LaunchContext

from ._mtp_layers import mtp_layers
from ._sglang import auto_fill_architecture, eagle_shape_problems, missing_path, model_hf_config, spec_args

SGLANG_ACCEPTANCE = ("per request: sglext.spec_tokens_details (OpenAI, sglang >= 0.5.19) or "
                     "/generate meta_info spec_* fields")


def demo_or_path(name_or_path: str) -> str:
    """A demo model name (smollm2-eagle3) becomes its prepared folder; anything else is kept as given."""
    from specbench.demo_models import demo_model_path

    demo = demo_model_path(name_or_path) if name_or_path else None
    return str(demo) if demo else name_or_path


class EagleParams(DrafterParams):
    draft_model_path: str = Field(description="draft head / draft model folder (always explicit)")
    steps: int | None = Field(None, ge=1, le=32, description="draft forward steps per verify")
    topk: int | None = Field(None, ge=1, le=64, description="branching per step (1 = chain)")
    num_draft_tokens: int | None = Field(None, ge=2, le=1024,
                                         description="tokens verified per step, root included")


EP = TypeVar("EP", bound=DrafterParams)


class EagleRules(Drafter[EP]):
    """SGLang's argument rules for the EAGLE family, whatever drafter (or raw args) selects the algorithm."""

    sglang_algorithms = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"})
    acceptance = {"sglang": SGLANG_ACCEPTANCE}

    def check_engine_args(self, options: dict[str, str], ctx: LaunchContext) -> list[ArgProblem]:
        out = []
        if "--speculative-num-steps" not in options:
            given = [f for f in ("--speculative-eagle-topk", "--speculative-num-draft-tokens") if f in options]
            if given:
                out.append(ArgProblem(given[0], f"{' and '.join(given)} without --speculative-num-steps makes "
                                                f"SGLang fail with a bare AssertionError: set steps too"))
        if ("--speculative-draft-model-path" not in options and (arch := auto_fill_architecture(ctx.model_path))
                and not _own_mtp_recipe(options, ctx.model_path)):
            out.append(ArgProblem("", f"no --speculative-draft-model-path for {arch}: SGLang would silently use "
                                      f"the target checkpoint as the draft; give the draft path explicitly"))
        return out


def _own_mtp_recipe(options: dict[str, str], model_path: str) -> bool:
    """NEXTN/EAGLE on a target whose config.json records MTP layers: SGLang filling the draft path with the
    target is the DeepSeek-V3 recipe (its MTP layers draft), not a hazard."""
    algo = options.get("--speculative-algorithm", "").upper()
    layers = mtp_layers(model_hf_config(model_path) or {})
    return algo in ("NEXTN", "EAGLE") and layers is not None and layers[0] > 0


class EagleFamily(EagleRules[EagleParams]):
    algorithm: ClassVar[str] = "EAGLE"
    path_what: ClassVar[str] = "the draft model folder"
    Params = EagleParams

    def sglang(self, p: EagleParams, ctx: LaunchContext) -> list[str]:
        return spec_args(self.algorithm, draft=p.draft_model_path, steps=p.steps, topk=p.topk,
                         draft_tokens=p.num_draft_tokens)

    def check(self, p: EagleParams, ctx: LaunchContext) -> list[str]:
        out = missing_path("params.draft_model_path", demo_or_path(p.draft_model_path), self.path_what, ctx)
        if ctx.engine == "vllm":  # vLLM 0.32's SpeculativeConfig has no tree: the recipe would drop them
            return out + [f"params.{f}: vLLM drafts a chain of `steps` tokens (no EAGLE tree) and would silently "
                          f"ignore {f}; remove it (a tree needs SGLang)"
                          for f in ("topk", "num_draft_tokens") if getattr(p, f) is not None]
        return out + eagle_shape_problems(p.steps, p.topk, p.num_draft_tokens)

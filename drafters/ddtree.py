"""DDTree (Diffusion Draft Tree): a draft tree built from DFlash's per-position distributions under a node
budget, verified in one target forward. Not in any SGLang release, so two modes:

- `mode: sglang`: an SGLang build that has it (open PR sgl-project/sglang#29907 adds `DDTREE` and
  `--speculative-ddtree-budget`); algorithm name, budget flag and extra flags are configurable because
  they may still change before a release.
- `mode: command`: any OpenAI-compatible wrapper server (e.g. around liranringel/ddtree) launched from a
  command template (`engine.kind: command`, or a variant-level `command`); the parameters fill its
  placeholders: {draft_model_path} {tree_budget} {block_size}. scripts/ddtree_server is such a server (a
  reference, not a production server): configs/demo-cpu-full.yaml runs it next to vLLM.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from specbench.plan.drafter import ArgProblem, Drafter, DrafterParams, LaunchContext, UnsupportedEngine

from ._eagle_family import SGLANG_ACCEPTANCE, demo_or_path
from ._sglang import missing_path, spec_args


class DDTreeParams(DrafterParams):
    mode: Literal["sglang", "command"] = "sglang"
    draft_model_path: str | None = Field(None, description="the DFlash draft model folder")
    tree_budget: int = Field(64, ge=1, le=4096, description="draft tree node budget")
    block_size: int | None = Field(None, ge=2, le=1024, description="DFlash block size (None = the draft's own)")
    algorithm: str = Field("DDTREE", description="mode sglang: the --speculative-algorithm name of the build")
    budget_flag: str = Field("--speculative-ddtree-budget", description="mode sglang: flag taking the budget")
    extra_args: list[str] = Field(default_factory=list, description="mode sglang: more flags of the build")

    @field_validator("draft_model_path")
    @classmethod
    def _demo(cls, v: str | None) -> str | None:
        """A demo model name (smollm2-dflash) becomes its folder, also in a command's {draft_model_path}."""
        return demo_or_path(v) if v else v


class DDTree(Drafter[DDTreeParams]):
    name = "ddtree"
    Params = DDTreeParams
    acceptance = {"sglang": SGLANG_ACCEPTANCE,
                  "command": "engine.acceptance_field (per response) or engine.acceptance_metric (counter)"}

    def sglang(self, p: DDTreeParams, ctx: LaunchContext) -> list[str]:
        if p.mode != "sglang":
            raise UnsupportedEngine("ddtree mode command needs a command template (a variant `command` or "
                                    "engine.kind command); use mode: sglang for an SGLang build with DDTREE")
        return self._sglang_args(p)

    def command(self, p: DDTreeParams, ctx: LaunchContext) -> list[str]:
        """Mode sglang under a custom launcher: the flags are spliced where the template says {drafter_args}."""
        return self._sglang_args(p) if p.mode == "sglang" else []

    def _sglang_args(self, p: DDTreeParams) -> list[str]:
        out = spec_args(p.algorithm, draft=p.draft_model_path) + [p.budget_flag, str(p.tree_budget)]
        if p.block_size is not None:
            out += ["--speculative-dflash-block-size", str(p.block_size)]
        return out + list(p.extra_args)

    sglang_algorithms = frozenset({"DDTREE"})

    def check_engine_args(self, options: dict[str, str], ctx: LaunchContext) -> list[ArgProblem]:
        """No SGLang release resolves DDTREE (0.5.23 parses it, then fails): a local build must say so."""
        raw = ctx.engine_version_text
        if raw and "+" not in raw:
            algo = options.get("--speculative-algorithm", "").upper()
            return [ArgProblem("params", f"{algo} is not in any SGLang release (engine version {raw}); run a build "
                                         f"that has it and set engine.version to its local version (e.g. "
                                         f"0.5.23+ddtree), or use mode: command with a wrapper server")]
        return []

    def check(self, p: DDTreeParams, ctx: LaunchContext) -> list[str]:
        if p.mode == "command" and not p.draft_model_path:
            return []  # the wrapper may carry its own draft: its template decides
        return missing_path("params.draft_model_path", p.draft_model_path, "the DFlash draft folder", ctx)


DRAFTER = DDTree()

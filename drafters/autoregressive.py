"""Plain autoregressive decoding: the baseline every drafter is measured against."""

from __future__ import annotations

from specbench.plan.drafter import Drafter, DrafterParams, LaunchContext


class Autoregressive(Drafter[DrafterParams]):
    name = "autoregressive"
    speculative = False
    acceptance = {"vllm": "none (1.0 by definition)", "sglang": "none (1.0 by definition)",
                  "command": "none (1.0 by definition)", "external": "none (1.0 by definition)"}

    def vllm(self, params: DrafterParams, ctx: LaunchContext) -> list[str]:
        return []

    def sglang(self, params: DrafterParams, ctx: LaunchContext) -> list[str]:
        return []

    def command(self, params: DrafterParams, ctx: LaunchContext) -> list[str]:
        return []  # a wrapper server's plain decoding is its own template (e.g. --tree-budget 0)


DRAFTER = Autoregressive()

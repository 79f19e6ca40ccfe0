"""N-gram prompt lookup: drafts by copying what followed the last n-gram's earlier occurrence. Model-free."""

from __future__ import annotations

from pydantic import Field, model_validator

from specbench.plan.drafter import (
    VLLM_ACCEPTANCE,
    Drafter,
    DrafterParams,
    LaunchContext,
    check_per_batch_size,
    vllm_speculative_config,
)

from ._sglang import is_old


class NgramParams(DrafterParams):
    num_tokens: int = Field(4, ge=1, le=64, description="draft tokens proposed per step")
    lookup_max: int = Field(4, ge=1, description="longest n-gram matched")
    lookup_min: int = Field(2, ge=1, description="shortest n-gram matched")
    # vLLM's dynamic speculative decoding (num_speculative_tokens_per_batch_size): inclusive batch-size
    # ranges [start, end, k], the first starting at 1, k <= num_tokens (0: plain decoding at that size)
    per_batch_size: list[tuple[int, int, int]] | None = Field(None, description="vLLM: [start, end, k] ranges")

    @model_validator(mode="after")
    def _range(self) -> NgramParams:
        if self.lookup_min > self.lookup_max:
            raise ValueError("lookup_min must be <= lookup_max")
        if self.per_batch_size is not None:
            check_per_batch_size(self.per_batch_size, self.num_tokens)
        return self


class Ngram(Drafter[NgramParams]):
    name = "ngram"
    Params = NgramParams
    acceptance = {"vllm": VLLM_ACCEPTANCE,
                  "sglang": "per request: sglext.spec_tokens_details or /generate meta_info spec_* fields"}

    def vllm(self, p: NgramParams, ctx: LaunchContext) -> list[str]:
        cfg = {"method": "ngram", "num_speculative_tokens": p.num_tokens,
               "prompt_lookup_max": p.lookup_max, "prompt_lookup_min": p.lookup_min}
        if p.per_batch_size is not None:
            cfg["num_speculative_tokens_per_batch_size"] = [list(r) for r in p.per_batch_size]
        return vllm_speculative_config(cfg)

    def sglang(self, p: NgramParams, ctx: LaunchContext) -> list[str]:
        """SGLang NGRAM. Its draft-token count includes the verified root token (proposals = N - 1 per
        step, tokenizer_manager.py), hence num_tokens + 1. The match-window flags exist up to the 0.5.9
        line only; from 0.5.21 the trie depth (--speculative-ngram-max-trie-depth) replaces them."""
        out = ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", str(p.num_tokens + 1)]
        if is_old(ctx):
            out += ["--speculative-ngram-min-match-window-size", str(p.lookup_min),
                    "--speculative-ngram-max-match-window-size", str(p.lookup_max)]
        return out

    def check(self, p: NgramParams, ctx: LaunchContext) -> list[str]:
        if p.per_batch_size is not None and ctx.engine != "vllm":
            return ["params.per_batch_size: dynamic speculative decoding is a vLLM setting (SGLang: one launch "
                    "per concurrency range, see specbench tune's schedule)"]
        set_windows = {"lookup_min", "lookup_max"} & p.model_fields_set
        if ctx.engine == "sglang" and set_windows and not is_old(ctx):
            return [f"params.{sorted(set_windows)[0]}: SGLang >= 0.5.21 has no n-gram match-window flags "
                    f"(remove it, or pass --speculative-ngram-* flags in the variant's args)"]
        return []


DRAFTER = Ngram()

"""What a drafter family is: its parameters, and how it turns them into engine launch arguments.

A drafter lives in one module of the top-level `drafters` package and exposes `DRAFTER`, an instance
of a `Drafter` subclass. Adding a drafter never edits the core:

    class Medusa(Drafter):
        name = "medusa"
        class Params(DrafterParams):
            heads: int = Field(3, ge=1)
        acceptance = {"vllm": "/metrics spec_decode counters"}
        def vllm(self, p, ctx):
            return vllm_speculative_config({"method": "medusa", "num_speculative_tokens": p.heads})
    DRAFTER = Medusa()
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel, ConfigDict

from specbench.shared.errors import UsageError
from specbench.shared.registry import ENGINE_TARGETS, Registry


class DrafterParams(BaseModel):
    """Base for drafter parameters: unknown keys are errors, never silently ignored."""

    model_config = ConfigDict(extra="forbid")


P = TypeVar("P", bound=DrafterParams)


@dataclass(frozen=True)
class LaunchContext:
    """What a drafter may need to know about the launch it joins."""

    engine: str
    engine_version: tuple[int, ...] | None = None  # None: unknown (engine not importable here)
    model_path: str = ""
    check_paths: bool = True  # False: the launch is not on this host (validate): local paths are not looked for
    engine_version_text: str | None = None  # as the engine reports it, e.g. "0.5.23+ddtree" (a local build)


@dataclass(frozen=True)
class ArgProblem:
    """A problem in a variant's final engine arguments. `where`: the flag at fault ("--x": preflight names
    the config list it came from), a field under the variant ("params"), or "" for the variant itself."""

    where: str
    message: str


# The engines' own names for drafter settings (vLLM's --speculative-config keys, SGLang's flags without
# `--`, `-` as `_`) -> the specbench params they may be, first one a drafter has wins: "did you mean" for an
# unknown param is the drafter's equivalent, never the nearest string (`num_speculative_tokens` on
# vLLM is `steps`, not SGLang's `num_draft_tokens`).
ENGINE_PARAM_NAMES: dict[str, tuple[str, ...]] = {
    "num_speculative_tokens": ("steps", "num_tokens"),
    "speculative_num_steps": ("steps", "num_tokens"),
    "speculative_eagle_topk": ("topk",),
    "speculative_num_draft_tokens": ("num_draft_tokens", "num_tokens"),
    "speculative_draft_model_path": ("draft_model_path", "model"),
    "model": ("draft_model_path",),
    "draft_model": ("draft_model_path", "model"),
    "speculative_dflash_block_size": ("block_size",),
    "prompt_lookup_max": ("lookup_max",),
    "prompt_lookup_min": ("lookup_min",),
}


def engine_equivalent(params: type[DrafterParams], key: str) -> str | None:
    """The field of `params` that an engine's own name `key` stands for, or None."""
    name = key.removeprefix("--").replace("-", "_")
    return next((f for f in ENGINE_PARAM_NAMES.get(name, ()) if f in params.model_fields and f != name), None)


class UnsupportedEngine(UsageError):
    pass


class Drafter(Generic[P]):
    """A drafter family with parameters P. Subclass as `Drafter[MyParams]` and set `Params = MyParams`."""

    name: ClassVar[str] = ""
    speculative: ClassVar[bool] = True
    Params: ClassVar[type[DrafterParams]] = DrafterParams
    # engine kind -> where acceptance data comes from (shown in the report and in `specbench drafters`)
    acceptance: ClassVar[dict[str, str]] = {}
    # SGLang --speculative-algorithm values whose argument rules this drafter knows (check_engine_args)
    sglang_algorithms: ClassVar[frozenset[str]] = frozenset()
    # what its draft folder is to the target (checks/fit.py): "head" reads the target's hidden states and
    # predicts its tokens (same hidden size and vocabulary: EAGLE, MTP, DFlash, Medusa); "model" is a
    # language model of its own with the target's tokenizer (same vocabulary)
    draft_role: ClassVar[str] = "head"

    def parse_params(self, raw: dict[str, Any]) -> P:
        return cast(P, self.Params.model_validate(raw or {}))

    def engines(self) -> list[str]:
        return [e for e in ENGINE_TARGETS if callable(getattr(self, e, None))]

    def launch_args(self, params: P, ctx: LaunchContext) -> list[str]:
        """Engine arguments that switch this drafter on (empty for plain decoding)."""
        method = getattr(self, ctx.engine, None)
        if method is None:
            raise UnsupportedEngine(
                f"drafter {self.name!r} has no launch recipe for engine {ctx.engine!r} "
                f"(it supports: {', '.join(self.engines()) or 'none'})")
        return list(method(params, ctx))

    def check(self, params: P, ctx: LaunchContext) -> list[str]:
        """Problems that would make the launch fail or be unfair; one line each. Override as needed."""
        return []

    def check_engine_args(self, options: dict[str, str], ctx: LaunchContext) -> list[ArgProblem]:
        """Problems in a variant's final engine arguments ({--flag: value}) that use one of this drafter's
        `sglang_algorithms`, whichever drafter the variant names (raw args included). Override as needed."""
        return []

    # Engines that only measure (external) or launch a user's command take no drafter arguments.
    def external(self, params: P, ctx: LaunchContext) -> list[str]:
        return []

    def command(self, params: P, ctx: LaunchContext) -> list[str]:
        return []


def check_per_batch_size(ranges: list[tuple[int, int, int]], max_k: int) -> None:
    """vLLM 0.32's rules for num_speculative_tokens_per_batch_size (vllm/v1/spec_decode/dynamic/utils.py):
    a non-empty list of inclusive [start, end, k] ranges, positive, start <= end, k >= 0, sorted and
    non-overlapping, the first starting at 1 (gaps and the tail carry the previous k). k above
    num_speculative_tokens is cut to it by vLLM; here it is refused, as a schedule that cannot run."""
    if not ranges:
        raise ValueError("per_batch_size must not be empty")
    end = 0
    for start, stop, k in ranges:
        if start <= 0 or stop < start or k < 0:
            raise ValueError(f"per_batch_size range [{start}, {stop}, {k}]: need 1 <= start <= end and k >= 0")
        if start <= end:
            raise ValueError("per_batch_size ranges must be sorted and non-overlapping")
        if k > max_k:
            raise ValueError(f"per_batch_size range [{start}, {stop}, {k}]: k exceeds the {max_k} draft tokens set")
        end = stop
    if ranges[0][0] != 1:
        raise ValueError("per_batch_size: the first range must start at 1")


def vllm_speculative_config(cfg: dict[str, Any]) -> list[str]:
    """vLLM takes all speculative settings as one JSON argument."""
    return ["--speculative-config", json.dumps(cfg, sort_keys=True, separators=(",", ":"))]


VLLM_ACCEPTANCE = ("per request: metrics.speculative_decoding (vLLM >= 0.32); "
                   "/metrics vllm:spec_decode_* counter deltas per window")  # a drafter's `acceptance` entry


# `mypkg.drafters:Medusa` names a class or an instance: the registry makes an instance of a class.
DRAFTERS: Registry[Drafter[Any]] = Registry("drafter", package="drafters", attribute="DRAFTER", instantiate=True)


def get_drafter(name: str) -> Drafter[Any]:
    drafter = DRAFTERS.get(name)
    if not isinstance(drafter, Drafter):
        raise UsageError(f"drafter {name!r}: {type(drafter).__name__} is not a specbench Drafter")
    return drafter

"""Shared pieces of the SGLang drafter recipes (a private module: the registry skips `_` names).

Flag names verified in sglang 0.5.23 `srt/arg_groups/fields/spec.py` and 0.5.9 `srt/server_args.py`.
"""

from __future__ import annotations

from pathlib import Path

from specbench.plan.drafter import LaunchContext

# `--speculative-algorithm` was an argparse choice list in 0.5.9, a free string since ~0.5.15.
ALGORITHMS_0_5_9 = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
NEW_LINE = (0, 5, 21)  # first release of the renamed cuda-graph flags (and the arg_groups layout)


def is_old(ctx: LaunchContext) -> bool:
    """The <=0.5.20 flag line; an unknown version is treated as current."""
    return ctx.engine_version is not None and ctx.engine_version < NEW_LINE


def algorithm_known(algorithm: str, ctx: LaunchContext) -> bool:
    return not (ctx.engine_version is not None and ctx.engine_version <= (0, 5, 9)
                and algorithm not in ALGORITHMS_0_5_9)


def spec_args(algorithm: str, *, draft: str | None = None, steps: int | None = None,
              topk: int | None = None, draft_tokens: int | None = None) -> list[str]:
    """`--speculative-*` flags in SGLang's order; None leaves a flag to SGLang."""
    out = ["--speculative-algorithm", algorithm]
    if draft:
        out += ["--speculative-draft-model-path", draft]
    for flag, value in (("--speculative-num-steps", steps), ("--speculative-eagle-topk", topk),
                        ("--speculative-num-draft-tokens", draft_tokens)):
        if value is not None:
            out += [flag, str(value)]
    return out


def looks_local(path: str) -> bool:
    """A path specbench can check here (absolute, ./ or ~); `org/name` may be a hub id."""
    return path.startswith(("/", "./", "../", "~"))


def missing_path(field: str, path: str | None, what: str, ctx: LaunchContext | None = None) -> list[str]:
    """Required-ness always; existence only when the context says paths are checked on this host."""
    if not path:
        return [f"{field}: required ({what})"]
    check = ctx is None or ctx.check_paths
    if check and looks_local(path) and not Path(path).expanduser().exists():
        return [f"{field}: {what} not found: {path}"]
    return []


def eagle_shape_problems(steps: int | None, topk: int | None, draft_tokens: int | None) -> list[str]:
    """SGLang asserts (bare AssertionError) when topk or draft tokens come without steps, and with
    topk=1 silently rewrites draft tokens to steps+1 (`_handle_eagle_family`, speculative_hook.py)."""
    out = []
    if steps is None and (topk is not None or draft_tokens is not None):
        given = " and ".join(n for n, v in (("topk", topk), ("num_draft_tokens", draft_tokens)) if v is not None)
        out.append(f"params.steps: required when {given} is set (SGLang fails with a bare AssertionError)")
    if steps is not None and topk == 1 and draft_tokens is not None and draft_tokens != steps + 1:
        out.append(f"params.num_draft_tokens: must be steps+1 = {steps + 1} when topk is 1 "
                   f"(SGLang silently replaces {draft_tokens} with {steps + 1})")
    return out


# Architectures for which SGLang fills --speculative-draft-model-path with the target itself when it is
# missing (0.5.23 `_handle_eagle_family` in srt/arg_groups/speculative_hook.py, 0.5.9 server_args.py),
# plus Kimi K2.5/K2.6's multimodal wrapper whose text model is DeepseekV3: always pass the path explicitly.
AUTO_FILL_ARCHITECTURES = frozenset({
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration",
    "HYV3ForCausalLM", "HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration",
    "KimiK25ForConditionalGeneration",
})


def model_hf_config(model_path: str) -> dict | None:
    """The model folder's config.json, or None when it cannot be read here."""
    import json

    try:
        return json.loads((Path(model_path).expanduser() / "config.json").read_text())
    except (OSError, ValueError):
        return None


def architectures(model_path: str) -> list[str]:
    cfg = model_hf_config(model_path) or {}
    archs = list(cfg.get("architectures") or [])
    text = cfg.get("text_config")
    if isinstance(text, dict):
        archs += list(text.get("architectures") or [])
    return archs


def auto_fill_architecture(model_path: str) -> str | None:
    return next((a for a in architectures(model_path) if a in AUTO_FILL_ARCHITECTURES), None)

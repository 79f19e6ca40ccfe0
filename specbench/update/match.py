"""Which variant of RUN a new head replaces: the one with the same drafter configuration, only the head's
weights differing (the step cost is the configuration's, so RUN's holds for the new head)."""

from __future__ import annotations

from typing import Any

from specbench.config import RunConfig, VariantConfig
from specbench.shared.errors import UsageError

# A drafter parameter names the head's weights when its key ends so (draft_model_path, model, ...): the one
# thing an update may change. Everything else (k, steps, topk, args, env, ...) is the step cost's.
WEIGHT_KEY_ENDS = ("_path", "model")


def weight_keys(params: dict[str, Any]) -> set[str]:
    """The parameters that name the head's weights."""
    return {k for k in params if k.endswith(WEIGHT_KEY_ENDS)}


def configuration(v: VariantConfig) -> dict[str, Any]:
    """What fixes the variant's step cost: the variant without its name and its weights."""
    data = v.model_dump(mode="json", exclude={"name"})
    data["params"] = {k: x for k, x in v.params.items() if k not in weight_keys(v.params)}
    return data


def match_variant(cfg: RunConfig, name: str, run_cfg: RunConfig) -> str:
    """The variant of RUN (`run_cfg`) whose step cost the new head `name` of `cfg` shares: same drafter
    configuration, other weights; the one of the same name first. Raises a one-line UsageError otherwise."""
    names = [v.name for v in cfg.variants]
    if name not in names:
        raise UsageError(f"update: CONFIG has no variant {name!r} (it has {', '.join(names)})")
    new = cfg.variant(name)
    if new.baseline:
        raise UsageError(f"update: {name} is CONFIG's baseline; name a drafter's variant")
    if not weight_keys(new.params):
        raise UsageError(f"update: {name} ({new.drafter}) has no head weights among its params "
                         f"(a key ending in {' or '.join(WEIGHT_KEY_ENDS)}): nothing to update")
    mine = configuration(new)
    same = [v for v in run_cfg.variants if not v.baseline and configuration(v) == mine]
    fresh = [v for v in same if {k: v.params.get(k) for k in weight_keys(v.params)}
             != {k: new.params.get(k) for k in weight_keys(new.params)}]
    if not same:
        drafters = ", ".join(f"{v.name} ({v.drafter})" for v in run_cfg.variants if not v.baseline) or "none"
        raise UsageError(f"update: no variant of {run_cfg.name} has {name}'s drafter configuration with other "
                         f"weights (only the head may change; RUN has {drafters})")
    if not fresh:
        raise UsageError(f"update: {name}'s head is the one {same[0].name} of {run_cfg.name} measured: nothing new")
    for v in fresh:
        if v.name == name:
            return v.name
    if len(fresh) > 1:
        raise UsageError(f"update: {name} matches several variants of {run_cfg.name} "
                         f"({', '.join(v.name for v in fresh)}); name the variant as in RUN")
    return fresh[0].name

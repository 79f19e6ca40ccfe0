"""Config -> the surface's matrix: per drafter variant, one derived variant per forced acceptance length.

A derived variant is its source variant (same drafter, parameters, args, env) with `forced_acceptance` set
and the name `<source>-al<AL>`; the baseline is kept as it is, so it is measured (or reused, `--reuse`) like
in any run. The run itself is an ordinary `run_matrix` run: launches, intervals, resume and reuse unchanged.
"""

from __future__ import annotations

from specbench.config import RunConfig, VariantConfig
from specbench.shared.errors import ConfigError, UsageError

STANDARD_LENGTHS = (1.0, 1.5, 2.0, 3.0)  # plus k + 1 (every draft accepted), capped at k + 1
SEP = "-al"


def derived_name(variant: str, length: float) -> str:
    return f"{variant}{SEP}{length:g}"


def split_name(name: str) -> tuple[str, float] | None:
    """(source variant, forced length) of a derived variant's name, or None for any other name."""
    base, sep, tail = name.rpartition(SEP)
    if not sep or not base:
        return None
    try:
        return base, float(tail)
    except ValueError:
        return None


def default_lengths(k: int | None) -> list[float]:
    """1, 1.5, 2, 3 and k + 1, all capped at k + 1 (the most a step can accept); without k the standard four."""
    if k is None:
        return list(STANDARD_LENGTHS)
    return sorted({min(a, k + 1.0) for a in (*STANDARD_LENGTHS, k + 1.0)})


def surface_config(cfg: RunConfig, variants: list[str] | None, lengths: dict[str, list[float]]) -> RunConfig:
    """The matrix of the surface: the baseline and, per chosen variant, one variant per forced length.
    `variants`: names to force (None: every speculative variant in `lengths`); `lengths`: per variant."""
    known = {v.name: v for v in cfg.variants}
    chosen = variants if variants is not None else [n for n in lengths]
    for name in chosen:
        if name not in known:
            raise UsageError(f"surface: no variant {name!r} in {cfg.name} (known: {', '.join(known)})")
        if known[name].baseline:
            raise UsageError(f"surface: {name!r} is the baseline; force a drafter's variant")
        if known[name].forced_acceptance is not None:
            raise UsageError(f"surface: {name!r} already forces its acceptance")
    out: list[VariantConfig] = [cfg.baseline]
    for name in chosen:
        if not lengths.get(name):
            raise ConfigError(f"surface.{name}", "no forced acceptance lengths")
        for a in sorted(set(lengths[name])):
            out.append(known[name].model_copy(update={"name": derived_name(name, a), "forced_acceptance": a,
                                                      "baseline": False}))
    data = cfg.model_dump(mode="json", exclude_none=True)
    data["name"] = f"{cfg.name}-surface"
    data["variants"] = [v.model_dump(mode="json", exclude_none=True) for v in out]
    data.pop("tune", None)
    return RunConfig.model_validate(data)

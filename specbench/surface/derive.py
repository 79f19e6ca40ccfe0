"""Config -> the surface's matrix: per drafter variant, one derived variant per forced acceptance length, and
one forcing a head's own per-position profile when given.

A derived variant is its source variant (same drafter, parameters, args, env) with `forced_acceptance` set
and the name `<source>-al<AL>` (a profile: `<source>-al<AL>-profile`, AL = 1 + the sum of its rates); the
baseline is kept as it is, so it is measured (or reused, `--reuse`) like in any run. The run itself is an
ordinary `run_matrix` run: launches, intervals, resume and reuse unchanged.
"""

from __future__ import annotations

from specbench.config import RunConfig, VariantConfig, forced_length
from specbench.shared.errors import ConfigError, UsageError

STANDARD_LENGTHS = (1.0, 1.5, 2.0, 3.0)  # plus k + 1 (every draft accepted), capped at k + 1
SEP = "-al"
PROFILE = "-profile"  # a derived variant forcing a per-position profile, not one length


def derived_name(variant: str, forced: float | list[float]) -> str:
    if isinstance(forced, list):
        return f"{variant}{SEP}{forced_length(forced):.4g}{PROFILE}"
    return f"{variant}{SEP}{forced:g}"


def split_name(name: str) -> tuple[str, float] | None:
    """(source variant, forced length) of a derived variant's name (a profile's: the length it implies, as
    rounded in the name), or None for any other name."""
    base, sep, tail = name.removesuffix(PROFILE).rpartition(SEP)
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


def surface_config(cfg: RunConfig, variants: list[str] | None, lengths: dict[str, list[float]],
                   profiles: dict[str, list[float]] | None = None) -> RunConfig:
    """The matrix of the surface: the baseline and, per chosen variant, one variant per forced length and one
    forcing its profile when `profiles` has one. `variants`: names to force (None: every speculative variant in
    `lengths`); `lengths`, `profiles`: per variant."""
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
        forced: list[float | list[float]] = [*sorted(set(lengths[name]))]
        if name in (profiles or {}):
            forced.append((profiles or {})[name])
        for a in forced:
            out.append(known[name].model_copy(update={"name": derived_name(name, a), "forced_acceptance": a,
                                                      "baseline": False}))
    data = cfg.model_dump(mode="json", exclude_none=True)
    data["name"] = f"{cfg.name}-surface"
    data["variants"] = [v.model_dump(mode="json", exclude_none=True) for v in out]
    data.pop("tune", None)
    return RunConfig.model_validate(data)

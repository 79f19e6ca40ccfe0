"""The final argv of a launch (issue 51 item 5): the fairness pins, engine.args, the drafter's arguments
and the variant's args end up in one command line, where argparse silently takes the last of a flag given
twice. Refused before the load: a flag the drafter sets again in args (`--speculative-num-steps 5` beside
`steps: 3`: the engine takes 5), a pin replaced in one variant's args (that variant alone runs with
another cap: unfair), one flag twice in one list with two values, and a concurrency cap (SGLang
`--max-running-requests`, vLLM `--max-num-seqs`: `Engine.concurrency_flag`) below the largest concurrency
the variant is measured at (the engine would queue the rest, and that point would measure the queue).
Prefix-caching flags have their own message (preflight.config_problems).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specbench.config import RunConfig
from specbench.server.engines.pins import PREFIX_CACHING_FLAGS
from specbench.server.flag_names import SGLANG_ABBREVIATIONS

if TYPE_CHECKING:
    from specbench.server.engines import Engine
    from specbench.server.launch import VariantLaunch


def options(args: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """(--flag, value) in order, `--flag=v` and `--flag v` alike ("" for a switch); argparse's SGLang
    abbreviations (`--tp`) under their full name. Single-dash flags are left out."""
    out: list[tuple[str, str]] = []
    args = list(args)
    for i, a in enumerate(args):
        if not a.startswith("--") or len(a) == 2:
            continue
        name, eq, value = a.partition("=")
        if not eq:
            value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else ""
        out.append((SGLANG_ABBREVIATIONS.get(name, name), value))
    return out


def _shown(flag: str, value: str) -> str:
    return f"{flag} {value}".strip()


def argv_problems(cfg: RunConfig, engine: Engine, launches: list[VariantLaunch]) -> list[str]:
    """One line per problem, naming the config list the flag is in (engine.args lines once, not per variant)."""
    out: list[str] = []
    for i, la in enumerate(launches):
        if la.spec is None:
            continue
        eng = la.engine or engine
        engine_args, variant_args = options(cfg.engine.args), options(la.variant.args)
        drafter = dict(options(la.drafter_args))
        pins = dict(options(eng.fairness_pins()))
        for where, given in (("engine.args", engine_args), (f"variants[{i}].args", variant_args)):
            seen: dict[str, str] = {}
            for flag, value in given:
                if flag in seen and seen[flag] != value:
                    out.append(f"{where}: {flag} is given twice ({seen[flag]!r}, then {value!r}); the engine takes "
                               f"the last: give it once")
                seen[flag] = value
                if flag in drafter:
                    out.append(f"{where}: {_shown(flag, value)} sets again what variants[{i}].params set "
                               f"({_shown(flag, drafter[flag])}), and the engine takes the last; set it in the "
                               f"variant's params only")
        for flag, value in variant_args:
            if flag in pins and flag not in PREFIX_CACHING_FLAGS and flag not in dict(engine_args):
                out.append(f"variants[{i}].args: {_shown(flag, value)} replaces the fairness pin "
                           f"{_shown(flag, pins[flag])} for this variant alone; set it in engine.args to change it "
                           f"for every variant")
        out += _cap_problems(i, la, eng, engine_args, variant_args)
    return list(dict.fromkeys(out))


def _cap_problems(i: int, la: VariantLaunch, eng: Engine, engine_args: list[tuple[str, str]],
                  variant_args: list[tuple[str, str]]) -> list[str]:
    flag = eng.concurrency_flag
    if flag is None:
        return []
    found = [(w, v) for w, given in (("engine.args", engine_args), (f"variants[{i}].args", variant_args))
             for f, v in given if f == flag]
    if not found or not found[-1][1].isdigit():
        return []
    where, value = found[-1]
    cap = la.variant.max_concurrency
    largest = min(cap, eng.sweep.max_concurrency) if cap else eng.sweep.max_concurrency
    if int(value) >= largest:
        return []
    whose = "the sweep's" if where == "engine.args" else f"variants[{i}]'s"
    return [f"{where}: {flag} {value} is below {whose} largest concurrency {largest}: the engine would queue the "
            f"requests above {value} and that point would measure the queue; raise it to {largest}, or leave it "
            f"to specbench's pin"]

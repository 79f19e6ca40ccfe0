"""How many GPUs a launch uses, read from its engine arguments: tensor x pipeline parallel sizes.

The flags are the engines' own (vLLM 0.32 `--tensor-parallel-size`/`-tp`, `--pipeline-parallel-size`/`-pp`;
SGLang `--tp-size`/`--tensor-parallel-size` (and `--tp`, argparse's abbreviation), `--pp-size`/
`--pipeline-parallel-size`); the last one given wins, as in argparse. A multi-node launch (`engine.nodes`)
spreads these GPUs over its nodes. Used by `specbench plan` (GPU-hours) and preflight (GPUs against the node).
"""

from __future__ import annotations

from dataclasses import dataclass

TP_FLAGS = ("--tensor-parallel-size", "-tp", "--tp-size", "--tp")
PP_FLAGS = ("--pipeline-parallel-size", "-pp", "--pp-size", "--pp")


def last_flag(args: list[str], flags: tuple[str, ...]) -> tuple[str, str | None] | None:
    """(flag, value) of the last of `flags` in args (`--flag value` or `--flag=value`), or None."""
    found = None
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        if name in flags:
            found = (name, value if eq else (args[i + 1] if i + 1 < len(args) else None))
    return found


@dataclass(frozen=True)
class Parallel:
    tp: int
    pp: int
    source: str  # the flags it was read from, e.g. "--tp 8", or "no parallel flags"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


def parallel_of(args: list[str]) -> Parallel:
    """TP and PP of a launch's arguments (engine.args then the variant's); 1 where a flag is absent or not a
    positive integer (the engine itself refuses the latter)."""
    sizes, shown = [], []
    for flags in (TP_FLAGS, PP_FLAGS):
        found = last_flag(args, flags)
        raw = found[1] if found else None
        sizes.append(int(raw) if raw is not None and raw.isdigit() and int(raw) > 0 else 1)
        if found:
            shown.append(f"{found[0]} {sizes[-1]}")
    return Parallel(sizes[0], sizes[1], ", ".join(shown) or "no parallel flags")

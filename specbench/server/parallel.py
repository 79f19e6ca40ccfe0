"""How many GPUs a launch uses, read from its engine arguments: tensor x pipeline x data parallel sizes.

The flags are the engines' own (vLLM 0.32 `--tensor-parallel-size`/`-tp`, `--pipeline-parallel-size`/`-pp`,
`--data-parallel-size`/`-dp`; SGLang `--tp-size`/`--tensor-parallel-size` (and `--tp`, argparse's
abbreviation), `--pp-size`/`--pipeline-parallel-size`, `--dp-size`/`--dp`); the last one given wins, as in
argparse. Data parallelism replicates the TP x PP group (DP x TP x PP GPUs), except SGLang's
`--enable-dp-attention`, where the DP ranks are the TP ranks (TP x PP GPUs). The weights of one replica are
split over TP x PP (`shards`). A multi-node launch (`engine.nodes`) spreads these GPUs over its nodes. Used
by `specbench plan` (GPU-hours) and preflight (GPUs against the node).
"""

from __future__ import annotations

from dataclasses import dataclass

TP_FLAGS = ("--tensor-parallel-size", "-tp", "--tp-size", "--tp")
PP_FLAGS = ("--pipeline-parallel-size", "-pp", "--pp-size", "--pp")
DP_FLAGS = ("--data-parallel-size", "-dp", "--dp-size", "--dp")
DP_ATTENTION_FLAG = "--enable-dp-attention"  # SGLang: DP attention inside the TP group, no extra GPUs


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
    dp: int = 1
    dp_attention: bool = False  # SGLang's --enable-dp-attention: the DP ranks share the TP group's GPUs

    @property
    def shards(self) -> int:
        """GPUs one copy of the weights is split over (TP x PP)."""
        return self.tp * self.pp

    @property
    def gpus(self) -> int:
        """GPUs the launch uses in all (over all its nodes)."""
        return self.shards * (1 if self.dp_attention else self.dp)


def parallel_of(args: list[str]) -> Parallel:
    """TP, PP and DP of a launch's arguments (engine.args then the variant's); 1 where a flag is absent or not
    a positive integer (the engine itself refuses the latter)."""
    sizes, shown = [], []
    for flags in (TP_FLAGS, PP_FLAGS, DP_FLAGS):
        found = last_flag(args, flags)
        raw = found[1] if found else None
        sizes.append(int(raw) if raw is not None and raw.isdigit() and int(raw) > 0 else 1)
        if found:
            shown.append(f"{found[0]} {sizes[-1]}")
    dp_attention = DP_ATTENTION_FLAG in args
    if dp_attention and sizes[2] > 1:
        shown.append(f"{DP_ATTENTION_FLAG} (DP inside TP)")
    return Parallel(sizes[0], sizes[1], ", ".join(shown) or "no parallel flags", sizes[2], dp_attention)

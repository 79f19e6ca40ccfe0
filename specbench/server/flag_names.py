"""The nearest real flag for one an engine does not know: the other engine's equivalent first, then
string distance. A user moving a config between SGLang and vLLM brings the other engine's flags; the
nearest string (`--gpu-memory-utilization` -> SGLang's `--mamba-full-memory-ratio`) is the wrong answer.

Every name below was checked in vLLM 0.32.0's `vllm serve` parser and in data/sglang_flags.json (SGLang
0.5.9 and 0.5.23); a tuple lists a flag's names across releases, the first one the release knows is used.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection

# (vLLM flag, SGLang flag(s)): the same setting on the two engines
EQUIVALENT: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("--gpu-memory-utilization", ("--mem-fraction-static",)),
    ("--tensor-parallel-size", ("--tp-size",)),
    ("--pipeline-parallel-size", ("--pp-size",)),
    ("--data-parallel-size", ("--dp-size",)),
    ("--max-num-seqs", ("--max-running-requests",)),
    ("--max-model-len", ("--context-length",)),
    ("--max-num-batched-tokens", ("--chunked-prefill-size",)),
    ("--enforce-eager", ("--disable-cuda-graph",)),
    ("--no-enable-prefix-caching", ("--disable-radix-cache",)),
    ("--max-cudagraph-capture-size", ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs")),
    ("--seed", ("--random-seed",)),
    ("--model", ("--model-path",)),
    ("--tokenizer", ("--tokenizer-path",)),
)
# SGLang spellings argparse accepts as unique prefixes of a flag above (`--tp` for --tp-size, ...)
SGLANG_ABBREVIATIONS = {"--tp": "--tp-size", "--pp": "--pp-size", "--dp": "--dp-size"}

# `--speculative-<algorithm>-...`: a flag of one drafting algorithm never suggests another algorithm's
ALGORITHM_WORDS = frozenset({"ddtree", "dflash", "ngram", "eagle", "lookahead", "suffix", "medusa", "mtp", "nextn"})


def equivalents(flag: str) -> tuple[str, ...]:
    """The other engine's names for `flag` (either engine's spelling), in order of preference."""
    flag = SGLANG_ABBREVIATIONS.get(flag, flag)
    out: list[str] = []
    for vllm_flag, sglang_flags in EQUIVALENT:
        if flag == vllm_flag:
            out += sglang_flags
        elif flag in sglang_flags:
            out.append(vllm_flag)
    return tuple(out)


def _algorithm(flag: str) -> str | None:
    parts = flag.removeprefix("--").split("-")
    return parts[1] if len(parts) > 2 and parts[0] == "speculative" and parts[1] in ALGORITHM_WORDS else None


def nearest_flag(flag: str, known: Collection[str]) -> str | None:
    """The flag of `known` to suggest for the unknown `flag`: its other-engine equivalent when the engine
    has one, else the closest name by string distance (for a `--speculative-<algorithm>-` flag, only among
    that algorithm's flags: DDTree's budget flag on a release without DDTree suggests nothing)."""
    same = next((f for f in equivalents(flag) if f in known), None)
    if same:
        return same
    algorithm = _algorithm(flag)  # a DDTree flag on a release without DDTree: no flag of it to suggest
    pool = sorted(f for f in known if algorithm is None or _algorithm(f) == algorithm)
    near = difflib.get_close_matches(flag, pool, n=1, cutoff=0.6)
    return near[0] if near else None

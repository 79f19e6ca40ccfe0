"""The tuned choice per concurrency as a schedule an engine takes. Pure functions.

A level's choice holds from just above the previous measured level up to and including it (the first
from 1; beyond the last level vLLM carries the last range forward). Adjacent levels with the same choice
merge into one range.
  - vLLM: one `--speculative-config` whose `num_speculative_tokens_per_batch_size` holds the ranges
    (vLLM 0.32 dynamic speculative decoding); possible when the chosen settings' speculative configs
    differ in `num_speculative_tokens` only (plain decoding is k = 0).
  - SGLang (and any other engine): one flag set per range; a server is launched per range, since the
    engine does not change them at run time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SPEC_FLAG = "--speculative-config"
DYNAMIC_KEY = "num_speculative_tokens_per_batch_size"


@dataclass(frozen=True)
class Range:
    start: int
    end: int
    choice: str | None  # the setting's variant name; None: plain decoding


def ranges(choices: dict[int, str | None]) -> list[Range]:
    """{concurrency: choice} -> inclusive batch-size ranges from 1 to the highest level, merged."""
    out: list[Range] = []
    prev = 0
    for c in sorted(choices):
        if out and out[-1].choice == choices[c]:
            out[-1] = Range(out[-1].start, c, choices[c])
        else:
            out.append(Range(prev + 1, c, choices[c]))
        prev = c
    return out


def spec_config(argv: list[str]) -> dict[str, Any] | None:
    """The JSON of a vLLM argv's last --speculative-config (vLLM takes the last one), else None."""
    found = None
    for i, a in enumerate(argv):
        if a == SPEC_FLAG and i + 1 < len(argv):
            found = argv[i + 1]
        elif a.startswith(SPEC_FLAG + "="):
            found = a.split("=", 1)[1]
    return json.loads(found) if found else None


def vllm_schedule(rs: list[Range], argv: dict[str, list[str]]) -> tuple[dict[str, Any] | None, str]:
    """(speculative_config with the dynamic schedule, or None; why not). `argv`: each chosen setting's
    launch argv (command.json)."""
    chosen = {r.choice for r in rs if r.choice is not None}
    if not chosen:
        return None, "plain decoding wins at every level: no drafter to schedule"
    configs = {n: spec_config(argv.get(n, [])) for n in chosen}
    if any(c is None for c in configs.values()):
        return None, "a chosen setting has no --speculative-config in its launch"
    shapes = {json.dumps({k: v for k, v in c.items() if k != "num_speculative_tokens"}, sort_keys=True)
              for c in configs.values() if c is not None}
    if len(shapes) > 1:
        return None, ("the chosen settings differ in more than num_speculative_tokens: one launch per range "
                      "(see ranges)")
    k = {n: int(c["num_speculative_tokens"]) for n, c in configs.items() if c is not None}
    top = max(k, key=lambda n: k[n])
    cfg = dict(configs[top] or {})
    cfg[DYNAMIC_KEY] = [[r.start, r.end, 0 if r.choice is None else k[r.choice]] for r in rs]
    return cfg, ""


def flag_sets(rs: list[Range], argv: dict[str, list[str]], prefix: str = "--speculative-") -> list[dict[str, Any]]:
    """One flag set per range: the setting's --speculative-* flags and their values ([] = plain decoding)."""
    out = []
    for r in rs:
        flags: list[str] = []
        words = argv.get(r.choice, []) if r.choice is not None else []
        for i, a in enumerate(words):
            if a.startswith(prefix):
                flags.append(a)
                if "=" not in a and i + 1 < len(words) and not words[i + 1].startswith("--"):
                    flags.append(words[i + 1])
        out.append({"concurrency": [r.start, r.end], "setting": r.choice, "args": flags})
    return out

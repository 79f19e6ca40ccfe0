"""SGLang's flag names per release, shipped as package data (data/sglang_flags.json, written by
scripts/sglang_flags.py from each sglang wheel's own source), so that `specbench validate` can check the
flag names of an SGLang argv when SGLang itself is not importable here. Values and combinations of flags
are SGLang's parser's business; only names are checked."""

from __future__ import annotations

import importlib.resources
import json
from functools import lru_cache

from specbench.server.engines.base import parse_version
from specbench.server.flag_names import nearest_flag

PINNED = "0.5.23"  # the release docs/sglang.md installs; used when the engine version is unknown


@lru_cache(maxsize=1)
def shipped() -> dict[str, frozenset[str]]:
    """{release: its flag names} for every release in the package data."""
    text = importlib.resources.files("specbench").joinpath("data/sglang_flags.json").read_text()
    return {v: frozenset(flags) for v, flags in json.loads(text)["versions"].items()}


def flags_for(raw_version: str | None) -> tuple[str, frozenset[str]] | str:
    """(release, flag names) to check against, or why no list applies (a one-line reason)."""
    lists = shipped()
    have = ", ".join(sorted(lists, key=lambda v: parse_version(v) or ()))
    if raw_version is None:
        return PINNED, lists[PINNED]
    if "+" in raw_version:
        return f"engine version {raw_version} is a local build, which may add flags to its release"
    release = parse_version(raw_version)
    match = next((v for v in lists if parse_version(v) == release), None)
    if match is None:
        return f"no flag list for SGLang {raw_version} in specbench (it has {have})"
    return match, lists[match]


def flag_problem(flag: str, known: frozenset[str], release: str) -> str | None:
    """Why `flag` would not parse (argparse takes a unique prefix of a flag too), or None."""
    if flag in known:
        return None
    longer = sorted(f for f in known if f.startswith(flag))
    if len(longer) == 1:
        return None
    if longer:
        return f"{flag} is ambiguous in SGLang {release} (it could be {', '.join(longer[:4])})"
    near = nearest_flag(flag, known)  # vLLM's name of an SGLang setting gets the SGLang name
    return f"{flag} is not a flag of SGLang {release}" + (f" (nearest: {near})" if near else "")


def argv_problems(server_args: list[str], known: frozenset[str], release: str) -> list[str]:
    """One line per flag of `server_args` (the arguments after `-m sglang.launch_server`) SGLang would reject."""
    flags = [a.partition("=")[0] for a in server_args if a.startswith("--") and len(a) > 2]
    return [p for p in dict.fromkeys(flag_problem(f, known, release) for f in flags) if p]

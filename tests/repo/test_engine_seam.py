"""The engine seam (issue 48 item 1): what an engine kind decides is asked of its Engine class, never
decided by comparing kind names. Outside `specbench/server/engines/` and `shared/registry.py` (which maps
the names to classes), no module of specbench holds a string constant equal to a registered kind, save
the few in ALLOWED, each with its reason (docs/architecture.md, "Adding an engine")."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from specbench.server.engines import ENGINES
from specbench.shared.registry import ENGINE_KINDS, ENGINE_TARGETS

REPO = Path(__file__).resolve().parents[2]
SEAM = ("specbench/server/engines/", "specbench/shared/registry.py")

# (module, kind name) -> how many constants may stay, and why
ALLOWED: dict[tuple[str, str], int] = {
    # argparse's sub-command ("specbench <command>"): the word, not the engine kind
    ("specbench/cli/parser.py", "command"): 2,
    # engine.protocol: what an external endpoint speaks (Literal["openai", "vllm", "sglang"]), not a kind
    ("specbench/config/sections.py", "vllm"): 1,
    ("specbench/config/sections.py", "sglang"): 1,
    # `specbench bench URL` writes the config a user would write for an endpoint: `engine: {kind: external}`
    ("specbench/cli/measure.py", "external"): 1,
}


def kind_constants(kinds: set[str]) -> Counter[tuple[str, str]]:
    """(module, kind) -> how many string constants equal to a kind the module holds (f-string parts too)."""
    found: Counter[tuple[str, str]] = Counter()
    for path in sorted((REPO / "specbench").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(SEAM):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in kinds:
                found[(rel, node.value)] += 1
    return found


def test_no_module_outside_the_seam_names_an_engine_kind() -> None:
    found = kind_constants(set(ENGINE_TARGETS))
    leaks = sorted(f"{mod}: {kind!r} x{n}" for (mod, kind), n in found.items() if n > ALLOWED.get((mod, kind), 0))
    assert not leaks, ("engine kinds named outside server/engines/ (ask the Engine class, ENGINES.get(kind), "
                       "instead):\n" + "\n".join(leaks))


def test_the_allow_list_is_not_stale() -> None:
    found = kind_constants(set(ENGINE_TARGETS))
    stale = sorted(f"{mod}: {kind!r}" for (mod, kind), n in ALLOWED.items() if found[(mod, kind)] < n)
    assert not stale, "ALLOWED names constants that are gone (lower or drop them):\n" + "\n".join(stale)


def test_the_rule_sees_a_comparison() -> None:
    """The scan itself: a kind compared by name is found (so the first test cannot pass by reading nothing)."""
    tree = ast.parse('if cfg.engine.kind == "vllm":\n    pass\n')
    assert [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)] == ["vllm"]
    assert kind_constants({"vllm"})  # and specbench itself names "vllm" at least in an allowed place


@pytest.mark.parametrize("kind", sorted(ENGINE_TARGETS))
def test_registry_facts_agree_with_the_engine_class(kind: str) -> None:
    """config/ (above server/) validates with the registry's facts; the Engine class holds the same ones."""
    cls = ENGINES.get(kind)
    assert cls.kind == kind
    assert cls.launched is not ENGINE_KINDS[kind].endpoint

"""The deliberate breakages of benchmarks/breakages.py stay meaningful: each edit still applies to the
current source exactly once and each test meant to catch it still exists (the benchmark itself runs them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from benchmarks.breakages import BREAKAGES

REPO = Path(__file__).resolve().parents[2]


def test_names_are_unique() -> None:
    assert len({b.name for b in BREAKAGES}) == len(BREAKAGES)


@pytest.mark.parametrize("b", BREAKAGES, ids=lambda b: b.name)
def test_edit_applies_and_tests_exist(b) -> None:
    source = (REPO / b.path).read_text()
    assert source.count(b.old) == 1, f"{b.path}: {b.old!r}"
    assert b.new != b.old
    for node in b.tests:
        path, _, func = node.partition("::")
        defined = {n.name for n in ast.walk(ast.parse((REPO / path).read_text())) if isinstance(n, ast.FunctionDef)}
        assert not func or func in defined, node

"""A private name (`_x`) stays in its module: no module of specbench or drafters imports one from another
module. What another module needs is public and named for what it is."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def private_imports(root: Path = REPO) -> list[str]:
    out = []
    for f in sorted([*(root / "specbench").rglob("*.py"), *(root / "drafters").rglob("*.py")]):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("specbench",
                                                                                                  "drafters"):
                out += [f"{f.relative_to(root)}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def test_no_module_imports_a_private_name_of_another() -> None:
    assert not (bad := private_imports()), "private names imported across modules:\n" + "\n".join(bad)


def test_the_rule_sees_a_private_import(tmp_path: Path) -> None:
    (tmp_path / "specbench").mkdir()
    (tmp_path / "drafters").mkdir()
    (tmp_path / "specbench" / "a.py").write_text("from specbench.b import _hidden, shown\n")
    assert private_imports(tmp_path) == ["specbench/a.py:1: specbench.b._hidden"]

"""The house rule: no function in specbench/ takes more than 6 parameters (pass an object instead).

Counts positional and keyword-only parameters (not *args/**kwargs, not self/cls) of every function and
method, found by walking the AST of every module."""

from __future__ import annotations

import ast
from pathlib import Path

import specbench

MAX_PARAMS = 6
ROOT = Path(specbench.__file__).parent
# Being reworked in parallel (issue 23, item 11): remove the entry with the fix. A listed function that
# no longer exceeds the limit fails the test too, so the list cannot go stale.
PENDING: set[str] = set()


def _n_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names)


def too_many(root: Path = ROOT, limit: int = MAX_PARAMS) -> list[str]:
    """"path:line name (count)" of every function under `root` with more than `limit` parameters."""
    out = []
    for path in sorted(root.rglob("*.py")):
        fns = [n for n in ast.walk(ast.parse(path.read_text(), filename=str(path)))
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for fn in sorted(fns, key=lambda n: n.lineno):
            if (n := _n_params(fn)) > limit:
                out.append(f"{path.relative_to(root.parent)}:{fn.lineno} {fn.name} ({n})")
    return out


def _where(entry: str) -> str:
    """"path name" of a too_many entry (no line number, which moves with every edit)."""
    path_line, name, _ = entry.split(" ")
    return f"{path_line.rsplit(':', 1)[0]} {name}"


def test_counter_counts_what_it_should(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text(
        "def ok(a, b, c, d, e, f, *args, **kw): pass\n"
        "class K:\n"
        "    def m(self, a, b, c, d, e, f): pass\n"
        "    def bad(self, a, b, c, d, e, *, f, g): pass\n"
        "async def worse(a, b, /, c, d, e, f, g): pass\n"
    )
    assert [s.split(" ", 1)[1] for s in too_many(pkg)] == ["bad (7)", "worse (7)"]


def test_no_function_takes_more_than_six_parameters() -> None:
    found = too_many()
    assert [e for e in found if _where(e) not in PENDING] == []
    assert {_where(e) for e in found} == PENDING, "a pending function was fixed: remove it from PENDING"

"""The layers of docs/architecture.md, checked against specbench's imports, so the document cannot drift
from the code: the test reads the layer table and the rules from the document itself, and every import
(read with ast: module-level, function-level and TYPE_CHECKING imports alike) from specbench's own files.

The folders are the layers: every row of the table names folders of specbench/ (the last also `__init__` and
`__main__`, the only modules allowed at the top). A module imports from its own layer or a layer to its
left (above it in the table), never to its right; no circles among the modules; every folder is in the
table, and every name in the table exists. A module over 300 lines is named, with its reason, in the
document's list of long modules."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
ROOT = "__init__"  # the layer table's name for specbench/__init__.py (the package's face)
MAIN = "__main__"  # python -m specbench
TOP_MODULES = {ROOT, MAIN}  # the only modules allowed directly in specbench/
LONG = 300  # lines: a module longer than this is named in the document with its reason
EVERY = "*"  # the rules table's name for every module

# (importer, imported module or name): imports that break a rule today and are being removed elsewhere
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()  # (module, what it imports against a rule): none today


@dataclass(frozen=True)
class Import:
    importer: str  # module under specbench., e.g. "runner.window"; ROOT for specbench/__init__.py
    target: str  # module imported, e.g. "load" or "engines.base" (outside specbench: "drafters...")
    name: str  # the name taken from it ("" for `import x`)
    line: int


def modules(root: Path = REPO) -> dict[str, tuple[Path, bool]]:
    """specbench's modules by dotted name under specbench. -> (file, is a package's __init__)."""
    out = {}
    for f in sorted((root / "specbench").rglob("*.py")):
        parts = list(f.relative_to(root / "specbench").with_suffix("").parts)
        package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if package else parts) or ROOT
        out[name] = (f, package)
    return out


def _absolute(mod: str, package: bool, node: ast.ImportFrom) -> str:
    """The dotted name an ImportFrom reads from, with the leading `specbench.`."""
    if node.level == 0:
        return node.module or ""
    here = ["specbench", *([] if mod == ROOT else mod.split("."))]
    base = here if package else here[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _local(dotted: str) -> str | None:
    """specbench.x.y -> x.y (specbench -> ROOT); drafters... as is; anything else (stdlib, pandas) None."""
    if dotted == "specbench":
        return ROOT
    if dotted.startswith("specbench."):
        return dotted.removeprefix("specbench.")
    if dotted == "drafters" or dotted.startswith("drafters."):
        return dotted
    return None


def imports(mods: dict[str, tuple[Path, bool]]) -> list[Import]:
    out = []
    for mod, (path, package) in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [Import(mod, t, "", node.lineno) for a in node.names if (t := _local(a.name))]
            elif isinstance(node, ast.ImportFrom) and (base := _local(_absolute(mod, package, node))):
                for a in node.names:
                    sub = base + "." + a.name if base != ROOT else a.name
                    # `from . import calibration` imports a module; `from .load import ClosedLoop` a name
                    target = sub if sub in mods else base
                    out.append(Import(mod, target, "" if target == sub else a.name, node.lineno))
    return [i for i in out if i.target != i.importer]


def _table(text: str, header: str) -> list[list[str]]:
    """The rows of the markdown table whose header row starts with `| header |`, as lists of cells."""
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def doc_tables(doc: Path = DOC) -> tuple[dict[str, int], list[tuple[str, str, list[str]]]]:
    """(module or package -> layer number, [(rule, in, never imports)]) from the document."""
    text = doc.read_text()
    begin, end = text.index("<!-- layers"), text.index("<!-- /layers -->")
    block = text[begin:end]
    layers: dict[str, int] = {}
    for cells in _table(block, "layer"):
        number = int(cells[0].split()[0])
        for name in _names(cells[1].split("(")[0]):  # the names before any remark in parentheses
            assert name not in layers, f"docs/architecture.md: {name} is in layers {layers[name]} and {number}"
            layers[name] = number
    rules = [(cells[0], _names(cells[1])[0], _names(cells[2])) for cells in _table(block, "rule")]
    return layers, rules


def layer_of(mod: str, layers: dict[str, int]) -> int | None:
    """The layer of a module: its own entry, else its nearest package's."""
    parts = mod.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in layers:
            return layers[".".join(parts[:n])]
    return None


def _within(mod: str, entry: str) -> bool:
    return entry == EVERY or mod == entry or mod.startswith(entry + ".")


def circles(mods: list[str], edges: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for e in edges:
        if e.target in graph:
            graph[e.importer].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in graph:
        if m not in index:
            visit(m)
    return out


MODS = modules()
EDGES = imports(MODS)
LAYERS, RULES = doc_tables()


def test_every_module_has_a_layer_and_every_entry_exists() -> None:
    missing = sorted(m for m in MODS if layer_of(m, LAYERS) is None)
    assert not missing, f"not in docs/architecture.md's layer table: {', '.join(missing)}"
    unknown = sorted(e for e in LAYERS if e not in MODS)
    assert not unknown, f"docs/architecture.md's layer table names no such module: {', '.join(unknown)}"


def test_the_folders_are_the_layers() -> None:
    """Every entry of the table is a folder of specbench/ (or one of the two top modules), and specbench/
    holds no other module: a module's folder is its layer."""
    not_folders = sorted(e for e in LAYERS if e not in TOP_MODULES and not MODS[e][1])
    assert not not_folders, f"docs/architecture.md's layer table names modules, not folders: {', '.join(not_folders)}"
    top = sorted(m for m, (_, package) in MODS.items() if "." not in m and not package and m not in TOP_MODULES)
    assert not top, f"modules directly in specbench/ (move each into its layer's folder): {', '.join(top)}"


def long_modules(doc: Path = DOC) -> set[str]:
    """The modules docs/architecture.md names as over LONG lines, with a reason, as paths under specbench/."""
    text = doc.read_text()
    block = text[text.index("<!-- long modules -->"):text.index("<!-- /long modules -->")]
    return {_names(cells[0])[0] for cells in _table(block, "module")}


def test_a_long_module_has_its_reason_in_the_document() -> None:
    listed = long_modules()
    long = {str(path.relative_to(REPO / "specbench")): n for path, _ in MODS.values()
            if (n := len(path.read_text().splitlines())) > LONG}
    unlisted = sorted(f"specbench/{m} ({n} lines)" for m, n in long.items() if m not in listed)
    assert not unlisted, f"over {LONG} lines with no reason in docs/architecture.md's list: {', '.join(unlisted)}"
    stale = sorted(m for m in listed if m not in long)
    assert not stale, f"docs/architecture.md lists as long what is not (remove it): {', '.join(stale)}"


def test_no_import_runs_to_the_right() -> None:
    back = [f"specbench/{e.importer.replace('.', '/')} (layer {layer_of(e.importer, LAYERS)}) imports "
            f"{e.target}{':' + e.name if e.name else ''} (layer {layer_of(e.target, LAYERS)}), line {e.line}"
            for e in EDGES if e.target in MODS
            and (layer_of(e.target, LAYERS) or 0) > (layer_of(e.importer, LAYERS) or 0)]
    assert not back, "imports against docs/architecture.md's layers:\n" + "\n".join(back)


def test_no_circles() -> None:
    assert circles(list(MODS), EDGES) == []


def _broken(rule_in: str, never: list[str]) -> set[tuple[str, str, int]]:
    return {(e.importer, hit, e.line) for e in EDGES if _within(e.importer, rule_in)
            for hit in never if e.name == hit or _within(e.target, hit)}


@pytest.mark.parametrize("rule", RULES, ids=[r[0].split(":")[0] for r in RULES])
def test_rule(rule: tuple[str, str, list[str]]) -> None:
    text, rule_in, never = rule
    found = _broken(rule_in, never)
    broken = sorted(f"{m} imports {hit} (line {line})" for m, hit, line in found if (m, hit) not in KNOWN_EXCEPTIONS)
    assert not broken, f"{text}:\n" + "\n".join(broken)


def test_known_exceptions_still_exist() -> None:
    """An exception that no longer occurs is removed from KNOWN_EXCEPTIONS, so the rule is whole again."""
    found = {(m, hit) for _, rule_in, never in RULES for m, hit, _ in _broken(rule_in, never)}
    assert KNOWN_EXCEPTIONS <= found, f"no longer needed, remove from KNOWN_EXCEPTIONS: {KNOWN_EXCEPTIONS - found}"


# -- the checks themselves, on a made-up house: each would catch what it is for --------------------------
def _house(tmp_path: Path, files: dict[str, str]) -> dict[str, tuple[Path, bool]]:
    for rel, text in files.items():
        (tmp_path / "specbench" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "specbench" / rel).write_text(text)
    return modules(tmp_path)


def test_a_function_level_import_counts_and_a_circle_is_found(tmp_path: Path) -> None:
    mods = _house(tmp_path, {"__init__.py": "", "a.py": "def f():\n    from .b import x\n",
                             "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
                             "pkg/__init__.py": "from .c import C\n", "pkg/c.py": "from ..a import f\nC = 1\n"})
    edges = imports(mods)
    assert {(e.importer, e.target, e.name) for e in edges} == {
        ("a", "b", "x"), ("b", "a", ""), ("pkg", "pkg.c", "C"), ("pkg.c", "a", "f")}
    assert circles(list(mods), edges) == [["a", "b"]]


def test_the_tables_are_read_from_a_document(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("x\n<!-- layers -->\n| layer | modules |\n|---|---|\n| 1 base | `a` `b` (see `c`) |\n"
                   "| 2 top | `pkg` |\n\n| rule | in | never imports |\n|---|---|---|\n| r: why | `pkg` | `a.z` `Z` |\n"
                   "<!-- /layers -->\n")
    layers, rules = doc_tables(doc)
    assert layers == {"a": 1, "b": 1, "pkg": 2} and rules == [("r: why", "pkg", ["a.z", "Z"])]
    assert layer_of("pkg.deep.mod", layers) == 2 and layer_of("other", layers) is None

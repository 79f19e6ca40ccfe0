"""The docs name only modules that exist: every `specbench/<path>.py`, `specbench.<dotted>` and
`<package>.<module>` reference in README.md, docs/*.md and the package docstrings resolves to a module of
specbench (and, for `module.name`, to a name the module defines), and every `tests/`, `benchmarks/`,
`scripts/` and `configs/` path that the docs name is a file of the repository. A module moved or renamed
without its docs fails here, not in a reader's hands."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "specbench"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# file extensions that make `report.md` or `config.json` a file name, not a module
FILE_SUFFIXES = {"md", "html", "csv", "json", "jsonl", "yaml", "yml", "py", "png", "txt", "log", "parquet", "svg",
                 "toml", "sh", "gguf", "safetensors", "pt", "bin", "out", "err", "tmp"}
# `section.key` of the YAML file and fields of an engine's responses read like `package.module`: not modules
NOT_MODULES = {"metrics.speculative_decoding": "vLLM's per-request field in a response"}
PACKAGES = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").exists())
DOTTED = re.compile(r"(?<![\w./-])(?:specbench\.)?((?:" + "|".join(PACKAGES) + r")(?:\.\w+)+)")
SRC_PATH = re.compile(r"(?<![\w./-])(?:specbench/)((?:\w+/)*\w+\.py)\b")
REPO_PATH = re.compile(r"(?<![\w./-])((?:tests|benchmarks|scripts|configs)/[\w./-]*\w\.(?:py|yaml|md|json))\b")


def module_file(dotted: str) -> Path | None:
    base = SRC.joinpath(*dotted.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.exists():
            return f
    return None


@cache
def defined(f: Path) -> frozenset[str]:
    """Names a module defines at its top level (functions, classes, assignments, imports, __all__)."""
    names: set[str] = set()
    for node in ast.parse(f.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If):  # TYPE_CHECKING imports, lazy __getattr__ names
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    return frozenset(names)


@cache
def config_keys() -> frozenset[str]:
    """`section.field` of every section of the YAML file (RunConfig), e.g. `client.processes`."""
    from specbench.config import RunConfig

    keys = set()
    for section, info in RunConfig.model_fields.items():
        for t in getattr(info.annotation, "__args__", (info.annotation,)):
            keys.update(f"{section}.{f}" for f in getattr(t, "model_fields", {}))
    return frozenset(keys)


def dotted_problem(ref: str) -> str | None:
    """None if `ref` (a.b.c...) is a module, or a module followed by one name it defines (and attributes of
    that name, not checked), or a config key; else what is wrong."""
    parts = ref.split(".")
    if parts[-1] in FILE_SUFFIXES or ".".join(parts[:2]) in config_keys() or ".".join(parts[:2]) in NOT_MODULES:
        return None
    for n in range(len(parts), 0, -1):
        f = module_file(".".join(parts[:n]))
        if f is None:
            continue
        rest = parts[n:]
        if not rest or rest[0] in defined(f) or (f.name == "__init__.py" and module_file(".".join(parts[:n + 1]))):
            return None
        return f"{'.'.join(parts[:n])} has no {rest[0]}"
    return "no such module"


def doc_texts() -> list[tuple[str, str]]:
    texts = [(str(d.relative_to(REPO)), d.read_text()) for d in DOCS]
    for init in sorted(SRC.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        texts.append((str(init.relative_to(REPO)), doc))
    return texts


def test_docs_name_only_modules_that_exist() -> None:
    bad = []
    for where, text in doc_texts():
        for ref in sorted(set(DOTTED.findall(text))):
            if (why := dotted_problem(ref)) is not None:
                bad.append(f"{where}: {ref} ({why})")
        for path in sorted(set(SRC_PATH.findall(text))):
            if not (SRC / path).exists():
                bad.append(f"{where}: specbench/{path} (no such file)")
        for path in sorted(set(REPO_PATH.findall(text))):
            if not (REPO / path).exists():
                bad.append(f"{where}: {path} (no such file)")
    assert not bad, "stale references in the docs:\n" + "\n".join(bad)


def test_the_check_catches_a_moved_module() -> None:
    """The rule itself: a module that moved is reported, one that exists is not."""
    assert dotted_problem("decide.primary") is None
    assert dotted_problem("decide.primary.mix_interval") is None
    assert dotted_problem("metrics.decision.pool") == "metrics has no decision"
    assert dotted_problem("client.processes") is None  # the config key
    assert dotted_problem("decide.planner") is not None
    assert dotted_problem("decide.primary.no_such_function") == "decide.primary has no no_such_function"

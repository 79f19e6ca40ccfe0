#!/usr/bin/env python3
"""Extract the command-line flag names of an SGLang release from its own source, for offline validation.

    python scripts/sglang_flags.py 0.5.23 0.5.9      # rewrites specbench/data/sglang_flags.json

For each version it fetches the sglang wheel (`pip download sglang==VERSION --no-deps`, nothing is
installed) and reads, by AST, without importing sglang:
- every `add_argument("--flag", ...)` call in `sglang/srt/server_args.py` (all flags up to ~0.5.9, the
  hand-written ones after);
- since the arg_groups rework (0.5.2x), every field declared as `A[T, "help"]` or `A[T, Arg(...)]` in
  `ServerArgs` and in the namespaces of `sglang/srt/arg_groups/fields/*.py`, which
  `add_cli_args_from_dataclass` (`arg_groups/arg_utils.py`) turns into `--field-name`, or into
  `Arg(cli_name=...)` plus `Arg(aliases=[...])`; `Arg(no_cli=True)` fields have no flag.
`specbench validate` checks flag names against this list when SGLang is not importable.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "specbench" / "data" / "sglang_flags.json"
SOURCES = ("sglang/srt/server_args.py", "sglang/srt/arg_groups/fields/")


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def _field_flags(name: str, meta: ast.AST) -> list[str]:
    """Flags of one `A[T, meta]` field, as add_cli_args_from_dataclass derives them."""
    if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
        return ["--" + name.replace("_", "-")]
    if not (isinstance(meta, ast.Call) and getattr(meta.func, "id", None) == "Arg"):
        return []  # no Arg/help string: skipped by the CLI builder
    kw = {k.arg: k.value for k in meta.keywords if k.arg}
    if isinstance(kw.get("no_cli"), ast.Constant) and kw["no_cli"].value is True:
        return []
    cli = _strings(kw["cli_name"]) if "cli_name" in kw else ["--" + name.replace("_", "-")]
    return _negations(cli + (_strings(kw["aliases"]) if "aliases" in kw else []), kw.get("action"))


def _negations(flags: list[str], action: ast.AST | None) -> list[str]:
    """argparse.BooleanOptionalAction also accepts `--no-X` for every `--X`."""
    if getattr(action, "attr", getattr(action, "id", None)) != "BooleanOptionalAction":
        return flags
    return flags + ["--no-" + f[2:] for f in flags if f.startswith("--")]


def flags_in_source(text: str) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            action = next((k.value for k in node.keywords if k.arg == "action"), None)
            out |= set(_negations([s for a in node.args for s in _strings(a) if s.startswith("-")], action))
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                        and isinstance(stmt.annotation, ast.Subscript)
                        and getattr(stmt.annotation.value, "id", None) in ("A", "Annotated")
                        and isinstance(stmt.annotation.slice, ast.Tuple)
                        and len(stmt.annotation.slice.elts) >= 2):
                    out |= set(_field_flags(stmt.target.id, stmt.annotation.slice.elts[1]))
    return out


def flags_in_wheel(wheel: Path) -> list[str]:
    flags: set[str] = set()
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name == SOURCES[0] or (name.startswith(SOURCES[1]) and name.endswith(".py")):
                flags |= flags_in_source(z.read(name).decode())
    return sorted(f for f in flags if f.startswith("--"))


def download(version: str, dest: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"sglang=={version}", "-d",
                    str(dest)], check=True)
    return next(dest.glob(f"sglang-{version}-*.whl"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("versions", nargs="+", help="SGLang releases, e.g. 0.5.23 0.5.9")
    ap.add_argument("--wheel-dir", type=Path, help="use sglang-VERSION-*.whl files already here")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    data = {"source": "scripts/sglang_flags.py: flag names read from each sglang wheel's own source",
            "versions": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for v in a.versions:
            found = sorted(a.wheel_dir.glob(f"sglang-{v}-*.whl")) if a.wheel_dir else []
            wheel = found[0] if found else download(v, Path(tmp))
            data["versions"][v] = flags_in_wheel(wheel)
            print(f"sglang {v}: {len(data['versions'][v])} flags from {wheel.name}")
    a.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Tests are found by path (docs/architecture.md, "Tests"): the tests of `specbench/<package>/<module>.py` are in
`tests/<package>/test_<module>[_<aspect>].py`, where <module> is a module or sub-package anywhere under that
package (or the package itself, for its `__init__`). Folders that are not packages of specbench hold tests of
their own kind: whole runs (`runner`, also a package), the benchmark and script tests (named after the script
they test), the drafters, the harness and the repository's rules."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
FREE = {"runner", "harness", "repo"}  # whole runs, the test harness, the repository's rules: any name
NAMED_AFTER = {"benchmarks": REPO / "benchmarks", "scripts": REPO / "scripts", "drafters": REPO / "drafters"}


def module_names(folder: Path) -> set[str]:
    """Every module and sub-package name under `folder`, and the folder's own name."""
    names = {folder.name}
    for f in folder.rglob("*"):
        if f.suffix == ".py" and f.stem not in ("__init__", "__main__"):
            names.add(f.stem)
        elif f.is_dir() and f.name != "__pycache__":
            names.add(f.name)
    return names


def misplaced(tests: Path = TESTS, repo: Path = REPO) -> list[str]:
    bad = []
    packages = {p.name for p in (repo / "specbench").iterdir() if (p / "__init__.py").exists()}
    for f in sorted(tests.rglob("test_*.py")):
        rel = f.relative_to(tests)
        if len(rel.parts) != 2:
            bad.append(f"{rel}: not in a folder of tests/ (tests/<package>/test_<module>.py)")
            continue
        folder, stem = rel.parts[0], f.stem.removeprefix("test_")
        if folder in FREE:
            continue
        if folder in packages:
            names = module_names(repo / "specbench" / folder)
        elif folder in NAMED_AFTER:
            names = module_names(NAMED_AFTER[folder])
        else:
            bad.append(f"{rel}: tests/{folder}/ is neither a package of specbench nor one of "
                       f"{sorted(FREE | set(NAMED_AFTER))}")
            continue
        if not any(stem == n or stem.startswith(n + "_") for n in names):
            bad.append(f"{rel}: names no module of {folder}/ (test_<module>[_<aspect>].py)")
    return bad


def test_every_test_file_is_found_by_its_module_path() -> None:
    assert not (bad := misplaced()), "tests out of place:\n" + "\n".join(bad)


def test_the_rule_catches_a_misplaced_file(tmp_path: Path) -> None:
    (tmp_path / "specbench" / "plan").mkdir(parents=True)
    (tmp_path / "specbench" / "plan" / "__init__.py").write_text("")
    (tmp_path / "specbench" / "plan" / "windows.py").write_text("")
    for name in ("plan/test_windows.py", "plan/test_windows_cost.py", "plan/test_prompts.py", "test_flat.py",
                 "elsewhere/test_windows.py"):
        (tmp_path / "tests" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tests" / name).write_text("")
    bad = misplaced(tmp_path / "tests", tmp_path)
    assert [b.split(":")[0] for b in bad] == ["elsewhere/test_windows.py", "plan/test_prompts.py", "test_flat.py"]

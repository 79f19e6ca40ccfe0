"""Mutation score of the statistics, metrics and verdict code against the fast tests.

    python -m benchmarks.mutation [--keep DIR] [--max-children N] [--only PATH ...]

mutmut 3 (the `dev` extra) changes one operator, constant or call at a time in the pure statistics of
specbench/decide/ (MUTATE below), specbench/metrics/ and specbench/report/verdict.py, and runs the fast tests
that exercise the mutated
function (its own coverage map) against each mutant. A mutant is killed when a test fails or times out;
a survivor is a change no test notices. The work happens in a scratch copy of the repository (mutmut
writes a `mutants/` tree next to the sources), so the checkout is never modified. Every test run is
niced: the machine is shared.

Prints the score (killed / (killed + survived), where a mutant that no selected test calls counts as
survived) per module and the surviving mutants with their diffs.
Exit code 0 when the score reaches --goal (default 0.85), 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTATE = ["specbench/decide/stats.py", "specbench/decide/crossing.py", "specbench/decide/decision.py",
          "specbench/decide/intervals.py", "specbench/decide/stopping.py", "specbench/decide/adaptive.py",
          "specbench/decide/change.py", "specbench/metrics/*", "specbench/report/verdict.py"]
# The test files that exercise these modules; only their in-process tests run (no engine, no stand-in
# server, no Slurm: see MARKERS), and each mutant runs only those of them that call the mutated function.
TESTS = [
    "tests/decide/test_stats.py",
    "tests/metrics/test_metrics.py",
    "tests/report/test_verdict.py",
    "tests/metrics/test_breakeven.py",
    "tests/metrics/test_gates.py",
    "tests/metrics/test_warnings_whole.py",
    "tests/metrics/test_acceptance_reconcile.py",
    "tests/report/test_compare.py",
    "tests/decide/test_intervals_launches.py",
    "tests/report/test_document.py",
    "tests/metrics/test_warnings.py",
    "tests/metrics/test_acceptance.py",
    "tests/metrics/test_cells.py",
    "tests/metrics/test_reconcile.py",
]
MARKERS = "not engine and not standin and not slurm"
COPY = ["specbench", "drafters", "tests", "pyproject.toml"]
KILLED = {"killed", "timeout", "segfault", "caught by type check"}
# A mutant no test even calls is not killed either: it counts against the score.
SURVIVED = {"survived", "no tests"}


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{x}"' for x in items) + "]"


def prepare(work: Path, mutate: list[str]) -> None:
    for name in COPY:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, work / name)
    tests = [t for t in TESTS if (REPO / t).exists()]
    config = (f"\n[tool.mutmut]\nsource_paths = [\"specbench\"]\nonly_mutate = {toml_list(mutate)}\n"
              f"also_copy = {toml_list(['drafters', 'tests'])}\n"
              f"pytest_add_cli_args_test_selection = {toml_list(tests)}\n"
              f"pytest_add_cli_args = {toml_list(['-p', 'no:cacheprovider', '-m', MARKERS, '-q'])}\n"
              "use_git_change_detection = false\n")
    with open(work / "pyproject.toml", "a") as fh:
        fh.write(config)


def mutmut(work: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    # mutmut puts mutants/ first on sys.path itself; an inherited PYTHONPATH (e.g. a worktree) must not
    # shadow it, and the editable install behind it is never reached.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(["nice", "-n", "10", sys.executable, "-m", "mutmut", *args], cwd=work, env=env,
                          text=True, capture_output=True, check=check)


def parse_results(text: str) -> dict[str, str]:
    """`mutmut results --all true` lines: `    <mutant name>: <status>`."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"\s*(\S+__mutmut_\d+):\s*(.+?)\s*$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def module_of(mutant: str) -> str:
    return mutant.split(".x_")[0].split(".xǁ")[0]


def function_sources(path: Path) -> dict[str, str]:
    """Every function and method of a mutated file by name (mutmut writes `<f>__mutmut_orig` and
    `<f>__mutmut_<n>` side by side), dedented."""
    text = path.read_text()
    out: dict[str, str] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name:
            out[node.name] = textwrap.dedent(ast.get_source_segment(text, node, padded=True) or "")
    return out


def survivor_diffs(work: Path, names: list[str]) -> dict[str, str]:
    """A unified diff per mutant against its unmutated function: what `mutmut show` prints, computed in
    one process (mutmut show starts an interpreter per mutant)."""
    sources: dict[str, dict[str, str]] = {}
    out: dict[str, str] = {}
    for name in names:
        module, _, func = name.rpartition(".")
        if module not in sources:
            sources[module] = function_sources(work / "mutants" / (module.replace(".", "/") + ".py"))
        funcs = sources[module]
        orig_name = func.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"
        orig, mutant = funcs.get(orig_name, ""), funcs.get(func, "")
        mutant = mutant.replace(func, orig_name, 1)
        out[name] = "".join(difflib.unified_diff(orig.splitlines(True), mutant.splitlines(True),
                                                 f"{module} (original)", f"{name}", n=2))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    ap.add_argument("--max-children", type=int, default=2, help="parallel test runs (default 2)")
    ap.add_argument("--goal", type=float, default=0.85)
    ap.add_argument("--only", nargs="+", metavar="PATH", default=MUTATE,
                    help="mutate only these files (globs as in mutmut's only_mutate); default: the whole scope")
    args = ap.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="specbench-mutation-"))
    if args.keep and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    try:
        prepare(work, args.only)
        # mutants/ must exist when the interpreter starts: a sys.path entry that was missing then is cached
        # as "nothing here" and the unmutated editable install is imported instead (every mutant "survives")
        (work / "mutants").mkdir()
        run = mutmut(work, "run", "--max-children", str(args.max_children), check=False)
        if run.returncode != 0:
            print(run.stdout[-4000:], run.stderr[-4000:], sep="\n", file=sys.stderr)
            return 2
        results = parse_results(mutmut(work, "results", "--all", "true").stdout)
        if not results:
            print("mutmut reported no mutants", file=sys.stderr)
            return 2
        per_module: dict[str, Counter[str]] = {}
        for name, status in results.items():
            per_module.setdefault(module_of(name), Counter())[status] += 1
        print(f"{'module':<34} {'mutants':>7} {'killed':>7} {'survived':>8} {'other':>6} {'score':>6}")
        k_all = s_all = 0
        for mod, c in sorted(per_module.items()):
            k = sum(c[s] for s in KILLED)
            s = sum(c[s] for s in SURVIVED)
            k_all, s_all = k_all + k, s_all + s
            other = sum(c.values()) - k - s
            print(f"{mod:<34} {sum(c.values()):>7} {k:>7} {s:>8} {other:>6} {k / max(1, k + s):>6.1%}")
        score = k_all / max(1, k_all + s_all)
        print(f"{'total':<34} {len(results):>7} {k_all:>7} {s_all:>8} {len(results) - k_all - s_all:>6} "
              f"{score:>6.1%}")
        others = Counter(s for s in results.values() if s not in KILLED | SURVIVED)
        if others:
            print("not counted (mutmut could not run the mutant):", dict(others))
        survivors = sorted(n for n, s in results.items() if s in SURVIVED)
        if survivors:
            print(f"\nsurviving mutants ({len(survivors)}):")
            for name, diff in survivor_diffs(work, survivors).items():
                print(f"\n## {name} ({results[name]})\n{diff.strip()}")
        return 0 if score >= args.goal else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

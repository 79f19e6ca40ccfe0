"""Code, tests and docs cite only what a reader of this repository can open (a file in it, or a public URL)."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Material that is not in the repository (written split so that this file does not match itself).
UNREACHABLE = ("REFERENCE" + ".md", "the seed" + "'s", "../" + "shared/")


def test_no_citation_of_material_outside_the_repository() -> None:
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    found = []
    for name in files:
        path = REPO / name
        if path.suffix not in (".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".txt", ".cfg") or not path.is_file():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if any(u in line for u in UNREACHABLE):
                found.append(f"{name}:{n}: {line.strip()[:100]}")
    assert not found, "\n".join(found)

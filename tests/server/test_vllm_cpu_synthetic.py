"""Issue 51 item 10: the wheel holds the vLLM-CPU forcing plugin, its module and the dist-info whose entry
point vLLM loads, where specbench/server/engines/vllm.py looks for them (CPU_SYNTHETIC_PLUGIN). Built
offline with the venv's setuptools from a copy of the sources (the build writes build/ and egg-info)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from specbench.server.engines.vllm import CPU_SYNTHETIC_PLUGIN

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_wheel_holds_the_plugin_and_its_dist_info(tmp_path: Path) -> None:
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("specbench", "drafters"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "-w", str(tmp_path / "dist"), "--no-deps",
                        "--no-build-isolation", "--no-index", "-q"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    plugin = CPU_SYNTHETIC_PLUGIN.relative_to(REPO).as_posix()
    shipped = {p.relative_to(REPO).as_posix() for p in CPU_SYNTHETIC_PLUGIN.rglob("*") if p.is_file()
               and "__pycache__" not in p.parts}
    assert {f"{plugin}/specbench_vllm_cpu_synthetic.py",
            f"{plugin}/specbench_vllm_cpu_synthetic-1.0.dist-info/entry_points.txt"} <= shipped
    assert shipped <= names, sorted(shipped - names)
    assert "specbench/data/sglang_flags.json" in names

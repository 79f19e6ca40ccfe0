"""Filesystem faults: each ends in one `error:` line, never a traceback, with the engines stopped and
nothing already measured lost. A run directory that cannot be written is refused before anything is
launched; a write that fails mid-run (a full disk) says what was kept and how to resume, and the resume
works once space is back.

How the faults are made real: a path through a regular file fails for everyone (ENOTDIR). A read-only
folder is chmod 0555 for an ordinary user; root passes permission checks, so for root it is made
immutable (`chattr +i`, which stops root too), and the fixture checks that a write really fails. The full
disk is ENOSPC from the record writer's os.write after a set number of records (the first failing write
puts half its line on disk first, as a disk filling up mid-line does): deterministic, in-process, and the
same errno a full disk gives.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from specbench.cli import main
from specbench.records import rundir
from specbench.server.process import EngineProcess
from tests.conftest import make_model_dir, needs_standin, standin_config, unavailable, write_config


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def one_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the engines started during the test (a refused run directory must start none)."""
    started: list[str] = []
    real = EngineProcess.start

    def start(self: EngineProcess) -> None:
        started.append(self.name)
        real(self)

    monkeypatch.setattr(EngineProcess, "start", start)
    return started


def writable(folder: Path) -> bool:
    try:
        (folder / ".probe").write_text("x")
    except OSError:
        return False
    (folder / ".probe").unlink()
    return True


@pytest.fixture
def make_read_only() -> Iterator[Callable[[Path], None]]:
    """Make a folder really refuse new files for this user (see the module docstring); undone afterwards."""
    done: list[Path] = []

    def apply(folder: Path) -> None:
        if os.geteuid() != 0:
            folder.chmod(0o555)
        elif shutil.which("chattr"):
            subprocess.run(["chattr", "+i", str(folder)], capture_output=True)
        done.append(folder)
        if writable(folder):
            unavailable(f"cannot make {folder} read-only for uid {os.geteuid()} (chattr +i unsupported here?)")

    yield apply
    for folder in done:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
        folder.chmod(0o755)


def config(tmp_path: Path, port: int, **sweep: Any) -> Path:
    data = standin_config(make_model_dir(tmp_path / "model"), port, sweep=sweep or None)
    return write_config(tmp_path / "config.yaml", data)


# -- refused before any launch ---------------------------------------------------------------------------
@needs_standin
def test_out_under_a_regular_file(tmp_path, port, capsys, launches, no_survivors):
    (tmp_path / "file").write_text("not a folder")
    out = tmp_path / "file" / "run"
    code, err = run_cli(["run", str(config(tmp_path, port)), "--out", str(out), "--skip-preflight"], capsys)
    line = one_error_line(err)
    assert code == 2 and f"--out: cannot create {out}: {tmp_path / 'file'} is a file, not a directory" in line
    assert launches == []
    no_survivors()


@needs_standin
def test_read_only_output_directory(tmp_path, port, capsys, launches, make_read_only, no_survivors):
    ro = tmp_path / "ro"
    ro.mkdir()
    make_read_only(ro)
    code, err = run_cli(["run", str(config(tmp_path, port)), "--out", str(ro / "run"), "--skip-preflight"], capsys)
    line = one_error_line(err)
    assert code == 2 and f"--out: cannot write to {ro}" in line and "nothing was launched" in line
    assert launches == [] and not (ro / "run").exists()
    no_survivors()


@needs_standin
def test_resume_on_a_read_only_run_directory(tmp_path, port, capsys, launches, make_read_only, no_survivors):
    cfg, out = config(tmp_path, port, concurrency=[1]), tmp_path / "run"
    assert run_cli(["run", str(cfg), "--out", str(out), "--skip-preflight"], capsys)[0] == 0
    before = (out / "requests.jsonl").read_bytes(), (out / "run.json").read_bytes()
    launches.clear()
    make_read_only(out)
    code, err = run_cli(["run", "--resume", str(out), "--skip-preflight"], capsys)
    line = one_error_line(err)
    assert code == 2 and f"--resume: cannot write to {out}" in line
    assert launches == []
    assert ((out / "requests.jsonl").read_bytes(), (out / "run.json").read_bytes()) == before  # untouched
    code, err = run_cli(["report", str(out)], capsys)  # rewriting the analysis there fails in one line too
    assert code == 1 and str(out) in one_error_line(err)
    no_survivors()


# -- a full disk in the middle of a run ------------------------------------------------------------------
class FullDisk:
    """`os` for specbench.records.rundir, whose os.write fails with ENOSPC once `records` writes have succeeded.
    The first failing call writes half its data (a record torn by the disk filling up), every later one
    writes nothing."""

    def __init__(self, records: int):
        self.left = records
        self.torn = False

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def write(self, fd: int, data: Any) -> int:
        if self.left > 0:
            self.left -= 1
            return os.write(fd, data)
        if not self.torn:
            self.torn = True
            return os.write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@needs_standin
def test_full_disk_mid_run_then_resume(tmp_path, port, capsys, monkeypatch, launches, no_survivors):
    cfg, out = config(tmp_path, port), tmp_path / "run"
    disk = FullDisk(records=3)  # base: C=1 (2 requests + its window), then the disk is full at a C=2 request
    monkeypatch.setattr(rundir, "os", disk)
    code, err = run_cli(["run", str(cfg), "--out", str(out), "--skip-preflight"], capsys)
    line = one_error_line(err)
    assert code == 1, err
    assert f"{out / 'requests.jsonl'}: No space left on device" in line
    assert "every engine was stopped" in line and f"kept in {out}" in line
    assert line.endswith(f"specbench run --resume {out}")
    assert disk.torn and launches == ["base"]  # the second variant was never launched
    no_survivors()  # the engine was stopped on the way out
    raw = (out / "requests.jsonl").read_bytes()
    assert raw.endswith(b"\n") and len(raw.splitlines()) == 2  # the torn record was cut off again
    assert len((out / "windows.jsonl").read_bytes().splitlines()) == 1
    assert json.loads((out / "run.json").read_text())["variants"]["base"]["status"] == "interrupted"

    monkeypatch.undo()  # space is free again
    code, err = run_cli(["run", "--resume", str(out), "--skip-preflight"], capsys)
    assert code == 0, err
    cells = pd.read_csv(out / "cells.csv")
    assert len(cells) == 4 and cells["valid"].all()  # both prompts, 1 pass at C=1 and 3 at C=2
    assert (cells["n_requests"] == cells["concurrency"].map({1: 2, 2: 6})).all()
    assert not (out / "requests.jsonl.torn").exists()  # nothing torn was left for the resume to repair
    no_survivors()

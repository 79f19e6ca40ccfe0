"""`specbench history`: runs of one matrix in time order, changes outside the noise flagged, the newest
run's regression as the exit code (compare's rule), a refusal when the sweep points differ."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from specbench.cli import main
from tests.fixtures_report import make_run


def stand_in(path: Path, created: str, ngram_scale: float, ngram_fp: str) -> Path:
    """A run of the fixture matrix (deterministic speeds); the n-gram speedups scaled by `ngram_scale`."""
    make_run(path, ngram_scale=ngram_scale, run_id=path.name)
    meta = json.loads((path / "run.json").read_text())
    meta["created"] = created
    meta["variants"]["ngram"]["fingerprint"] = ngram_fp
    (path / "run.json").write_text(json.dumps(meta))
    return path


@pytest.fixture
def three(tmp_path: Path) -> list[Path]:
    """The n-gram setting changed before the second run (slower by 30%), the third run repeats the second."""
    return [stand_in(tmp_path / "r3", "2026-05-12T00:00:00+00:00", 0.7, "ngram-k2"),
            stand_in(tmp_path / "r1", "2026-05-10T00:00:00+00:00", 1.0, "ngram-k4"),
            stand_in(tmp_path / "r2", "2026-05-11T00:00:00+00:00", 0.7, "ngram-k2")]


def test_the_changed_setting_is_flagged_between_runs_1_and_2(three: list[Path], tmp_path: Path, capsys) -> None:
    out = tmp_path / "hist"
    code = main(["history", *map(str, three), "--variant", "ngram", "--out", str(out)])
    got = capsys.readouterr()
    md = got.out
    # the newest run (r3) equals the one before it, but its intervals (+-0.05) could not have seen a drop of
    # 9.75%: underpowered, not "no regression" (issue 41)
    assert code == 3 and "underpowered" in got.err and "Not a finding" in md
    # time order, not argument order, with the drafter's fingerprint of each run
    assert md.index("| 1 | r1 |") < md.index("| 2 | r2 |") < md.index("| 3 | r3 |")
    assert "| vllm 0.0.0-test | - |" in md  # no pooled launch variance in these runs
    assert "| ngram-k4 |" in md.split("| 2 | r2")[0] and "| ngram-k2 |" in md.split("| 2 | r2")[1]
    assert "| code\\|in-\\|out64\\|c1\\|t0 | 1.60 [1.55, 1.65] | 1.12 [1.07, 1.17] ▼ | 1.12 [1.07, 1.17] |" in md
    changes = md.split("### Changes outside the noise")[1].split("###")[0]
    assert "run 1 → 2: regressed" in changes and "run 2 → 3" not in changes
    assert "code|in-|out64|c1|t0" in changes  # 1.60 -> 1.12, intervals +-0.05 apart
    assert (out / "history.md").read_text() == md
    png = out / "history-ngram.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_exit_1_when_the_newest_run_regressed(tmp_path: Path, capsys) -> None:
    runs = [stand_in(tmp_path / "a", "2026-05-10T00:00:00+00:00", 1.0, "k4"),
            stand_in(tmp_path / "b", "2026-05-11T00:00:00+00:00", 1.0, "k4"),
            stand_in(tmp_path / "c", "2026-05-12T00:00:00+00:00", 0.7, "k2")]
    assert main(["history", *map(str, runs), "--variant", "ngram"]) == 1
    err = capsys.readouterr().err
    assert "regressed in the newest run" in err
    assert (runs[2] / "history" / "history.md").exists()  # default: next to the newest run


def test_refuses_runs_of_different_sweeps(tmp_path: Path, capsys) -> None:
    a = stand_in(tmp_path / "a", "2026-05-10T00:00:00+00:00", 1.0, "k4")
    b = stand_in(tmp_path / "b", "2026-05-11T00:00:00+00:00", 1.0, "k4")
    cells = pd.read_csv(b / "cells.csv")
    cells[cells["concurrency"] != 16].to_csv(b / "cells.csv", index=False)
    assert main(["history", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: history:") and "do not share the sweep points" in err
    assert len(err.splitlines()) == 1


def test_the_pooled_launch_variance_a_run_carried_is_shown(three: list[Path], capsys) -> None:
    from specbench.stores import variance_history

    cal = variance_history.Calibration(rel_var=0.0025, df=4, launches=5, cells=8, hardware={}, engine="vllm",
                                  model="m", created="2026-05-11", source_run="cal1")
    variance_history.save(cal, three[2] / variance_history.FILE)  # r2
    assert main(["history", *map(str, three), "--variant", "ngram"]) == 3  # unchanged, underpowered (above)
    md = capsys.readouterr().out
    assert "| 2 | r2 | 2026-05-11T00:00:00+00:00 | vllm 0.0.0-test | CV 5.0%, df 4 |" in md


class _Torn:
    """A file whose write stops halfway with an error: what a crash or a full disk does to a write."""

    def __init__(self, f) -> None:
        self.f = f

    def __enter__(self) -> _Torn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()

    def write(self, data) -> int:
        self.f.write(data[: len(data) // 2])
        self.f.flush()
        raise OSError("disk full")

    def __getattr__(self, name: str):
        return getattr(self.f, name)


def test_a_history_write_that_fails_midway_leaves_the_old_history_whole(tmp_path: Path, monkeypatch) -> None:
    """variance_history.save writes a temporary file and renames it: a write that fails halfway leaves the
    previous calibration readable, never half a JSON file, and no temporary file behind."""
    import io

    from specbench.stores import variance_history

    path = tmp_path / "h" / variance_history.FILE
    old = variance_history.Calibration(rel_var=0.0025, df=4, launches=5, cells=8, hardware={}, engine="vllm",
                                       model="m", created="2026-05-11", source_run="old")
    variance_history.save(old, path)
    real_open = io.open
    monkeypatch.setattr(io, "open", lambda *a, **k: _Torn(real_open(*a, **k)))
    with pytest.raises(OSError, match="disk full"):
        variance_history.save(variance_history.Calibration(**{**old.__dict__, "source_run": "new"}), path)
    monkeypatch.undo()
    kept = variance_history.load(path)
    assert kept is not None and (kept.source_run, kept.rel_var, kept.launches) == ("old", 0.0025, 5)
    assert [p.name for p in path.parent.iterdir()] == [variance_history.FILE]

"""Data safety of the run directory: append + flush one record at a time, a torn last line tolerated and
repaired on resume, derived files replaced atomically, nothing overwritten without --resume/--force, and
--force setting earlier raw data aside. Plus what must never be in a run directory: the API key, or a path
outside it."""

from __future__ import annotations

import json
import os
import secrets

import pandas as pd
import pytest

from specbench.cli import main
from specbench.config import parse_config
from specbench.records.rundir import JsonlAppender, RunDir, atomic_write, read_jsonl
from specbench.runner import RunOptions, run_matrix
from specbench.shared.errors import RunDirError
from specbench.shared.schema import RequestRecord, WindowRecord
from tests.conftest import make_model_dir, needs_standin, standin_config, write_config

BASE_ONLY = [{"name": "base", "drafter": "autoregressive", "baseline": True}]


def rec(i: int, window: str = "w|r1") -> RequestRecord:
    return RequestRecord(variant="v", cell_id="c", point_id="p", window_id=window, category="code",
                         prompt_id=f"p{i}", output_len=8, concurrency=1, repeat=1, index=i, t_send=1000.0 + i)


# -- JSONL: append, flush, torn tail -------------------------------------------------------------------------
def test_each_record_is_on_disk_as_soon_as_it_is_appended(tmp_path):
    path = tmp_path / "requests.jsonl"
    app = JsonlAppender(path)
    try:
        for i in range(3):
            app.append(rec(i))
            # another reader (or a crash right now) sees every record appended so far, whole
            assert [r.index for r in read_jsonl(path, RequestRecord)] == list(range(i + 1))
    finally:
        app.close()


def test_torn_last_line_is_tolerated_but_a_bad_middle_line_is_an_error(tmp_path):
    path = tmp_path / "requests.jsonl"
    good = [rec(i).model_dump_json() for i in range(3)]
    path.write_text("\n".join(good) + "\n" + good[0][: len(good[0]) // 2])  # crash mid-append
    assert [r.index for r in read_jsonl(path, RequestRecord)] == [0, 1, 2]
    path.write_text(good[0] + "\n" + good[1][:40] + "\n" + good[2] + "\n")  # damage in the middle: refuse
    with pytest.raises(RunDirError, match="line 2"):
        read_jsonl(path, RequestRecord)


def test_appender_moves_a_torn_fragment_aside_before_appending(tmp_path):
    path = tmp_path / "requests.jsonl"
    full = rec(0).model_dump_json()
    fragment = rec(1).model_dump_json()[:50]
    path.write_text(full + "\n" + fragment)
    app = JsonlAppender(path)
    app.append(rec(2))
    app.close()
    assert [r.index for r in read_jsonl(path, RequestRecord)] == [0, 2]  # parses whole: no torn line inside
    assert (tmp_path / "requests.jsonl.torn").read_text() == fragment + "\n"  # kept, never deleted


def test_appender_keeps_a_complete_last_record_missing_only_its_newline(tmp_path):
    path = tmp_path / "requests.jsonl"
    path.write_text(rec(0).model_dump_json() + "\n" + rec(1).model_dump_json())  # crash before the "\n"
    app = JsonlAppender(path)
    app.append(rec(2))
    app.close()
    assert [r.index for r in read_jsonl(path, RequestRecord)] == [0, 1, 2]
    assert not (tmp_path / "requests.jsonl.torn").exists()


def test_appended_lines_are_model_dump_json_byte_for_byte(tmp_path):
    """The appender writes the serializer's bytes without the str round trip (issue 21): every line must
    stay exactly `model_dump_json()` + newline, for text, floats and payloads of every kind."""
    from specbench.shared.schema import SpecDetails

    spec = SpecDetails(verify_steps=3, accepted_drafts=1, proposed_drafts=6, accept_histogram=[1, 1, 0],
                       reported_accept_length=1.5, source="vllm", raw={"ü": [1.0, None, "✓\n"], "n": 1e16})
    records = [
        rec(0).model_copy(update={"text": "héllo \"wörld\" ✓ \u2028 \x1f </script> 🙂", "ttft_s": 1e-05,
                                  "chunk_offsets_s": [1e-07, 0.1, 1e16, 1e22, 123456789.123, 5e-324, -0.0],
                                  "chunk_tokens": [1, 2, 3], "token_ids": [0, 2**40, 151_000], "spec": spec}),
        rec(1).model_copy(update={"token_ids": None, "text": None, "error": "HTTP 500: \u00e9", "rate": 2.5}),
        WindowRecord(window_id="w|r1", variant="v", cell_id="c", point_id="p", repeat=1, t_start=1.5, t_end=2.0,
                     n_requests=2, counters={"a": float("inf")}, extra={"client": {"cpu": 0.5}}),
    ]
    path = tmp_path / "requests.jsonl"
    app = JsonlAppender(path)
    for r in records:
        app.append(r)
    app.close()
    assert path.read_bytes() == b"".join((r.model_dump_json() + "\n").encode() for r in records)


def test_a_record_that_cannot_be_encoded_is_not_written(tmp_path):
    path = tmp_path / "requests.jsonl"
    app = JsonlAppender(path)
    app.append(rec(0))
    with pytest.raises(ValueError):  # a lone surrogate has no UTF-8 form (the client escapes them before)
        app.append(rec(1).model_copy(update={"text": "a\ud800"}))
    app.append(rec(2))
    app.close()
    assert [r.index for r in read_jsonl(path, RequestRecord)] == [0, 2]


# -- atomic derived files --------------------------------------------------------------------------------------
def test_atomic_write_leaves_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "cells.csv"
    path.write_text("old,complete\n")

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        atomic_write(path, "new,half")
    assert path.read_text() == "old,complete\n"
    assert [p.name for p in tmp_path.iterdir()] == ["cells.csv"]  # no temporary file left behind


@needs_standin
def test_run_resume_force_and_atomic_derived_files(tmp_path, port, no_survivors, capsys):
    """One small run, then: derived files replaced by rename; a torn tail tolerated on --resume; a non-empty
    run dir refused without --resume/--force; --force twice keeps both earlier raw data sets aside."""
    model = make_model_dir(tmp_path / "model")
    cfg_dict = standin_config(model, port, variants=BASE_ONLY)
    cfg = parse_config(cfg_dict)
    out = tmp_path / "run"
    run_matrix(cfg, RunOptions(out=out, skip_preflight=True))
    rd = RunDir(out)
    assert len(pd.read_csv(rd.cells)) == 2

    # derived files are replaced (new inode: written elsewhere, renamed), never rewritten in place
    derived = [p for p in (rd.cells, rd.break_even, rd.meta, out / "report.md", out / "report.html") if p.exists()]
    inodes = {p: p.stat().st_ino for p in derived}
    main(["report", str(out)])
    capsys.readouterr()
    for p in derived:
        if p != rd.meta:
            assert p.stat().st_ino != inodes[p], f"{p.name} was rewritten in place"

    # a crash in the middle of the C=2 window: its WindowRecord torn mid-write, a request record torn too
    windows = rd.windows.read_text().splitlines()
    requests = rd.requests.read_text().splitlines()
    # both prompts in every window, in the passes its level needs: 1 at C=1, 3 at C=2 (plan.category_passes)
    assert len(windows) == 2 and len(requests) == 8
    rd.windows.write_text(windows[0] + "\n" + windows[1][:30])
    rd.requests.write_text("\n".join(requests) + "\n" + requests[-1][:25])
    meta = json.loads(rd.meta.read_text())
    meta["variants"]["base"]["status"] = "interrupted"
    rd.meta.write_text(json.dumps(meta))
    run_matrix(cfg, RunOptions(out=out, resume=True, skip_preflight=True))
    cells = pd.read_csv(rd.cells)
    assert len(cells) == 2 and cells["valid"].all() and list(cells["n_requests"]) == [2, 6]
    assert len(rd.window_records()) == 2
    assert (out / "windows.jsonl.torn").exists() and (out / "requests.jsonl.torn").exists()
    raw_before_force = rd.requests.read_bytes()

    # a non-empty run dir is refused without --resume/--force: one line, exit 2, nothing touched
    cfg_path = write_config(tmp_path / "config.yaml", cfg_dict)
    capsys.readouterr()
    code = main(["run", str(cfg_path), "--out", str(out), "--skip-preflight"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("error:") and "--force" in err[0]
    assert rd.requests.read_bytes() == raw_before_force

    # --force measures again and keeps the earlier raw data aside (twice in a row: no collision)
    run_matrix(cfg, RunOptions(out=out, force=True, skip_preflight=True))
    run_matrix(cfg, RunOptions(out=out, force=True, skip_preflight=True))
    asides = sorted(p for p in out.iterdir() if p.name.startswith("previous-"))
    assert len(asides) == 2
    assert raw_before_force in [(a / "requests.jsonl").read_bytes() for a in asides]
    assert all((a / "requests.jsonl").exists() and (a / "run.json").exists() for a in asides)
    assert len(RunDir(out).request_records()) == 8  # the new run's own records
    no_survivors()


# -- secrets and paths -------------------------------------------------------------------------------------------
@needs_standin
def test_api_key_is_used_but_never_written(tmp_path, port, monkeypatch, no_survivors):
    """The key comes from the variable engine.api_key_env names; the engine (stand-in) requires it on every
    /v1 call, readiness probe included; its value appears nowhere in the run directory."""
    key = "sk-specbench-" + secrets.token_hex(16)
    monkeypatch.setenv("SPECBENCH_TEST_API_KEY", key)
    model = make_model_dir(tmp_path / "model")
    cfg = standin_config(model, port, variants=BASE_ONLY, engine={"api_key_env": "SPECBENCH_TEST_API_KEY"})
    cfg["engine"]["command"] += ["--api-key-env", "SPECBENCH_TEST_API_KEY"]
    token = "tok-" + secrets.token_hex(8)
    cfg["engine"]["env"]["MY_SERVICE_TOKEN"] = token  # a secret-looking engine.env name is redacted in commands
    out = tmp_path / "run"
    res = run_matrix(parse_config(cfg), RunOptions(out=out, skip_preflight=True))
    assert res.status == {"base": "done"}
    assert all(r.error is None for r in RunDir(out).request_records())  # the server accepted the key
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "server.log" for p in files) and any(p.name == "requests.jsonl" for p in files)
    for p in files:
        assert key.encode() not in p.read_bytes(), f"API key written to {p}"
    assert "SPECBENCH_TEST_API_KEY" in (out / "config.yaml").read_text()  # only the variable's name
    for name in ("command.json", "command.sh"):
        text = (out / "variants" / "base" / name).read_text()
        assert token not in text and "<redacted>" in text
    no_survivors()


def test_variant_dirs_cannot_escape_the_run_directory(tmp_path):
    rd = RunDir(tmp_path / "run")
    assert rd.variant_dir("ngram") == (tmp_path / "run" / "variants" / "ngram").resolve()
    for name in ("../../etc", "..", "a/../../../b", "/abs"):
        with pytest.raises(RunDirError, match="escapes"):
            rd.variant_dir(name)

"""The columnar raw store (specbench/records/columnar.py): written per completed window by the runner's sink, rebuilt
from requests.jsonl when missing or stale, and read one cell at a time with only the columns asked for."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq

from specbench.records.columnar import open_store, window_path
from specbench.records.rundir import RunDir
from specbench.runner.session import RecordSink
from specbench.shared.schema import RequestRecord, WindowRecord

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "synthetic-run"


def copy_run(tmp_path: Path) -> RunDir:
    shutil.copytree(GOLDEN, tmp_path / "run")
    return RunDir(tmp_path / "run")


def measured(rd: RunDir) -> list[tuple[str, int, float]]:
    return sorted((r.window_id, r.index, r.t_send) for r in rd.request_records() if not r.warmup
                  and r.window_id in {w.window_id for w in rd.window_records()})


def test_rebuilt_from_jsonl_holds_exactly_the_measured_requests(tmp_path: Path) -> None:
    """The golden run has a warmup request, a superseded attempt and an unfinished window: none is stored."""
    rd = copy_run(tmp_path)
    assert not (rd.path / "columnar").exists()
    store = open_store(rd)
    assert all(window_path(rd, w.window_id).exists() for w in rd.window_records())
    df = store.frame(columns=["window_id", "index", "t_send"])
    assert list(df.columns) == ["window_id", "index", "t_send"]
    assert sorted(zip(df.window_id, df["index"], df.t_send)) == measured(rd)
    assert len(df) < len(rd.request_records(superseded=True))


def test_a_cell_frame_has_the_records_values(tmp_path: Path) -> None:
    rd = copy_run(tmp_path)
    store = open_store(rd)
    cell = store.cell_ids()[-1]
    df = store.cell_frame(cell, ["index", "chunk_offsets_s", "chunk_tokens", "token_ids", "spec", "ttft_s"])
    recs = {r.index: r for r in rd.request_records() if r.cell_id == cell and r.repeat == 1}
    row = df.iloc[0]
    rec = recs[int(row["index"])]
    assert list(row.chunk_offsets_s) == rec.chunk_offsets_s and list(row.chunk_tokens) == rec.chunk_tokens
    assert list(row.token_ids) == rec.token_ids and row.ttft_s == rec.ttft_s
    assert row.spec == (rec.spec.model_dump() if rec.spec else None)
    assert set(df.cell_id if "cell_id" in df else [cell]) == {cell}


def test_stale_file_is_rebuilt_and_a_torn_tail_is_skipped(tmp_path: Path) -> None:
    rd = copy_run(tmp_path)
    open_store(rd)
    w = rd.window_records()[0]
    path = window_path(rd, w.window_id)
    other = rd.window_records()[1]
    shutil.copy(window_path(rd, other.window_id), path)  # another window's content under this name
    with open(rd.requests, "a") as f:
        f.write('{"run_id":"x","variant":"autoregr')  # torn: a crash mid-append
    store = open_store(rd)
    assert pq.read_schema(path).metadata[b"specbench.window_id"] == w.window_id.encode()
    assert sorted(store.frame([w.cell_id], ["window_id"]).window_id.unique()) == sorted(
        x.window_id for x in rd.window_records() if x.cell_id == w.cell_id)


def rec(window: str, index: int, t_send: float) -> RequestRecord:
    return RequestRecord(variant="v", cell_id="v|p", point_id="p", window_id=window, category="c", prompt_id="x",
                         output_len=2, concurrency=1, repeat=1, index=index, t_send=t_send, e2e_s=1.0,
                         chunk_offsets_s=[0.1, 0.2], chunk_tokens=[1, 1], output_tokens=2)


def win(window: str, t_start: float) -> WindowRecord:
    return WindowRecord(window_id=window, variant="v", cell_id="v|p", point_id="p", repeat=1, t_start=t_start,
                        t_end=t_start + 2, n_requests=1)


def test_sink_writes_the_window_file_once_the_window_record_is_on_disk(tmp_path: Path) -> None:
    rd = RunDir(tmp_path)
    sink = RecordSink.open(rd, "r1")
    sink.request(rec("v|p|r1", 0, 5.0))  # an abandoned attempt (sent before the completed one started)
    sink.request(rec("v|p|r1", 0, 20.0))
    assert not window_path(rd, "v|p|r1").exists()
    sink.window(win("v|p|r1", 10.0))
    sink.close()
    assert pq.read_table(window_path(rd, "v|p|r1")).column("t_send").to_pylist() == [20.0]


def test_a_failed_columnar_write_loses_nothing(tmp_path: Path, monkeypatch) -> None:
    import specbench.records.columnar as store

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    rd = RunDir(tmp_path)
    monkeypatch.setattr(store, "write_window", full_disk)
    sink = RecordSink.open(rd, "r1")
    sink.request(rec("v|p|r1", 0, 20.0))
    sink.window(win("v|p|r1", 10.0))  # does not raise: the raw files have the window
    sink.close()
    monkeypatch.undo()
    assert len(rd.window_records()) == 1 and not window_path(rd, "v|p|r1").exists()
    assert open_store(rd).frame(columns=["t_send"]).t_send.tolist() == [20.0]  # rebuilt on first read


def test_a_lone_surrogate_in_the_text_round_trips(tmp_path: Path) -> None:
    """Parquet strings are UTF-8; a model's broken output (a lone surrogate) is kept exactly all the same."""
    from specbench.records.columnar import Store, write_window

    rd = RunDir(tmp_path)
    bad = rec("v|p|r1", 0, 20.0).model_copy(update={"text": "a\ud800b", "error": None})
    good = rec("v|p|r2", 1, 40.0).model_copy(update={"text": "plain", "window_id": "v|p|r2"})
    write_window(rd, win("v|p|r1", 10.0), [bad])
    write_window(rd, win("v|p|r2", 30.0), [good])
    store = Store(rd=rd, windows=[win("v|p|r1", 10.0), win("v|p|r2", 30.0)])  # no windows.jsonl: no rebuild
    assert store.frame(columns=["text"]).text.tolist() == ["a\ud800b", "plain"]


def test_summed_tokens_per_chunk_keep_output_counts_without_usage(tmp_path: Path) -> None:
    """acceptance.csv and the open-loop table read tokens per chunk only to count output tokens when the
    server sent no usage: the summed form gives the same count (and an empty list stays empty)."""
    from specbench.metrics.requests import request_output_tokens
    from specbench.records.columnar import Store, write_window

    rd = RunDir(tmp_path)
    no_usage = rec("v|p|r1", 0, 20.0).model_copy(update={"output_tokens": None, "chunk_tokens": [2, 3, 1]})
    empty = rec("v|p|r1", 1, 21.0).model_copy(update={"output_tokens": None, "chunk_tokens": [],
                                                        "chunk_offsets_s": []})
    write_window(rd, win("v|p|r1", 10.0), [no_usage, empty])
    df = Store(rd=rd, windows=[win("v|p|r1", 10.0)]).frame(columns=["output_tokens"], summed=("chunk_tokens",))
    assert [list(x) for x in df.chunk_tokens] == [[6], []]
    got = [request_output_tokens(o, t) for o, t in zip(df.output_tokens, df.chunk_tokens)]
    assert got[0] == 6.0 and got[1] != got[1]  # NaN: nothing to count

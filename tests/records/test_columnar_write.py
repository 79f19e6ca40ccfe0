"""store.write_window builds its columns column by column and does not dictionary-encode the per-chunk
arrival times and token ids (issue 21: the client's per-window bookkeeping). The files must read back exactly
as those of the previous implementation, kept below as the reference: the same values, Arrow schema,
Parquet schema and specbench metadata, for tricky windows."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specbench.records.columnar import FIELDS, JSON_FIELDS, SCHEMA, VERSION, _measured, _utf8, window_path, write_window
from specbench.records.rundir import RunDir
from specbench.shared.schema import RequestRecord, SpecDetails, WindowRecord

WID = "v|chat|in-|out4|c2|t0|r1"


def reference_parquet(window: WindowRecord, records: Iterable[RequestRecord]) -> bytes:
    """write_window as it was before issue 21 (field by field per record, pyarrow's default encodings)."""
    rows = _measured(window, records)
    cols: dict[str, list[Any]] = {name: [] for name in FIELDS}
    for rec in rows:
        for name in FIELDS:
            v = getattr(rec, name)
            if name in JSON_FIELDS and v is not None:
                v = json.dumps(v.model_dump() if hasattr(v, "model_dump") else v)
            cols[name].append(v)
    escaped = [n for n in FIELDS if SCHEMA.field(n).type == pa.string() and n not in JSON_FIELDS
               and any(isinstance(v, str) and not _utf8(v) for v in cols[n])]
    for name in escaped:
        cols[name] = [None if v is None else json.dumps(v) for v in cols[name]]
    meta = {"specbench.version": VERSION, "specbench.window_id": window.window_id,
            "specbench.t_start": repr(window.t_start), "specbench.fields": ",".join(FIELDS),
            "specbench.escaped": ",".join(escaped)}
    buf = io.BytesIO()
    pq.write_table(pa.table(cols, schema=SCHEMA.with_metadata(meta)), buf)
    return buf.getvalue()


def win(t_start: float = 10.0) -> WindowRecord:
    return WindowRecord(window_id=WID, variant="v", cell_id="v|p", point_id="p", repeat=1, t_start=t_start,
                        t_end=t_start + 5, n_requests=2)


def rec(index: int, **update: Any) -> RequestRecord:
    base = RequestRecord(variant="v", cell_id="v|p", point_id="p", window_id=WID, category="chat",
                         prompt_id=f"p{index}", output_len=4, concurrency=2, repeat=1, index=index,
                         t_send=20.0 + index, ttft_s=0.01, e2e_s=0.05, chunk_offsets_s=[0.01, 0.02, 0.05],
                         chunk_tokens=[1, 2, 1], prompt_tokens=7, output_tokens=4, token_ids=[5, 6, 7, 8],
                         text="héllo wörld ✓", finish_reason="length")
    return base.model_copy(update=update)


SPEC = SpecDetails(verify_steps=3, drafted_steps=2, accepted_drafts=1, proposed_drafts=6,
                   accept_histogram=[1, 1, 0, 0], reported_accept_length=1.5, max_drafts=3, source="vllm",
                   raw={"num_spec_steps": 2, "accepted": [0, 1], "note": "ünïcode", "nested": {"x": None}})

WINDOWS = {
    "plain": [rec(0), rec(1)],
    "spec details and none": [rec(0, spec=SPEC), rec(1, spec=None)],
    "none lists and empty lists": [rec(0, token_ids=None), rec(1, token_ids=[], chunk_offsets_s=[],
                                                                chunk_tokens=[]), rec(2, token_ids=None)],
    "all token ids none": [rec(0, token_ids=None), rec(1, token_ids=None)],
    "lone surrogates": [rec(0, text="a\ud800b", error="bad \udfff"), rec(1, text=None, finish_reason=None),
                        rec(2, text="ok", error=None)],
    "errors and nones": [rec(0, ttft_s=None, e2e_s=None, prompt_tokens=None, output_tokens=None, text=None,
                             finish_reason=None, error="HTTP 500", chunk_offsets_s=[], chunk_tokens=[],
                             token_ids=None)],
    "open loop fields": [rec(0, rate=4.0, scheduled_s=0.25, send_lag_s=1e-05, input_len=128,
                             temperature=0.7, launch=2)],
    "filtered out: warmup, another window, an abandoned attempt": [
        rec(0, warmup=True), rec(1, window_id="other"), rec(2, t_send=1.0), rec(3)],
    "empty window": [],
    "long lists": [rec(i, chunk_offsets_s=[i + k / 7 for k in range(2000)],
                       chunk_tokens=[1 + k % 3 for k in range(2000)], token_ids=list(range(i, i + 4000)),
                       spec=SPEC if i % 2 else None) for i in range(4)],
}


@pytest.mark.parametrize("name", list(WINDOWS))
def test_window_file_reads_back_exactly_as_the_reference_implementation_wrote_it(tmp_path: Path, name: str) -> None:
    rd = RunDir(tmp_path)
    records = WINDOWS[name]
    path = write_window(rd, win(), records)
    assert path == window_path(rd, WID)
    new = pq.ParquetFile(path)
    ref = pq.ParquetFile(io.BytesIO(reference_parquet(win(), records)))
    got, want = new.read(), ref.read()
    assert got.schema.equals(want.schema, check_metadata=True)  # Arrow types and the specbench.* metadata
    assert got.schema.metadata == want.schema.metadata
    assert new.schema.equals(ref.schema)  # the Parquet schema (physical and logical types)
    assert got.equals(want, check_metadata=True)
    assert got.to_pylist() == want.to_pylist()  # values, nulls vs empty lists included
    assert got.num_rows == len(_measured(win(), records))


def test_a_token_id_beyond_int64_fails_as_before(tmp_path: Path) -> None:
    """Such an id cannot be stored; the error is the same OverflowError the reference raises."""
    records = [rec(0, token_ids=[2**63])]
    with pytest.raises(OverflowError):
        reference_parquet(win(), records)
    with pytest.raises(OverflowError):
        write_window(RunDir(tmp_path), win(), records)


def test_distinct_per_chunk_values_are_not_dictionary_encoded(tmp_path: Path) -> None:
    """pyarrow's default dictionary for the arrival offsets and token ids (values that hardly repeat)
    overflowed and was thrown away at 2,000 chunks per request, which cost two thirds of the write; tokens
    per chunk (small counts) and the per-request columns keep their dictionary."""
    path = write_window(RunDir(tmp_path), win(), WINDOWS["long lists"])
    meta = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema.split(".")[0]: meta.column(i).encodings
                 for i in range(meta.num_columns)}
    assert set(encodings) == set(FIELDS)
    for name in ("chunk_offsets_s", "token_ids"):
        assert not any("DICTIONARY" in e for e in encodings[name]), (name, encodings[name])
    for name in ("chunk_tokens", "variant", "text"):
        assert any("DICTIONARY" in e for e in encodings[name]), (name, encodings[name])

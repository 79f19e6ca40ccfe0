"""The run directory contract, and safe writes into it.

    config.yaml          the resolved config
    environment.json     host, CPU/GPU, engine and specbench versions
    run.json             run id, per-variant status (done/failed/reused), fingerprints, wall times
    fairness.json        the fairness audit of the variants' launch settings
    model.json           facts read from the model folder: its end-of-sequence token ids (past_eos_share)
    variants/<name>/     server.log, command.json (argv + env, secrets redacted), command.sh
    requests.jsonl       one RequestRecord per line, appended and flushed one by one
    windows.jsonl        one WindowRecord per completed measurement window
    cells.csv            one row per variant x sweep point (derived; rewritten atomically)
    break_even.csv       one row per drafter x category x lengths (derived)
    report.md, report.html
    columnar/            the measured requests again, one Parquet file per window (derived; store/)

Raw files are only ever appended; derived files are written to a temporary file and renamed.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ValidationError

from specbench.shared.errors import RunDirError
from specbench.shared.schema import RequestRecord, WindowRecord

RAW_FILES = ("requests.jsonl", "windows.jsonl")
COMMAND_FILE = "command.json"  # variants/<name>/: the launch argv and its environment (secrets redacted)


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write to a temporary file in the same folder, fsync, rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; reports are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def read_jsonl(path: Path, model: type[BaseModel]) -> list[Any]:
    """Parse a JSONL file, tolerating a torn last line (a crash mid-append); other bad lines are errors."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(model.model_validate_json(line))
        except ValidationError as exc:
            if n == len(lines):
                break  # torn tail: the record being written when the process died
            raise RunDirError(f"{path}: line {n} is not a valid record: {exc.errors()[0]['msg']}") from None
    return out


class JsonlAppender:
    """Append records one per line and flush each to disk, so a crash loses at most the one in flight."""

    def __init__(self, path: Path):
        self.path = path
        self._repair_tail()
        # unbuffered: a failed append (a full disk) leaves no half-written line behind in a buffer that a
        # later close would flush into the middle of the file
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _repair_tail(self) -> None:
        """Make the file end with a complete line before appending to it again (resume after a crash).

        A last line without its newline is either a complete record (the crash came between the record and
        its newline: the newline is added) or a torn fragment that can never parse: the fragment is moved to
        `<file>.torn` (kept, never deleted) and cut from the file, so it cannot end up in the middle of the
        file where it would make every later read fail."""
        if not self.path.exists() or not self.path.stat().st_size:
            return
        with open(self.path, "rb+") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 8_000_000))
            chunk = f.read()
            if chunk.endswith(b"\n"):
                return
            cut = chunk.rfind(b"\n") + 1  # 0 when the whole chunk is one unterminated line
            start = size - len(chunk) + cut
            fragment = chunk[cut:]
            try:
                json.loads(fragment)
                complete = True
            except ValueError:
                complete = False
            if complete:
                f.write(b"\n")
            else:
                with open(self.path.with_name(self.path.name + ".torn"), "ab") as side:
                    side.write(fragment + b"\n")
                    side.flush()
                    os.fsync(side.fileno())
                f.truncate(start)
            f.flush()
            os.fsync(f.fileno())

    def append(self, record: BaseModel) -> None:
        """Write one record and its newline, then fsync. On an OSError (ENOSPC, EIO, EDQUOT) whatever part
        of the line reached the file is cut off again, so the file still ends with a complete record, and
        the error propagates: the caller stops the run (the records before it are all kept)."""
        if self._fd is None:
            raise ValueError(f"{self.path}: appended to after close")
        # model_dump_json()'s bytes before it decodes them to str: a long record's line is not decoded and
        # encoded again (the same bytes, tested)
        data = record.__pydantic_serializer__.to_json(record) + b"\n"
        size = os.fstat(self._fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            os.fsync(self._fd)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, size)
            except OSError:
                pass  # the torn tail is then repaired when the file is opened again (resume)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@dataclass
class RunDir:
    path: Path

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    # -- paths (every file of the contract, in one place) -----------------------------------------
    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def environment(self) -> Path:
        return self.path / "environment.json"

    @property
    def meta(self) -> Path:
        return self.path / "run.json"

    @property
    def fairness(self) -> Path:
        return self.path / "fairness.json"

    @property
    def model_facts(self) -> Path:
        return self.path / "model.json"

    @property
    def requests(self) -> Path:
        return self.path / "requests.jsonl"

    @property
    def windows(self) -> Path:
        return self.path / "windows.jsonl"

    @property
    def cells(self) -> Path:
        return self.path / "cells.csv"

    @property
    def break_even(self) -> Path:
        return self.path / "break_even.csv"

    @property
    def acceptance(self) -> Path:
        """Per-request acceptance (derived): the report's distributions."""
        return self.path / "acceptance.csv"

    @property
    def errors(self) -> Path:
        """Per variant, the failed requests' reasons with counts (derived)."""
        return self.path / "errors.csv"

    @property
    def reconciliation(self) -> Path:
        """Per-window cross-checks against the engine's counters and histograms (derived)."""
        return self.path / "reconciliation.csv"

    @property
    def decomposition(self) -> Path:
        """Per drafter cell: speedup = acceptance / step-cost ratio x residual (derived)."""
        return self.path / "decomposition.csv"

    @property
    def open_loop(self) -> Path:
        """Per variant and offered rate: saturation, SLO percentiles, attainment, goodput (derived)."""
        return self.path / "open_loop.csv"

    @property
    def capacity(self) -> Path:
        """Per variant and SLO: capacity under the SLO with its interval, gain over the baseline (derived)."""
        return self.path / "capacity.csv"

    @property
    def variance_history(self) -> Path:
        """What the intervals took from the variance history and why the rest was not pooled (derived)."""
        return self.path / "variance_history.json"

    @property
    def launch_drift(self) -> Path:
        """The baseline's launch means against time (derived, metrics.drift)."""
        return self.path / "launch_drift.csv"

    def command_file(self, variant: str) -> Path:
        return self.variant_dir(variant) / COMMAND_FILE

    def variant_dir(self, name: str) -> Path:
        p = (self.path / "variants" / name).resolve()
        if self.path.resolve() not in p.parents:  # names are validated, but never write outside the run
            raise RunDirError(f"variant name {name!r} escapes the run directory")
        return p

    # -- state --------------------------------------------------------------------------------------
    def has_measurements(self) -> bool:
        return any((self.path / f).exists() and (self.path / f).stat().st_size for f in RAW_FILES)

    def load_meta(self) -> dict[str, Any]:
        return json.loads(self.meta.read_text()) if self.meta.exists() else {}

    def setup(self) -> dict[str, str]:
        """The setup run.json recorded at the start (`variance_history.setup`, stores.setupkey); {}: none."""
        return dict((self.load_meta().get("variance_history") or {}).get("setup") or {})

    def save_meta(self, meta: dict[str, Any]) -> None:
        write_json(self.meta, meta)

    def load_environment(self) -> dict[str, Any]:
        """environment.json ({} when the run has none yet)."""
        return json.loads(self.environment.read_text()) if self.environment.exists() else {}

    def eos_token_ids(self) -> list[int] | None:
        """model.json's `eos_token_ids` (None: no model.json, an older run, or no EOS id known)."""
        if not self.model_facts.exists():
            return None
        ids = json.loads(self.model_facts.read_text()).get("eos_token_ids")
        return [int(i) for i in ids] if isinstance(ids, list) and ids else None

    def launch_argv(self) -> dict[str, list[str]]:
        """Each launched variant's argv, from its variants/<name>/command.json."""
        return {cmd.parent.name: list(json.loads(cmd.read_text()).get("argv") or [])
                for cmd in sorted(self.path.glob(f"variants/*/{COMMAND_FILE}"))}

    def load_cells(self) -> pd.DataFrame:
        """cells.csv (an empty frame before the first finalize)."""
        return read_csv(self.cells)

    def request_records(self, superseded: bool = False) -> list[RequestRecord]:
        """The request records. A window cut short (crash, Ctrl-C, engine death) is measured again from
        scratch on resume under the same window id; the records of the abandoned attempt stay in the raw
        file but are left out here (sent before the completed attempt's t_start) unless `superseded`."""
        records = read_jsonl(self.requests, RequestRecord)
        if superseded:
            return records
        starts = {w.window_id: w.t_start for w in self.window_records()}
        return [r for r in records if r.warmup or r.window_id not in starts or r.t_send >= starts[r.window_id]]

    def window_records(self) -> list[WindowRecord]:
        return read_jsonl(self.windows, WindowRecord)


def records_frame(records: Sequence[BaseModel]) -> pd.DataFrame:
    return pd.DataFrame([r.model_dump() for r in records])


def read_csv(path: Path) -> pd.DataFrame:
    """A derived table; an empty frame when the file is missing or empty (nothing derived yet)."""
    return pd.read_csv(path) if path.exists() and path.stat().st_size else pd.DataFrame()

"""Where the analysis reads a run's requests from, one cell at a time: a DataFrame in memory (FrameSource)
or the columnar store (store.Store). Each formula asks only for the columns it needs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pandas as pd

from specbench.metrics.requests import measured_requests
from specbench.shared.schema import RequestRecord

# what losslessness compares (the outputs), and what everything else reads (all but the outputs)
OUTPUT_COLUMNS = ("window_id", "warmup", "launch", "repeat", "index", "prompt_id", "error", "token_ids", "text")
SUMMARY_COLUMNS = tuple(c for c in RequestRecord.model_fields if c not in ("token_ids", "text"))
# scalars and per-request acceptance: acceptance.csv and reconciliation.csv
LIGHT_COLUMNS = tuple(c for c in SUMMARY_COLUMNS if c not in ("chunk_offsets_s", "chunk_tokens"))


class CellSource(Protocol):
    def cell_ids(self) -> list[str]:
        """The cells with measured requests, sorted."""
        ...

    def cell_frame(self, cell_id: str, columns: Sequence[str]) -> pd.DataFrame:
        """The cell's measured requests (completed windows, no warmup), only `columns` (those present)."""
        ...


class FrameSource:
    """A requests frame already in memory (records_frame), grouped by cell."""

    def __init__(self, requests: pd.DataFrame, windows: pd.DataFrame):
        req = measured_requests(requests, windows)
        self._cells = {} if req.empty else {str(k): df for k, df in req.groupby("cell_id", sort=True)}

    def cell_ids(self) -> list[str]:
        return list(self._cells)

    def cell_frame(self, cell_id: str, columns: Sequence[str]) -> pd.DataFrame:
        df = self._cells[cell_id]
        return df[[c for c in df.columns if c in set(columns)]]

"""The measured requests as stored for analysis: the columnar store (`columnar.py`, one Parquet file per
window, rebuilt from requests.jsonl when missing or stale) and a run directory loaded as DataFrames
(`run.py`: `load_run`, `Run`)."""

from specbench.store.columnar import (
           FIELDS,
           FOLDER,
           JSON_FIELDS,
           SCHEMA,
           VERSION,
           Store,
           open_store,
           window_path,
           write_window,
)
from specbench.store.run import Run, load_run

__all__ = ["FIELDS", "FOLDER", "JSON_FIELDS", "SCHEMA", "VERSION", "Run", "Store", "load_run", "open_store",
           "window_path", "write_window"]

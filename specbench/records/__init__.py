"""The records layer: the run directory (`rundir.py`: the contract, the append-only logs, atomic writes of
derived files), the columnar store of the measured requests (`columnar.py`: one Parquet file per window,
rebuilt from requests.jsonl when missing or stale) and a run loaded for analysis (`loaded_run.py`: `load_run`,
`Run`). The record schemas themselves are in `shared/schema.py`: the client and the engines fill them in."""

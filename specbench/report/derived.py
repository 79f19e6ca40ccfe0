"""Loading a run's derived files for the report: cells.csv and break_even.csv typed, run.json and friends parsed.

Only derived files are read (cells.csv, break_even.csv, acceptance.csv, decomposition.csv, open_loop.csv,
capacity.csv, run.json, environment.json, fairness.json, config.yaml), so re-rendering an old run is cheap
and never parses requests.jsonl.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.records.rundir import RunDir
from specbench.report.fmt import fmt_len, fmt_temp, num

NUMERIC_COLUMNS = (
    "input_len", "output_len", "concurrency", "temperature", "n_requests", "n_errors", "error_rate", "repeats",
    "output_throughput_tok_s", "output_throughput_ci_low", "output_throughput_ci_high", "per_user_tok_s",
    "per_user_tok_s_ci_low", "per_user_tok_s_ci_high", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s",
    "tpot_p50_s_ci_low", "tpot_p50_s_ci_high", "tpot_p90_s", "itl_p50_s", "e2e_p50_s", "acceptance_length",
    "acceptance_length_ci_low", "acceptance_length_ci_high", "draft_acceptance_length", "acceptance_rate",
    "acceptance_length_request_mean", "acceptance_length_request_p10", "acceptance_length_request_p90",
    "acceptance_windows_checked", "acceptance_windows_mismatched", "client_ttft_mean_s", "server_ttft_mean_s",
    "client_e2e_mean_s", "server_e2e_mean_s", "speedup", "speedup_ci_low", "speedup_ci_high",
    "per_user_speedup", "per_user_speedup_ci_low", "per_user_speedup_ci_high", "tpot_speedup",
    "lossless_match_rate", "lossless_any_match_rate", "lossless_prefix_mean", "outlier_count", "throughput_cv",
    "launches", "speedup_ci_df", "full_accept_fraction", "acceptance_unknown_windows", "launch_cv", "repeat_cv",
    "request_cv", "rate", "steady_requests", "effective_concurrency", "server_running_mean",
)
TEXT_COLUMNS = ("variant", "category", "point_id", "acceptance_per_position", "acceptance_source", "warnings",
                "interval_unit")
SERIES_KEYS = ("category", "input_len", "temperature")  # with output_len: a speedup-vs-concurrency curve
BREAK_EVEN_NUMERIC = ("input_len", "output_len", "temperature", "break_even_concurrency")
BREAK_EVEN_TEXT = ("variant", "category", "status", "verdict")


def _truthy(x: Any) -> bool:
    if isinstance(x, str):
        return x.strip().lower() not in ("false", "0", "no", "")
    v = num(x)
    return True if math.isnan(v) else bool(v)


def _typed(frame: pd.DataFrame, numeric: tuple[str, ...], text: tuple[str, ...]) -> pd.DataFrame:
    """A copy with every listed column present: numbers as float (NaN = undefined), text as str ("" = missing)."""
    df = frame.copy()
    for col in numeric:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float) if col in df else math.nan
    for col in text:
        df[col] = df[col].astype(object).where(df[col].notna(), "").astype(str) if col in df else ""
    return df


def normalize_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """cells.csv with every known column present and typed: numbers as float (NaN = undefined), text as str."""
    df = _typed(cells, NUMERIC_COLUMNS, TEXT_COLUMNS)
    df["valid"] = df["valid"].map(_truthy).astype(bool) if "valid" in df else True
    if "point_id" in df and len(df):
        missing = df["point_id"] == ""
        df.loc[missing, "point_id"] = [_point_id(r) for _, r in df[missing].iterrows()]
    return df.reset_index(drop=True)


def _point_id(row: pd.Series) -> str:
    """Same shape as records.CellKey.point_id, for cells.csv files written without the column."""
    inp = f"in{int(row['input_len'])}" if not math.isnan(row["input_len"]) else "in-"
    return f"{row['category']}|{inp}|out{fmt_len(row['output_len'])}|c{fmt_len(row['concurrency'])}" \
           f"|t{fmt_temp(row['temperature'])}"


def normalize_break_even(be: pd.DataFrame) -> pd.DataFrame:
    return _typed(be, BREAK_EVEN_NUMERIC, BREAK_EVEN_TEXT).reset_index(drop=True)


@dataclass
class RunData:
    path: Path
    meta: dict[str, Any]
    environment: dict[str, Any]
    config: dict[str, Any]
    fairness: dict[str, Any] | None
    cells: pd.DataFrame
    break_even: pd.DataFrame
    acceptance: pd.DataFrame = field(default_factory=pd.DataFrame)  # per request (acceptance.csv)
    history: dict[str, Any] | None = None  # the pooled variance history the intervals use (variance_history.json)
    history_notes: list[str] = field(default_factory=list)  # history entries not pooled, and why
    drift: pd.DataFrame = field(default_factory=pd.DataFrame)  # the baseline's launch effects (launch_drift.csv)
    open_loop: pd.DataFrame = field(default_factory=pd.DataFrame)  # per variant x offered rate (open_loop.csv)
    capacity: pd.DataFrame = field(default_factory=pd.DataFrame)  # per variant x SLO (capacity.csv)
    errors: pd.DataFrame = field(default_factory=pd.DataFrame)  # failed requests' reasons (errors.csv)
    decomposition: pd.DataFrame = field(default_factory=pd.DataFrame)  # AL, r, residual (decomposition.csv)

    @property
    def baseline(self) -> str:
        return str(self.meta.get("baseline") or "")

    @property
    def variants(self) -> dict[str, dict[str, Any]]:
        """run.json's variants, plus any that appear only in cells.csv."""
        out = {str(k): dict(v or {}) for k, v in (self.meta.get("variants") or {}).items()}
        for name in self.cells["variant"].unique() if len(self.cells) else []:
            out.setdefault(str(name), {"status": "done"})
        return out

    @property
    def drafters(self) -> list[str]:
        return [v for v in self.variants if v != self.baseline]

    @property
    def caps(self) -> dict[str, int]:
        """Variant -> its max_concurrency, for the variants it leaves unmeasured at some sweep concurrency."""
        return config_caps(self.config)

    def not_measured(self, variant: str, concurrency: float) -> bool:
        """Whether `variant` does not measure `concurrency` by design (above its max_concurrency)."""
        cap = self.caps.get(variant)
        return cap is not None and concurrency > cap


def config_caps(config: dict[str, Any]) -> dict[str, int]:
    """plan.capped_variants on a run's config.yaml as read (a dict): variant -> max_concurrency, for the
    variants that leave some sweep concurrency unmeasured."""
    levels = [int(c) for c in (config.get("sweep") or {}).get("concurrency") or []]
    return {str(v["name"]): int(v["max_concurrency"]) for v in config.get("variants") or []
            if v.get("max_concurrency") is not None and levels and int(v["max_concurrency"]) < max(levels)}


def read_config(rd: RunDir) -> dict[str, Any]:
    """A run's config.yaml as a dict ({} when it has none)."""
    if not rd.config.exists():
        return {}
    import yaml

    return yaml.safe_load(rd.config.read_text()) or {}


def read_json(path: Path) -> Any:
    """A JSON file's content; None when the file is missing."""
    return json.loads(path.read_text()) if path.exists() else None


def read_csv(path: Path) -> pd.DataFrame:
    """A CSV file as a frame; empty when the file is missing or empty."""
    return pd.read_csv(path) if path.exists() and path.stat().st_size else pd.DataFrame()


def load_report_data(run_dir: str | Path) -> RunData:
    from specbench.shared.errors import RunDirError

    rd = RunDir(Path(run_dir))
    if not rd.meta.exists():
        raise RunDirError(f"not a run directory (no run.json): {rd.path}")
    config = read_config(rd)
    return RunData(path=rd.path, meta=read_json(rd.meta) or {}, environment=read_json(rd.environment) or {},
                   config=config, fairness=read_json(rd.fairness), cells=normalize_cells(read_csv(rd.cells)),
                   break_even=normalize_break_even(read_csv(rd.break_even)), acceptance=read_csv(rd.acceptance),
                   **_history(rd), drift=read_csv(rd.launch_drift),
                   open_loop=normalize_open_loop(read_csv(rd.open_loop)), capacity=read_csv(rd.capacity),
                   errors=read_csv(rd.errors), decomposition=read_csv(rd.decomposition))


def _history(rd: RunDir) -> dict[str, Any]:
    """The history the intervals use and the report's lines about it: variance_history.json (what the
    checks left), else, in a run written before it, calibration.json as copied."""
    record = read_json(rd.variance_history)
    if record is None:
        return {"history": read_json(rd.path / "calibration.json")}
    return {"history": record.get("used"), "history_notes": [str(n) for n in record.get("notes") or []]}


def normalize_open_loop(points: pd.DataFrame) -> pd.DataFrame:
    """open_loop.csv with `saturated` as bool (it is written as True/False text)."""
    df = points.copy()
    if "saturated" in df:
        df["saturated"] = df["saturated"].map(_truthy).astype(bool)
    if "saturation_reason" in df:
        df["saturation_reason"] = df["saturation_reason"].fillna("").astype(str)
    return df

"""Per-request and per-window formulas: output tokens, TPOT, ITL, per-user speed, window throughput;
and which requests count (measured_requests)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from specbench.metrics.common import NAN, as_float, as_list, opt_list, opt_str, safe_ratio


def request_output_tokens(output_tokens: Any, chunk_tokens: Sequence[int] | np.ndarray | None) -> float:
    """Output tokens from the server's usage; if usage is missing, the sum of tokens per chunk."""
    n = as_float(output_tokens)
    if math.isfinite(n):
        return n
    if chunk_tokens is not None and len(chunk_tokens) > 0:
        return float(sum(chunk_tokens))
    return NAN


def request_tpot(e2e_s: float, ttft_s: float, n_out: float) -> float:
    """TPOT = (e2e - TTFT) / (n_out - 1); undefined (NaN) for fewer than 2 output tokens."""
    if not (math.isfinite(e2e_s) and math.isfinite(ttft_s) and math.isfinite(n_out)) or n_out < 2:
        return NAN
    return (e2e_s - ttft_s) / (n_out - 1)


def request_decode_time(e2e_s: float, ttft_s: float) -> float:
    """Decode time = e2e - TTFT (s): from the first token to the end of the stream (TPOT's numerator).
    The prefill time is TTFT itself."""
    return e2e_s - ttft_s if math.isfinite(e2e_s) and math.isfinite(ttft_s) else NAN


def request_target_steps(n_out: float, spec: dict[str, Any] | None, plain: bool) -> float:
    """Target forward passes that produced the request's tokens: the engine's `spec.verify_steps` (the
    first token's prefill step included), or n_out for plain decoding (one token a step); NaN when a
    drafter's engine did not report them."""
    if plain:
        return n_out
    steps = as_float(spec.get("verify_steps")) if spec else NAN
    return steps if math.isfinite(steps) and steps > 0 else NAN


def request_itls(chunk_offsets_s: Sequence[float], chunk_tokens: Sequence[int]) -> list[float]:
    """Per-token inter-token latencies: chunk j >= 1 with k_j tokens after gap g_j = t_j - t_{j-1}
    contributes k_j gaps of g_j / k_j. Tokens of the first chunk arrive at TTFT and add none. A chunk without
    tokens is skipped: the next gap runs from the last chunk that carried tokens, so the ITLs still add up to
    (last chunk - TTFT)."""
    return [float(g) for g in request_itls_array(chunk_offsets_s, chunk_tokens)]


def request_itls_array(chunk_offsets_s: Sequence[float] | np.ndarray,
                       chunk_tokens: Sequence[int] | np.ndarray) -> np.ndarray:
    """request_itls as an array, computed with array operations (a run holds millions of chunks)."""
    n = min(len(chunk_offsets_s), len(chunk_tokens))
    t = np.asarray(chunk_offsets_s, dtype=float)[:n]
    k = np.asarray(chunk_tokens, dtype=float)[:n].astype(np.int64)  # int(n) of each count, as before
    carry = k > 0
    t, k = t[carry], k[carry]
    if t.size < 2:
        return np.empty(0)
    return np.repeat(np.diff(t) / k[1:], k[1:])


def window_throughput_arrays(t_send: np.ndarray, e2e_s: np.ndarray, n_out: np.ndarray, ok: np.ndarray) -> float:
    """Output throughput of one window = sum(n_out of successful requests) / (last finish - first send).

    first send = min t_send over all the window's requests; last finish = max(t_send + e2e) over those
    whose e2e is known. NaN when nothing succeeded or the span is not positive.
    """
    if ok.size == 0 or not ok.any():
        return NAN
    finish = t_send + e2e_s
    span = float(np.nanmax(finish)) - float(np.nanmin(t_send)) if np.isfinite(finish).any() else NAN
    tokens = float(np.nansum(n_out[ok]))
    if not math.isfinite(span) or span <= 0:
        return NAN
    return tokens / span


OutputDigest = tuple[bytes | None, bytes | None]  # (token ids, text) digests: lossless.output_digest


@dataclass
class MeasuredRequest:
    window_id: str  # the window it was measured in: the key of every join to a WindowRecord
    launch: int  # which launch of the variant's engine (1 when the variant was launched once)
    repeat: int
    index: int
    prompt_id: str
    ok: bool
    n_out: float
    e2e: float
    ttft: float
    t_send: float
    chunk_offsets: Sequence[float] | np.ndarray  # arrays when read from the columnar store
    chunk_tokens: Sequence[int] | np.ndarray
    token_ids: Sequence[int] | np.ndarray | None
    text: str | None
    spec: dict[str, Any] | None

    digest: OutputDigest | None = None  # set where the outputs themselves were let go

    @property
    def per_user(self) -> float:
        """Per-user speed = n_out / e2e (tokens/s) of one successful request."""
        return safe_ratio(self.n_out, self.e2e) if self.ok else NAN


def _array(x: Any, dtype: Any) -> np.ndarray:
    """A list field as an array (a list from JSON, an array from Parquet); missing -> empty."""
    return np.asarray(as_list(x) if not isinstance(x, np.ndarray) else x, dtype=dtype)


def _ids(x: Any) -> Sequence[int] | np.ndarray | None:
    return x if isinstance(x, np.ndarray) else opt_list(x)


def to_measured_requests(df: pd.DataFrame) -> list[MeasuredRequest]:
    out = []
    for r in df.to_dict("records"):
        chunk_tokens = _array(r.get("chunk_tokens"), np.int64)
        spec = r.get("spec")
        out.append(
            MeasuredRequest(
                window_id=str(r["window_id"]),
                launch=int(as_float(r.get("launch")) if math.isfinite(as_float(r.get("launch"))) else 1),
                repeat=int(r["repeat"]),
                index=int(r["index"]),
                prompt_id=str(r.get("prompt_id", "")),
                ok=opt_str(r.get("error")) is None,
                n_out=request_output_tokens(r.get("output_tokens"), chunk_tokens),
                e2e=as_float(r.get("e2e_s")),
                ttft=as_float(r.get("ttft_s")),
                t_send=as_float(r.get("t_send")),
                chunk_offsets=_array(r.get("chunk_offsets_s"), float),
                chunk_tokens=chunk_tokens,
                token_ids=_ids(r.get("token_ids")),
                text=opt_str(r.get("text")),
                spec=spec if isinstance(spec, dict) else None,
            )
        )
    return out


def measured_requests(requests: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Requests that count: not warmup, and their window has a WindowRecord (it completed)."""
    if requests.empty:
        return requests
    done = set(windows["window_id"]) if not windows.empty else set()
    keep = requests["window_id"].isin(done)
    if "warmup" in requests:
        keep &= requests["warmup"].ne(True)  # only a request marked warmup is left out; unknown (NaN) counts
    return requests[keep]


FAILURE_COLUMNS = ["variant", "reason", "requests"]


def failure_reasons(requests: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """errors.csv: per variant, each distinct `error` of its measured requests and how many requests
    failed with it, the most frequent first (the reasons a cell warning's count alone does not give)."""
    req = measured_requests(requests, windows)
    if req.empty or "error" not in req:
        return pd.DataFrame(columns=FAILURE_COLUMNS)
    failed = req[req["error"].map(lambda e: isinstance(e, str))]
    if failed.empty:
        return pd.DataFrame(columns=FAILURE_COLUMNS)
    counts = failed.groupby(["variant", "error"]).size().reset_index(name="requests")
    counts = counts.rename(columns={"error": "reason"})
    return counts.sort_values(["variant", "requests", "reason"], ascending=[True, False, True])[FAILURE_COLUMNS] \
        .reset_index(drop=True)

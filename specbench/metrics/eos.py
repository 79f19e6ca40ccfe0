"""Tokens past EOS (docs/metrics.md, "Tokens past EOS"): how much of a cell's output the model generated after
its own end-of-sequence token, only because every request sends `ignore_eos`. Per request, then pooled over
the cell's successful requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specbench.metrics.common import NAN
from specbench.metrics.requests import MeasuredRequest


def request_past_eos(token_ids: Sequence[int] | np.ndarray | None,
                     eos_ids: Sequence[int] | None) -> tuple[float, float]:
    """(tokens generated after the first EOS token, tokens with ids) of one request; the EOS token itself
    is not counted, an output without one has 0. (NaN, NaN) when its token ids were not recorded or no EOS
    id is known: never 0 for "unknown"."""
    if token_ids is None or not eos_ids:
        return NAN, NAN
    ids = np.asarray(token_ids, dtype=np.int64)
    hits = np.flatnonzero(np.isin(ids, np.asarray(eos_ids, dtype=np.int64)))
    return (float(ids.size - hits[0] - 1) if hits.size else 0.0), float(ids.size)


def past_eos_share(ok: Sequence[MeasuredRequest], eos_ids: Sequence[int]) -> float:
    """past_eos_share = sum of tokens after the first EOS / sum of output tokens, over the successful requests
    whose token ids were recorded; NaN when none were or no EOS id is known."""
    pairs = [p for p in (request_past_eos(r.token_ids, eos_ids) for r in ok) if math.isfinite(p[1])]
    total = sum(n for _, n in pairs)
    return sum(k for k, _ in pairs) / total if total > 0 else NAN

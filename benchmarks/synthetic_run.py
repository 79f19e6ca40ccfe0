"""A synthetic run directory in the real formats, written through specbench's own writers (RecordSink,
write_json, atomic_write): the input of benchmarks.analysis_scale and of the golden-report test.

Two variants (autoregressive baseline, ngram), two categories, four concurrencies, two repeats: 16 cells,
32 windows, `n` requests spread evenly. Every request streams `output_len` tokens: the baseline one token per
chunk, ngram 1-4 tokens per chunk with per-request acceptance (SpecDetails) as vLLM reports it. Token ids
and text are returned (as vLLM does with return_token_ids); ngram's outputs equal the baseline's except in
about one request in twenty. Deterministic for a given (n, output_len, seed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from specbench.records.rundir import RunDir, atomic_write, write_json
from specbench.runner.session import RecordSink
from specbench.shared.schema import CellKey, RequestRecord, SpecDetails, WindowRecord

VARIANTS = ("autoregressive", "ngram")
CATEGORIES = ("code", "chat")
CONCURRENCY = (4, 8, 16, 32)
REPEATS = 2
RUN_ID = "synthetic0001"
T0 = 1_800_000_000.0


@dataclass(frozen=True)
class Synthetic:
    n: int  # requests in the run (rounded down to a multiple of the 32 windows, at least one per window)
    output_len: int = 2048
    seed: int = 0
    leftovers: bool = False  # also a warmup request, a superseded attempt and an unfinished window


def config(spec: Synthetic) -> dict:
    return {
        "name": "analysis-scale",
        "model": {"path": "/nonexistent/synthetic"},
        "engine": {"kind": "vllm"},
        "variants": [{"name": "autoregressive", "drafter": "autoregressive", "baseline": True},
                     {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 4}}],
        "sweep": {"prompts": [{"set": "seed", "categories": list(CATEGORIES)}], "output_lens": [spec.output_len],
                  "concurrency": list(CONCURRENCY), "repeats": REPEATS, "warmup_requests": 0},
    }


def _chunks(rng: np.random.Generator, n_tokens: int, speculative: bool) -> np.ndarray:
    """Tokens per chunk: 1 for the baseline, 1-4 (a drafting step's accepted drafts + 1) for ngram."""
    if not speculative:
        return np.ones(n_tokens, dtype=np.int64)
    sizes = rng.integers(1, 5, size=n_tokens)
    cum = np.cumsum(sizes)
    k = int(np.searchsorted(cum, n_tokens)) + 1
    sizes = sizes[:k].copy()
    sizes[-1] -= int(cum[k - 1] - n_tokens)
    return sizes


def _request(spec: Synthetic, rng: np.random.Generator, key: CellKey, repeat: int, index: int,
             t_send: float) -> RequestRecord:
    speculative = key.variant != "autoregressive"
    sizes = _chunks(rng, spec.output_len, speculative)
    step = (0.02 if speculative else 0.03) * (1 + key.concurrency / 32)
    gaps = step * (1 + 0.2 * rng.random(len(sizes)))
    ttft = 0.05 + 0.01 * float(rng.random())
    offsets = ttft + np.concatenate([[0.0], np.cumsum(gaps[1:])])
    prompt = index % 50
    ids = [(prompt * 7 + j) % 1000 for j in range(spec.output_len)]
    if speculative and index % 20 == 7:
        ids[spec.output_len // 2] = 1001  # a lossy request: the output differs from the baseline's halfway
    sd = None
    if speculative:
        steps = len(sizes)
        sd = SpecDetails(verify_steps=steps, drafted_steps=steps, accepted_drafts=int(spec.output_len - steps),
                         proposed_drafts=4 * steps, max_drafts=4, source="vllm")
    return RequestRecord(
        run_id=RUN_ID, variant=key.variant, cell_id=key.cell_id, point_id=key.point_id,
        window_id=f"{key.cell_id}|r{repeat}", category=key.category, prompt_id=f"seed-{key.category}-{prompt}",
        output_len=spec.output_len, concurrency=key.concurrency, repeat=repeat, index=index, t_send=t_send,
        ttft_s=ttft, e2e_s=float(offsets[-1]) + 0.001, chunk_offsets_s=[float(x) for x in offsets],
        chunk_tokens=[int(x) for x in sizes], prompt_tokens=100, output_tokens=spec.output_len, token_ids=ids,
        text="".join(f" t{i}" for i in ids), finish_reason="length", spec=sd)


def write(path: Path, spec: Synthetic) -> RunDir:
    """Write the run directory at `path` (must not exist yet); returns it."""
    rd = RunDir(path)
    path.mkdir(parents=True)
    atomic_write(rd.config, yaml.safe_dump(config(spec), sort_keys=False))
    write_json(rd.environment, {"host": "synthetic", "cpu": "synthetic", "cpus": 2, "gpus": [],
                                "engine": {"kind": "vllm", "version": "synthetic"}})
    rd.save_meta({"run_id": RUN_ID, "created": "2027-01-15T00:00:00+00:00", "name": "analysis-scale",
                  "baseline": "autoregressive",
                  "variants": {v: {"status": "done", "drafter": v, "fingerprint": f"fp-{v}"} for v in VARIANTS}})
    rng = np.random.default_rng(spec.seed)
    keys = [CellKey(variant=v, category=cat, output_len=spec.output_len, concurrency=c)
            for v in VARIANTS for cat in CATEGORIES for c in CONCURRENCY]
    per_window = max(1, spec.n // (len(keys) * REPEATS))
    sink = RecordSink.open(rd, RUN_ID)
    t = T0
    try:
        if spec.leftovers:  # what a crash and a resume leave in requests.jsonl: none of it is measured
            first = keys[0]
            sink.request(_request(spec, rng, first, 0, 0, T0 - 50.0).model_copy(
                update={"warmup": True, "window_id": f"{first.variant}|warmup", "cell_id": f"{first.variant}|warmup"}))
            sink.request(_request(spec, rng, first, 1, 0, T0 - 20.0).model_copy(update={"e2e_s": 999.0}))
        for key in keys:
            for repeat in range(1, REPEATS + 1):
                t_start = t
                recs = [_request(spec, rng, key, repeat, i, t_start + 0.01 * (i // key.concurrency) * 50)
                        for i in range(per_window)]
                for rec in recs:
                    sink.request(rec)
                t_end = max(r.t_send + (r.e2e_s or 0.0) for r in recs)
                counters = {"generation_tokens": float(sum(r.output_tokens or 0 for r in recs)),
                            "ttft_sum_s": sum(r.ttft_s or 0.0 for r in recs) - 0.001 * len(recs),
                            "ttft_count": float(len(recs)),
                            "e2e_sum_s": sum(r.e2e_s or 0.0 for r in recs) - 0.002 * len(recs),
                            "e2e_count": float(len(recs))}
                if key.variant != "autoregressive":
                    counters.update(num_drafts=float(sum(r.spec.drafted_steps or 0 for r in recs if r.spec)),
                                    num_accepted_tokens=float(sum(r.spec.accepted_drafts or 0
                                                                  for r in recs if r.spec)),
                                    num_draft_tokens=float(sum(r.spec.proposed_drafts or 0 for r in recs if r.spec)))
                sink.window(WindowRecord(window_id=recs[0].window_id, variant=key.variant, cell_id=key.cell_id,
                                         point_id=key.point_id, repeat=repeat, t_start=t_start, t_end=t_end,
                                         n_requests=len(recs), counters=counters))
                t = t_end + 1.0
        if spec.leftovers:
            sink.request(_request(spec, rng, keys[-1], REPEATS + 1, 0, t))
    finally:
        sink.close()
    return rd

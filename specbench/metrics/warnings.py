"""Typed warnings about a cell's measurements, each with a message that says how to fix it.

`cell_warnings` is pure: it looks at numbers compute_cells already derived and returns CellWarning
values; the cells table stores them whole, as a JSON list of {"code", "detail"} (`encode_warnings`).
`warning_rows` groups a cells table's warnings for display: the terminal summary and the report both
print these rows, each with its remedy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from specbench.metrics.common import MIN_REPEATS_FOR_INTERVAL

# Thresholds, written once.
SLOW_FIRST_REPEAT_FRACTION = 0.10  # first repeat more than 10% below the mean of the others
HIGH_CV = 0.10  # coefficient of variation of window throughput across repeats
LOW_ACCEPTANCE_LENGTH = 1.2  # tokens per target step below this rarely pays for drafting
INACTIVE_TOLERANCE = 0.01  # a drafter whose pooled acceptance length is within this of 1.0 is not drafting
DEGENERATE_FRACTION = 0.95  # verify steps that accepted every draft: at or above this the prompts are degenerate
GPU_CLOCK_DRIFT = 0.05  # mean SM clock of a variant's windows vs the baseline's, relative
GPU_TEMP_DRIFT_C = 10.0  # mean GPU temperature of a variant's windows vs the baseline's, degrees C
# A client process whose CPU time over a window is at least this share of the window's wall time was
# saturated: its event loop is one thread, so chunks waited for it and the timings measure the client.
CLIENT_SATURATED_SHARE = 0.90
# A server that ran fewer than this share of C requests on average while the client kept C in flight did not
# admit the concurrency the cell names (metrics/engine_state.py)
UNDER_ADMITTED_SHARE = 0.90
EFFECTIVE_CONCURRENCY_SHARE = 0.95  # a closed loop's in-flight mean below this share of C: metrics/steady.py
# A client event loop whose p99 wake-up lag (client/looplag.py) is at least this many ms held 1% of the
# chunks that arrived on it longer than the largest client overhead the timing cross-check tolerates
# (TIMING_ABOVE_ABS_S below); a loop that is not starved lags 0.04-0.05 ms at p99 (docs/client-overhead.md).
CLIENT_LAG_P99_MS = 50.0
PAST_EOS_SHARE = 0.10  # tokens generated after the model's first EOS, as a share of the cell's output tokens
# Client vs server timing (docs/fidelity.md). The server's interval lies inside the client's, so the client's
# mean may fall below the server's only by clock resolution and rounding, and may exceed it by what HTTP, JSON
# and SSE handling on both ends take: measured 4-79 ms (0.3-4%) per 8-request burst on localhost vLLM-CPU with
# 2 loaded cores (docs/fidelity.md). A remote endpoint adds a round trip on top.
TIMING_BELOW_ABS_S = 0.002
TIMING_BELOW_REL = 0.01
TIMING_ABOVE_ABS_S = 0.050
TIMING_ABOVE_REL = 0.10


class WarningCode(str, Enum):
    SLOW_FIRST_REPEAT = "slow_first_repeat"
    OUTLIERS = "outliers"
    HIGH_VARIANCE = "high_variance"
    LOW_ACCEPTANCE = "low_acceptance"
    REQUEST_ERRORS = "request_errors"
    INVALID_CELL = "invalid_cell"
    DIVERGENCE_AT_C1 = "divergence_at_c1"
    BATCH_NUMERICS = "batch_numerics"
    SINGLE_REPEAT = "single_repeat"
    FEW_REPEATS = "few_repeats"
    NO_BASELINE = "no_baseline"
    ACCEPTANCE_MISMATCH = "acceptance_mismatch"
    SERVER_COUNT_MISMATCH = "server_count_mismatch"
    CLIENT_TIMING_BELOW_SERVER = "client_timing_below_server"
    CLIENT_TIMING_ABOVE_SERVER = "client_timing_above_server"
    UNDER_ADMITTED = "under_admitted"
    PREEMPTED = "preempted"
    FEW_PROMPTS = "few_prompts"
    BELOW_CONCURRENCY = "below_concurrency"
    PAST_EOS = "past_eos"
    # sanity gates: each one blocks an "adopt" verdict for the cells it fires on
    DRAFTER_INACTIVE = "drafter_inactive"
    DEGENERATE_WORKLOAD = "degenerate_workload"
    ACCEPTANCE_UNKNOWN = "acceptance_unknown"
    EAGER_ENGINE = "eager_engine"
    GPU_DRIFT = "gpu_drift"
    IMPOSSIBLE_ACCEPTANCE = "impossible_acceptance"
    CLIENT_SATURATED = "client_saturated"
    CLIENT_LAGGING = "client_lagging"
    # read from the engine's log (server.log), not the records; a warning, not a gate
    CPU_BF16_FALLBACK = "cpu_bf16_fallback"


BLOCKING = frozenset(c.value for c in (WarningCode.DRAFTER_INACTIVE, WarningCode.DEGENERATE_WORKLOAD,
                                       WarningCode.ACCEPTANCE_UNKNOWN, WarningCode.EAGER_ENGINE,
                                       WarningCode.GPU_DRIFT, WarningCode.IMPOSSIBLE_ACCEPTANCE,
                                       WarningCode.CLIENT_SATURATED, WarningCode.CLIENT_LAGGING))


REMEDY: dict[WarningCode, str] = {
    WarningCode.SLOW_FIRST_REPEAT: (
        "the engine was still warming up (JIT compilation, CUDA graphs, prefix cache): raise "
        "sweep.warmup_requests or add a repeat and discard the first"
    ),
    WarningCode.OUTLIERS: (
        "some requests were far slower or faster than the rest (over 10 robust SDs and 10% from the median): look for "
        "preemption, a stalled stream or another process on the GPU; the raw samples are in requests.jsonl"
    ),
    WarningCode.HIGH_VARIANCE: (
        "repeats disagree by more than 10%: make sure nothing else runs on the machine, pin clocks, "
        "or add repeats (sweep.adaptive) until the interval is narrow enough"
    ),
    WarningCode.LOW_ACCEPTANCE: (
        "fewer than 1.2 tokens per target step: the drafter rarely matches this target/prompt mix; check "
        "the draft model matches the target (tokenizer, chat template) and its settings (num tokens, topk)"
    ),
    WarningCode.REQUEST_ERRORS: (
        "some requests failed and are not counted: read their `error` in requests.jsonl (timeouts, "
        "context length, server overload) and fix the cause before trusting throughput"
    ),
    WarningCode.INVALID_CELL: (
        "the error rate is above sweep.max_error_rate (or nothing succeeded): throughput and speedup "
        "are left empty; fix the failing requests and run the cell again"
    ),
    WarningCode.DIVERGENCE_AT_C1: (
        "at temperature 0 and concurrency 1 the output differs from the baseline's: speculative decoding "
        "should be lossless here, so suspect a sampling-parameter mismatch, a different chat template, "
        "or a verification bug; in bf16/fp16 the verify step's multi-token kernels can also flip a near-tie "
        "(see lossless_prefix_mean for how far the outputs agree): rerun with the engine in float32 to tell "
        "numerics from a drafter bug"
    ),
    WarningCode.BATCH_NUMERICS: (
        "some outputs differ from the baseline's in the same cell but equal the baseline's own output for "
        "the same prompt at another concurrency: the baseline itself changes with batch shape (numerics of "
        "the kernels), so this is not evidence against the drafter; compare `lossless_any_match_rate`"
    ),
    WarningCode.SINGLE_REPEAT: (
        "one repeat: no interval for any figure of this cell (requests of one window are not independent "
        "replicates); set sweep.repeats >= 3, sweep.launches >= 2 or sweep.adaptive"
    ),
    WarningCode.FEW_REPEATS: (
        "two units: the t interval has about 1 degree of freedom and is very wide; set sweep.repeats >= 3 "
        "or sweep.adaptive"
    ),
    WarningCode.DRAFTER_INACTIVE: (
        "drafter inactive or misconfigured: one token per target step over the whole variant means nothing "
        "drafted was ever accepted; check the algorithm flag matches the draft head (e.g. EAGLE3 vs EAGLE), "
        "the draft model path, and that the engine log shows speculative decoding enabled"
    ),
    WarningCode.DEGENERATE_WORKLOAD: (
        "degenerate workload: almost every verify step accepted all drafts, so the prompts are repetitive or "
        "trivially predictable and the speedup will not carry over to real traffic; use a realistic prompt "
        "set (sweep.prompts) and check ignore_eos is not padding outputs with a repeated token"
    ),
    WarningCode.ACCEPTANCE_UNKNOWN: (
        "acceptance unknown: the engine's speculative-decoding counters were missing or went backwards "
        "(reset: engine restart) during the window, so no acceptance length is reported for it; make sure the "
        "drafter is configured (a vLLM without a speculative config exports no spec_decode counters) and "
        "that nothing restarted the engine, then measure again"
    ),
    WarningCode.EAGER_ENGINE: (
        "GPU engine launched in eager mode / without CUDA graphs: per-step launch overhead then dominates "
        "and hides the drafter's real cost (or gain); remove --enforce-eager / --disable-cuda-graph"
    ),
    WarningCode.GPU_DRIFT: (
        "GPU clocks or temperature differ between this variant's windows and the baseline's (from "
        "nvidia-smi, recorded per window): thermal or power throttling, or another tenant, changed the "
        "hardware between variants; lock clocks (nvidia-smi -lgc), let the GPU cool, and measure again"
    ),
    WarningCode.IMPOSSIBLE_ACCEPTANCE: (
        "acceptance length below 1 token per target step, which no engine can produce (every step yields at "
        "least its own token): the counters or tokens are not this engine's alone (another run's server on "
        "the same port, a counter reset, a usage that does not match the stream), so no acceptance is "
        "reported for the cell; give each run its own engine.port, make sure nothing restarted the engine, "
        "and measure again"
    ),
    WarningCode.CLIENT_SATURATED: (
        "specbench's own client was saturated in some window of this cell (its CPU time was at least 90% of "
        "the window's wall time, per client process), so TTFT, ITL and throughput measure the client, not "
        "the engine; set client.processes (more client processes, e.g. `auto`: one per free core) or run "
        "specbench on a separate client host, and measure again"
    ),
    WarningCode.UNDER_ADMITTED: (
        "the engine's own gauge of running requests stayed below the cell's concurrency while the client kept C "
        "requests in flight: the rest waited in its queue, so the cell measures a lower concurrency than it "
        "names; raise the engine's batch limit (vLLM --max-num-seqs, SGLang --max-running-requests) or its KV "
        "cache (memory), or read the cell as the concurrency the server ran"
    ),
    WarningCode.PREEMPTED: (
        "the engine preempted requests in this cell (vLLM num_preemptions, SGLang retracted requests): the KV "
        "cache ran out and requests were evicted and recomputed, which slows the variant with the larger KV "
        "footprint (a drafter's own cache); give the engine more KV cache or compare at a lower concurrency"
    ),
    WarningCode.CLIENT_LAGGING: (
        "specbench's own client event loop woke late in some window of this cell (p99 lag at least 50 ms: "
        "chunks waited that long before they were timed), so TTFT and ITL carry the client's delay, even "
        "when its CPU share looks low (a process starved by other load, or a loop shared by too many "
        "streams); set client.processes (e.g. `auto`), lower the concurrency per client process, keep other "
        "load off the client's cores or run specbench on a separate client host, and measure again"

    ),
    WarningCode.CPU_BF16_FALLBACK: (
        "the engine ran bfloat16 on a CPU without native BF16 (no avx512_bf16 / amx_bf16 flag): vLLM could not "
        "build oneDNN's bf16 matmul and fell back to torch's, about 2x slower, so every variant's figures are "
        "those of a slow path; launch with `--dtype auto-cpu` in engine.args (float32 on such a CPU, "
        "bfloat16 where it is native) or `--dtype float32`, and measure again"
    ),
    WarningCode.NO_BASELINE: (
        "the baseline has no valid cell at this sweep point: speedups are empty; run the baseline "
        "variant for this point (or resume the run)"
    ),
    WarningCode.ACCEPTANCE_MISMATCH: (
        "the per-request acceptance figures do not add up to the engine's counter deltas over the window: "
        "something else ran on the server during the window (another client, a health check that generates), "
        "or some responses lacked their figures; run on a dedicated server and compare acceptance.csv with "
        "reconciliation.csv to find the window"
    ),
    WarningCode.SERVER_COUNT_MISMATCH: (
        "the server's latency histogram counted a different number of requests than the client sent in the "
        "window: another client used the server, so counter-based figures of this window mix in its traffic; "
        "run on a dedicated server"
    ),
    WarningCode.CLIENT_TIMING_BELOW_SERVER: (
        "the client measured less time than the server itself recorded, which cannot happen when both time "
        "the same requests: suspect the client's timing (a chunk without tokens taken as the first token) or "
        "a server that counts other requests; compare reconciliation.csv per window"
    ),
    WarningCode.CLIENT_TIMING_ABOVE_SERVER: (
        "the client measured much more than the server recorded: time went to the network, to the server's "
        "HTTP front end before its clock starts (request parsing under a burst), or to a busy client "
        "machine; run the client on an idle machine next to the server, or read docs/fidelity.md on bursts"
    ),
    WarningCode.PAST_EOS: (
        "more than 10% of the output tokens came after the model's own end-of-sequence token, generated only "
        "because ignore_eos is sent: past its end a model tends to loop, which n-gram lookup and any drafter "
        "predict far more easily than real text, so acceptance and speedup overstate real traffic; set "
        "sweep.stop_at_eos: true (requests end where the model ends), or use shorter sweep.output_lens or "
        "prompts whose answers fill the length"
    ),
    WarningCode.FEW_PROMPTS: (
        "the category has fewer distinct prompts than the concurrency, so copies of one prompt ran side by side "
        "(the engine can batch or cache identical text, and the drafter sees it twice); add prompts to the "
        "category (sweep.prompts, per_category) or lower sweep.concurrency to at most its prompt count"
    ),
    WarningCode.BELOW_CONCURRENCY: ("the cell ran fewer than 0.95 C requests at once over its measured interval, so "
                                    "its figures are a lower concurrency's; the detail names the cause and remedy"),
}


@dataclass(frozen=True)
class CellWarning:
    code: WarningCode
    detail: str  # what was measured, e.g. "first repeat 18% below the others"

    @property
    def message(self) -> str:
        return f"{self.detail}: {REMEDY[self.code]}"


def encode_warnings(ws: Iterable[CellWarning]) -> str:
    """The cells table's `warnings` value: a JSON list of {"code", "detail"}; "" when there are none."""
    items = [{"code": w.code.value, "detail": w.detail} for w in ws]
    return json.dumps(items, separators=(",", ":")) if items else ""


def decode_warnings(value: Any) -> list[dict[str, str]]:
    """[{"code", "detail"}] from a `warnings` value; runs written before warnings were kept whole
    stored codes joined by ';' (their detail is then "")."""
    if not isinstance(value, str) or not value.strip():
        return []
    if value.lstrip().startswith("["):
        try:
            items = json.loads(value)
        except ValueError:
            pass  # not JSON after all: read as the older format below
        else:
            if isinstance(items, list):
                return [{"code": str(i.get("code", "")), "detail": str(i.get("detail", ""))}
                        for i in items if isinstance(i, dict)]
    return [{"code": c.strip(), "detail": ""} for c in value.split(";") if c.strip()]


def remedy(code: str) -> str:
    return REMEDY[WarningCode(code)] if code in WarningCode._value2member_map_ else ""


@dataclass(frozen=True)
class WarningRow:
    """One warning code over a run's cells: where it occurred, one measured detail, and the remedy."""

    code: str
    cells: list[str]  # "variant point_id" of each cell with it
    detail: str  # the first cell's detail
    remedy: str


def warning_rows(cells: Iterable[Mapping[Any, Any]]) -> list[WarningRow]:
    """The warnings of a cells table (rows as mappings with variant, point_id, warnings), one row per
    code in order of first appearance."""
    found: dict[str, list[str]] = {}
    detail: dict[str, str] = {}
    for r in cells:
        for w in decode_warnings(r.get("warnings")):
            found.setdefault(w["code"], []).append(f"{r.get('variant')} {r.get('point_id')}")
            detail.setdefault(w["code"], w["detail"])
    return [WarningRow(code, where, detail[code], remedy(code)) for code, where in found.items()]


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


@dataclass(frozen=True)
class CellSummary:
    """What the warnings of one cell look at: figures compute_cells already derived for it."""

    is_baseline: bool
    valid: bool
    repeats: int  # independent units: launches when there are several, else repeats
    window_throughputs: list[float]  # ordered by repeat (the first launch's windows)
    n_requests: int
    n_errors: int
    outlier_count: int
    throughput_cv: float
    acceptance_length: float
    acceptance_source: str
    lossless_match_rate: float
    concurrency: int
    has_baseline: bool
    lossless_any_match_rate: float = float("nan")
    full_accept_fraction: float = float("nan")
    unknown_acceptance_windows: int = 0
    forced: bool = False  # the engine forced the acceptance (specbench surface): its level is the set one
    category: str = ""
    distinct_prompts: int | None = None  # closed loop: the cell's distinct prompts (None: open loop)
    top_concurrency: int = 0  # the largest concurrency of the cell's category in the run
    past_eos_share: float = float("nan")


def cell_warnings(cell: CellSummary) -> list[CellWarning]:
    """The warnings that apply to one cell, in a fixed order."""
    c = cell
    out: list[CellWarning] = []
    if not c.valid:
        out.append(CellWarning(WarningCode.INVALID_CELL, f"{c.n_errors} of {c.n_requests} requests failed"))
    elif c.n_errors:
        out.append(CellWarning(WarningCode.REQUEST_ERRORS, f"{c.n_errors} of {c.n_requests} requests failed"))
    if not c.is_baseline and c.valid and not c.has_baseline:
        out.append(CellWarning(WarningCode.NO_BASELINE, "no baseline cell at this sweep point"))
    if c.repeats == 1:
        out.append(CellWarning(WarningCode.SINGLE_REPEAT, "1 repeat"))
    elif 1 < c.repeats < MIN_REPEATS_FOR_INTERVAL:
        out.append(CellWarning(WarningCode.FEW_REPEATS, f"{c.repeats} repeats"))
    if c.distinct_prompts is not None and 0 < c.distinct_prompts < c.concurrency:
        top = max(c.top_concurrency, c.concurrency)  # the top C needs as many prompts to run each once at a time
        out.append(CellWarning(WarningCode.FEW_PROMPTS, (
            f"category {c.category} has {c.distinct_prompts} prompt(s) at C={c.concurrency}: each in flight up to "
            f"{math.ceil(c.concurrency / c.distinct_prompts)} times at once; C={top} needs {top} prompts")))
    if _finite(c.past_eos_share) and c.past_eos_share > PAST_EOS_SHARE:
        out.append(CellWarning(WarningCode.PAST_EOS,
                               f"{100 * c.past_eos_share:.0f}% of output tokens after the model's first EOS"))
    wt = [x for x in c.window_throughputs if _finite(x)]
    if len(wt) >= 2:
        rest = sum(wt[1:]) / len(wt[1:])
        # slow first repeat: (mean(rest) - first) / mean(rest) > threshold
        if rest > 0 and (rest - wt[0]) / rest > SLOW_FIRST_REPEAT_FRACTION:
            pct = 100 * (rest - wt[0]) / rest
            out.append(CellWarning(WarningCode.SLOW_FIRST_REPEAT, f"first repeat {pct:.0f}% below the others"))
    if _finite(c.throughput_cv) and c.throughput_cv > HIGH_CV:
        out.append(CellWarning(WarningCode.HIGH_VARIANCE, f"throughput cv {100 * c.throughput_cv:.0f}% across repeats"))
    if c.outlier_count > 0:
        out.append(CellWarning(WarningCode.OUTLIERS, f"{c.outlier_count} outlier request(s)"))
    if (
        not c.is_baseline
        and not c.forced  # a forced AL 1 is the point measured, not a head to fix
        and c.acceptance_source != "none"
        and _finite(c.acceptance_length)
        and c.acceptance_length < LOW_ACCEPTANCE_LENGTH
    ):
        out.append(
            CellWarning(WarningCode.LOW_ACCEPTANCE, f"acceptance length {c.acceptance_length:.2f} tokens/step")
        )
    if not c.is_baseline and _finite(c.full_accept_fraction) and c.full_accept_fraction >= DEGENERATE_FRACTION:
        out.append(CellWarning(WarningCode.DEGENERATE_WORKLOAD,
                               f"{100 * c.full_accept_fraction:.0f}% of verify steps accepted every draft"))
    if not c.is_baseline and c.unknown_acceptance_windows:
        out.append(CellWarning(WarningCode.ACCEPTANCE_UNKNOWN,
                               f"{c.unknown_acceptance_windows} window(s) with missing or reset counters"))
    if _finite(c.lossless_match_rate) and c.lossless_match_rate < 1.0:
        # Divergence that matches no baseline output at all is the red flag; divergence that equals the
        # baseline's output at another batch shape is the baseline's own numerics.
        matched = c.lossless_any_match_rate if _finite(c.lossless_any_match_rate) else c.lossless_match_rate
        unexplained = 1.0 - matched
        if c.concurrency == 1 and unexplained > 0:
            out.append(
                CellWarning(
                    WarningCode.DIVERGENCE_AT_C1,
                    f"{100 * unexplained:.0f}% of outputs at C=1 match no baseline output for the same prompt",
                )
            )
        elif unexplained < 1.0 - c.lossless_match_rate:
            out.append(
                CellWarning(
                    WarningCode.BATCH_NUMERICS,
                    f"{100 * (1 - c.lossless_match_rate):.0f}% differ from the same-cell baseline output, "
                    f"{100 * unexplained:.0f}% match no baseline output",
                )
            )
    return out

"""Raw measurements: one RequestRecord per request and one WindowRecord per measured cell repeat.

Everything specbench reports is derived from these two files (`requests.jsonl`, `windows.jsonl`), so
any number can be recomputed. Times are seconds; `t_send` is on the session's clock (time.time() once, then
the monotonic clock: for ordering and windows, as are a window's t_start / t_end), all durations come from
time.perf_counter() differences.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

# A cell's output_len for `sweep.output_lens: [natural]`: each request's max_tokens is its prompt's reference
# answer length in target tokens (plan.windows.natural_lengths; the request record's own max_tokens says it)
NATURAL_OUTPUT = 0


class CellKey(BaseModel):
    """One point of the sweep for one variant. `cell_id` is stable across runs and variants."""

    model_config = {"frozen": True}

    variant: str
    category: str
    input_len: int | None = None  # target prompt length in tokens; None = the prompts as they are
    output_len: int
    concurrency: int  # open loop: the in-flight cap (sweep.load.max_in_flight)
    temperature: float = 0.0
    rate: float | None = None  # open loop: offered requests/s (None: a closed loop at `concurrency`)

    @property
    def point_id(self) -> str:
        """The sweep point, without the variant: pairs a variant's cell with the baseline's. The load is
        `c<concurrency>` for a closed loop, `r<rate>` (requests/s) for an open one."""
        inp = f"in{self.input_len}" if self.input_len else "in-"
        load = f"c{self.concurrency}" if self.rate is None else f"r{self.rate:g}"
        return f"{self.category}|{inp}|out{self.output_len}|{load}|t{self.temperature:g}"

    @property
    def cell_id(self) -> str:
        return f"{self.variant}|{self.point_id}"


class SpecDetails(BaseModel):
    """Per-request acceptance data from the engine's response, one shape for every engine (vLLM
    `metrics.speculative_decoding`, SGLang meta_info / sglext, wrappers). `raw` keeps the engine's own
    payload as it arrived, so every figure here can be recomputed."""

    verify_steps: int | None = None  # target forward passes that produced this request's tokens
    drafted_steps: int | None = None  # of those, the steps that proposed drafts (vLLM num_spec_steps)
    accepted_drafts: int | None = None  # draft tokens accepted
    proposed_drafts: int | None = None  # draft tokens proposed
    accept_histogram: list[int] | None = None  # drafting steps that accepted 0, 1, 2, ... draft tokens
    reported_accept_length: float | None = None  # the engine's own figure, kept for cross-checks
    max_drafts: int | None = None  # drafts a step may propose (k), when the engine says
    source: str | None = None  # where it came from: "vllm", "sglang", "field" (engine.acceptance_field)
    raw: dict[str, Any] | None = None  # the engine's payload, verbatim


class RequestRecord(BaseModel):
    run_id: str = ""
    variant: str
    cell_id: str
    point_id: str
    window_id: str  # variant|point|repeat: all requests measured in one counter window
    category: str
    prompt_id: str
    input_len: int | None = None
    output_len: int  # the cell's; NATURAL_OUTPUT (0): each request's own, in max_tokens
    concurrency: int  # open loop: the in-flight cap
    temperature: float = 0.0
    rate: float | None = None  # open loop: the offered rate (requests/s); None in a closed loop
    launch: int = 1  # which launch of the variant's engine (sweep.launches)
    repeat: int
    index: int  # position in the cell's request sequence; pairs requests across variants
    warmup: bool = False
    t_send: float  # at send, on the session's clock (wall clock at its start + monotonic time since)
    scheduled_s: float | None = None  # open loop: planned send offset from the window's start
    send_lag_s: float | None = None  # open loop: actual - planned send time (the sender's timing error)
    ttft_s: float | None = None  # first chunk that carries output tokens
    e2e_s: float | None = None
    chunk_offsets_s: list[float] = Field(default_factory=list)  # arrival of each token-carrying chunk
    chunk_tokens: list[int] = Field(default_factory=list)  # tokens in each of those chunks
    max_tokens: int | None = None  # the max_tokens sent (a natural cell's differ per prompt); None: older runs
    prompt_tokens: int | None = None  # from the server's usage
    output_tokens: int | None = None  # from the server's usage
    token_ids: list[int] | None = None  # exact output ids, when the engine returns them
    text: str | None = None  # output text (used for losslessness when no ids are available)
    finish_reason: str | None = None
    spec: SpecDetails | None = None
    error: str | None = None  # None = success

    @property
    def ok(self) -> bool:
        return self.error is None


class WindowRecord(BaseModel):
    """A completed measurement window (one repeat of one cell) with its engine-side counter deltas.

    Written after the window's last request finished; a window without this line (crash, Ctrl-C) is
    incomplete and is measured again on resume.
    """

    run_id: str = ""
    window_id: str
    variant: str
    cell_id: str
    point_id: str
    launch: int = 1  # which launch of the variant's engine (sweep.launches)
    repeat: int
    t_start: float
    t_end: float
    n_requests: int
    counters: dict[str, float] | None = None  # engine counter deltas over the window (e.g. vLLM spec_decode)
    per_position_accepted: list[float] | None = None  # accepted drafts by draft position (counter deltas)
    # the engine's state sampled during the window (metrics/engine_state.py window_state: running and waiting
    # requests, KV-cache usage, preemption and queue-time deltas); None when the engine publishes none
    engine_state: dict[str, float] | None = None
    notes: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)

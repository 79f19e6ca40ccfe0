"""The run state (run.json) as a typed model: the run's identity and each variant's status.

The JSON on disk keeps the field names of the dict it replaces, so run directories written by earlier
versions load and resume; keys this version does not know are kept as they are (extra="allow"), and
fields that are unset are left out of the file, as before.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from specbench.records.rundir import RunDir, write_json

# pending: not measured yet; starting: engine launched, not yet ready; running: measuring;
# done / failed (with a reason) / reused (taken from an earlier run); interrupted: SIGINT/SIGTERM mid-variant.
VariantStatus = Literal["pending", "starting", "running", "done", "failed", "interrupted", "reused"]
FINISHED: frozenset[VariantStatus] = frozenset({"done", "reused"})


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class VariantState(BaseModel):
    """One variant's entry in run.json."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    status: VariantStatus = "pending"
    drafter: str | None = None
    fingerprint: str | None = None  # see reuse.variant_fingerprints
    reason: str | None = None  # first line of the error, when failed
    pid: int | None = None  # the engine's pid in its last launch
    startup_s: float | None = None  # seconds from launch until it generated
    wall_s: float | None = None  # seconds spent on the variant, summed over launches and resumes
    reused_from: str | None = None  # the run directory its measurements were copied from
    nodes: list[str] | None = None  # --scheduler slurm: the nodes of its last launch (rank 0 first)

    def fail(self, reason: str) -> None:
        self.status, self.reason = "failed", reason.splitlines()[0] if reason else reason

    def succeed(self) -> None:
        self.status, self.reason = "done", None


class RunState(BaseModel):
    """run.json: written after every variant and on every exit path (interrupt included)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    run_id: str
    created: str
    name: str | None = None
    baseline: str | None = None
    config_hash: str | None = None
    padding_document: str | None = None  # source of the long-prompt padding (sweep.input_lens)
    interrupted: str | None = None  # when the last interruption happened (moved to `interruptions` on resume)
    interruptions: list[str] | None = None
    resumed: list[str] | None = None
    # the verdict settings at the start: outside the config hash, so a report re-rendered with others says so
    verdict: dict[str, Any] | None = None
    variants: dict[str, VariantState] = {}
    # the variance history at the start: setup, history file, candidate entries, the others and why (calibration.Lookup)
    variance_history: dict[str, Any] | None = None
    launch_order: str | None = None  # scheduler.ORDERS; unset in runs started before it: "interleaved"

    @classmethod
    def new(cls) -> RunState:
        return cls(run_id=secrets.token_hex(6), created=now_utc())

    @classmethod
    def load(cls, rd: RunDir) -> RunState:
        """The state in rd's run.json (a new one when there is none)."""
        if not rd.meta.exists():
            return cls.new()
        data = json.loads(rd.meta.read_text())
        data.setdefault("run_id", secrets.token_hex(6))
        data.setdefault("created", now_utc())
        return cls.model_validate(data)

    def save(self, rd: RunDir) -> None:
        write_json(rd.meta, self.to_json())

    def to_json(self) -> dict[str, object]:
        return self.model_dump(mode="json", exclude_none=True)

    def note_resume(self) -> None:
        """A resume: an earlier interruption moves to the history, and the resume itself is recorded
        (also after a kill -9, which leaves no `interrupted` mark behind)."""
        if self.interrupted is not None:
            self.interruptions = [*(self.interruptions or []), self.interrupted]
            self.interrupted = None
        self.resumed = [*(self.resumed or []), now_utc()]

    def mark_interrupted(self) -> None:
        self.interrupted = now_utc()
        for vs in self.variants.values():
            if vs.status in ("running", "starting"):
                vs.status = "interrupted"  # resume measures its unfinished windows again

    def statuses(self) -> dict[str, VariantStatus]:
        return {name: vs.status for name, vs in self.variants.items()}

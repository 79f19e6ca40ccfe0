"""Config -> the sweep: its points, and the exact requests of every measurement window.

The same point gets the same requests (prompt, order, seed) on every variant, so requests pair up
across variants by (point_id, repeat, index) for speedup intervals and the losslessness check.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import TypedDict

from .config import RunConfig
from .engines.base import RequestSpec
from .prompts import Prompt
from .records import CellKey


class RequestIdentity(TypedDict):
    """Which request this is: the identity fields of its RequestRecord (see records.RequestRecord)."""

    variant: str
    cell_id: str
    point_id: str
    window_id: str
    category: str
    prompt_id: str
    input_len: int | None
    output_len: int
    concurrency: int
    temperature: float
    repeat: int
    index: int
    warmup: bool


@dataclass(frozen=True)
class PlannedRequest:
    """One request of a window, before it is sent. `fields` become the RequestRecord's identity."""

    spec: RequestSpec
    fields: RequestIdentity


@dataclass(frozen=True)
class SweepPoint:
    category: str
    input_len: int | None
    output_len: int
    concurrency: int
    temperature: float

    def key(self, variant: str) -> CellKey:
        return CellKey(variant=variant, category=self.category, input_len=self.input_len,
                       output_len=self.output_len, concurrency=self.concurrency, temperature=self.temperature)


@dataclass
class Sweep:
    points: list[SweepPoint]
    prompts: dict[str, list[Prompt]]  # category -> prompts (possibly padded to input lengths)
    padded: dict[tuple[str, int], str]  # (prompt id, input_len) -> text

    def fingerprint(self, cfg: RunConfig) -> str:
        """Hash of everything that decides what the sweep sends (for reuse across runs)."""
        s = cfg.sweep
        blob = json.dumps({
            "points": [p.__dict__ for p in self.points],
            "prompts": {c: [(p.id, p.text) for p in ps] for c, ps in sorted(self.prompts.items())},
            "padded": sorted(self.padded.items()),
            "waves": s.waves, "repeats": s.repeats, "adaptive": s.adaptive and s.adaptive.model_dump(),
            "warmup": s.warmup_requests, "seed": s.seed, "endpoint": s.endpoint,
            "system": s.system_prompt, "chat_template_kwargs": s.chat_template_kwargs,
        }, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_sweep(cfg: RunConfig, prompts: list[Prompt], pad=None) -> Sweep:
    """`pad(text, n_tokens) -> text` builds long prompts for the input-length axis (None: no axis)."""
    by_cat: dict[str, list[Prompt]] = defaultdict(list)
    for p in prompts:
        by_cat[p.category].append(p)
    s = cfg.sweep
    input_lens: list[int | None] = list(s.input_lens) if s.input_lens else [None]
    padded: dict[tuple[str, int], str] = {}
    if s.input_lens and pad is not None:
        for p, n in itertools.product(prompts, s.input_lens):
            padded[(p.id, n)] = pad(p.text, n)
    # Order: short outputs first, then rising concurrency, categories inside: same on every variant.
    points = [SweepPoint(category=c, input_len=i, output_len=o, concurrency=k, temperature=t)
              for t in s.temperatures for i in input_lens for o in s.output_lens
              for k in s.concurrency for c in by_cat]
    return Sweep(points=points, prompts=dict(by_cat), padded=padded)


def window_requests(cfg: RunConfig, sweep: Sweep, point: SweepPoint, variant: str,
                    repeat: int) -> list[PlannedRequest]:
    """The requests of one window: waves x concurrency, prompts of the category in rotation."""
    key = point.key(variant)
    prompts = sweep.prompts[point.category]
    n = cfg.sweep.waves * point.concurrency
    out = []
    for index in range(n):
        prompt = prompts[index % len(prompts)]
        text = sweep.padded.get((prompt.id, point.input_len), prompt.text) if point.input_len else prompt.text
        spec = request_spec(cfg, text, point.output_len, point.temperature, seed=cfg.sweep.seed + index)
        out.append(PlannedRequest(spec=spec, fields=RequestIdentity(
            variant=variant, cell_id=key.cell_id, point_id=key.point_id,
            window_id=f"{key.cell_id}|r{repeat}", category=point.category, prompt_id=prompt.id,
            input_len=point.input_len, output_len=point.output_len, concurrency=point.concurrency,
            temperature=point.temperature, repeat=repeat, index=index, warmup=False)))
    return out


def warmup_requests(cfg: RunConfig, sweep: Sweep, variant: str) -> list[PlannedRequest]:
    """Warmup: the first prompts of the sweep at its shortest output length; recorded, flagged, unused."""
    all_prompts = [p for ps in sweep.prompts.values() for p in ps]
    out_len = min(cfg.sweep.output_lens)
    out = []
    for index in range(cfg.sweep.warmup_requests):
        prompt = all_prompts[index % len(all_prompts)]
        spec = request_spec(cfg, prompt.text, out_len, 0.0, seed=cfg.sweep.seed + index)
        out.append(PlannedRequest(spec=spec, fields=RequestIdentity(
            variant=variant, cell_id=f"{variant}|warmup", point_id="warmup", window_id=f"{variant}|warmup",
            category=prompt.category, prompt_id=prompt.id, input_len=None, output_len=out_len, concurrency=1,
            temperature=0.0, repeat=0, index=index, warmup=True)))
    return out


def request_spec(cfg: RunConfig, text: str, max_tokens: int, temperature: float, seed: int) -> RequestSpec:
    s = cfg.sweep
    messages = ([{"role": "system", "content": s.system_prompt}] if s.system_prompt else [])
    messages.append({"role": "user", "content": text})
    return RequestSpec(messages=messages, prompt_text=text, max_tokens=max_tokens, temperature=temperature,
                       seed=seed, endpoint=s.endpoint, chat_template_kwargs=dict(s.chat_template_kwargs))

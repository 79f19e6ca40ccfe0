"""Config -> the sweep: its points, and the exact requests of every measurement window.

The same point gets the same requests (prompt, order, seed) on every variant, so requests pair up
across variants by (point_id, repeat, index) for speedup intervals and the losslessness check.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from specbench.config import NATURAL, SweepConfig, VariantConfig
from specbench.plan.arrivals import Trace, arrival_offsets, load_trace
from specbench.plan.natural import natural_lengths
from specbench.plan.prompts import Prompt
from specbench.plan.specs import RequestSpec
from specbench.plan.subset import stratified_subset
from specbench.shared.errors import ConfigError
from specbench.shared.schema import NATURAL_OUTPUT, CellKey


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
    launch: int
    repeat: int
    index: int
    warmup: bool
    rate: NotRequired[float | None]  # open loop only


@dataclass(frozen=True)
class PlannedRequest:
    """One request of a window, before it is sent. `fields` become the RequestRecord's identity."""

    spec: RequestSpec
    fields: RequestIdentity
    at_s: float | None = None  # open loop: send offset from the window's start (None: closed loop)


@dataclass(frozen=True)
class SweepPoint:
    category: str
    input_len: int | None
    output_len: int
    concurrency: int  # open loop: the in-flight cap
    temperature: float
    rate: float | None = None  # open loop: offered requests/s

    def key(self, variant: str) -> CellKey:
        return CellKey(variant=variant, category=self.category, input_len=self.input_len,
                       output_len=self.output_len, concurrency=self.concurrency, temperature=self.temperature,
                       rate=self.rate)

    def at_rate(self, rate: float) -> SweepPoint:
        """The same point offered at another rate (capacity search)."""
        return SweepPoint(category=self.category, input_len=self.input_len, output_len=self.output_len,
                          concurrency=self.concurrency, temperature=self.temperature, rate=rate)


MIXED = "mixed"  # an open-loop point's category when it offers prompts of several categories


@dataclass
class Sweep:
    points: list[SweepPoint]
    prompts: dict[str, list[Prompt]]  # category -> prompts (possibly padded to input lengths)
    padded: dict[tuple[str, int], str]  # (prompt id, input_len) -> text
    trace: Trace | None = None  # open loop: a recorded arrival trace replayed instead of drawn arrivals
    # sweep.output_lens natural: prompt id -> its max_tokens (the reference answer's length in target tokens)
    natural: dict[str, int] = field(default_factory=dict)
    # sweep.subset: category -> the seeded subset sent at concurrency <= subset_up_to (plan.subset)
    subset: dict[str, list[Prompt]] = field(default_factory=dict)
    subset_up_to: int = 0

    def point_prompts(self, point: SweepPoint) -> list[Prompt]:
        """The prompts a point sends in rotation: its category's (its subset at a level <= sweep.subset.up_to),
        or all of them for a mixed open-loop point."""
        if point.category == MIXED:
            return [p for ps in self.prompts.values() for p in ps]
        if point.rate is None and point.concurrency <= self.subset_up_to and point.category in self.subset:
            return self.subset[point.category]
        return self.prompts[point.category]

    def fingerprint(self, s: SweepConfig) -> str:
        """Hash of everything that decides what the sweep sends (for reuse across runs)."""
        blob = json.dumps({
            "points": [p.__dict__ for p in self.points],
            "prompts": {c: [(p.id, p.text) for p in ps] for c, ps in sorted(self.prompts.items())},
            "padded": sorted(self.padded.items()),
            "waves": s.waves, "repeats": s.repeats, "adaptive": s.adaptive and s.adaptive.model_dump(),
            "warmup": s.warmup_requests, "seed": s.seed, "endpoint": s.endpoint,
            "system": s.system_prompt, "chat_template_kwargs": s.chat_template_kwargs,
            **({"stop_at_eos": True} if s.stop_at_eos else {}),  # absent when off: earlier fingerprints hold
            **({"natural": sorted(self.natural.items())} if self.natural else {}),
            **({"subset": s.subset.model_dump()} if s.subset else {}),  # absent when off, as stop_at_eos
            **({"load": s.load.model_dump(exclude={"trace", "max_send_lag_s"}),
                "trace": [t.__dict__ for t in self.trace.requests] if self.trace else None} if s.load.open else {}),
        }, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def measured(variants: list[VariantConfig], variant: str, point: SweepPoint) -> bool:
    """Whether `variant` measures `point`: False above its `max_concurrency` (its server serves at most that
    many requests at once, so those cells are "not measured", never failures). docs/metrics.md, "Cells"."""
    cap = next(v for v in variants if v.name == variant).max_concurrency
    return cap is None or point.concurrency <= cap


def variant_points(variants: list[VariantConfig], sweep: Sweep, variant: str) -> list[SweepPoint]:
    """The sweep's points that `variant` measures, in the sweep's order."""
    return [p for p in sweep.points if measured(variants, variant, p)]


def capped_variants(variants: list[VariantConfig], concurrency: list[int]) -> dict[str, int]:
    """Variant -> its max_concurrency, for the variants whose cap leaves some of the sweep's `concurrency`
    unmeasured."""
    top = max(concurrency)
    return {v.name: v.max_concurrency for v in variants
            if v.max_concurrency is not None and v.max_concurrency < top}


def build_sweep(s: SweepConfig, prompts: list[Prompt], pad=None, count: Callable[[str], int] | None = None,
                context: int | None = None) -> Sweep:
    """`pad(text, n_tokens) -> text` builds long prompts for the input-length axis (None: no axis).
    `count(text) -> tokens` is the target's tokenizer, for `output_lens: [natural]` (`natural_lengths`);
    `context` the model's context length when known, which caps them."""
    by_cat: dict[str, list[Prompt]] = defaultdict(list)
    for p in prompts:
        by_cat[p.category].append(p)
    input_lens: list[int | None] = list(s.input_lens) if s.input_lens else [None]
    out_lens = [o if isinstance(o, int) else NATURAL_OUTPUT for o in s.output_lens]
    natural = natural_lengths(s, prompts, count, context) if NATURAL in s.output_lens else {}
    trace = _trace(s, prompts)
    pad_lens = set(s.input_lens or []) | {r.input_len for r in (trace.requests if trace else []) if r.input_len}
    if pad_lens and pad is None and trace and not s.input_lens:
        raise ConfigError("sweep.load.trace", "input_len in a trace needs a local tokenizer (model.tokenizer)")
    padded: dict[tuple[str, int], str] = {}
    if pad_lens and pad is not None:
        for p, n in itertools.product(prompts, sorted(pad_lens)):
            padded[(p.id, n)] = pad(p.text, n)
    if s.load.open:  # one mixed point per rate: traffic is a mix of the prompts, not one category at a time
        cats = list(by_cat)
        cat = cats[0] if len(cats) == 1 else MIXED
        rates = s.load.rates or ([trace.rate] if trace else [])
        points = [SweepPoint(category=cat, input_len=i, output_len=o, concurrency=s.load.max_in_flight,
                             temperature=t, rate=r)
                  for t in s.temperatures for i in input_lens for o in out_lens for r in rates]
        return Sweep(points=points, prompts=dict(by_cat), padded=padded, trace=trace, natural=natural)
    # Order: short outputs first, then rising concurrency, categories inside: same on every variant.
    points = [SweepPoint(category=c, input_len=i, output_len=o, concurrency=k, temperature=t)
              for t in s.temperatures for i in input_lens for o in out_lens
              for k in s.concurrency for c in by_cat]
    subset = stratified_subset(by_cat, s.subset.per_category, s.seed) if s.subset else {}
    return Sweep(points=points, prompts=dict(by_cat), padded=padded, natural=natural, subset=subset,
                 subset_up_to=s.subset.up_to if s.subset else 0)


def _trace(s: SweepConfig, prompts: list[Prompt]) -> Trace | None:
    """The open loop's trace file, read and checked against the prompts (ConfigError naming the field)."""
    path = s.load.trace
    if not path:
        return None
    try:
        trace = load_trace(path)
    except ValueError as exc:
        raise ConfigError("sweep.load.trace", str(exc)) from None
    known = {p.id for p in prompts}
    for i, r in enumerate(trace.requests):
        if r.prompt_id is not None and r.prompt_id not in known:
            raise ConfigError("sweep.load.trace", f"request {i + 1}: prompt_id {r.prompt_id!r} is not one of "
                              "the sweep's prompts")
    return trace


def level_requests(s: SweepConfig, concurrency: int) -> int:
    """The requests a closed-loop window at C needs: `waves x C` steady ones (docs/metrics.md, "The measured
    interval"), plus the C of its ramp and the C of its drain; `waves` at C=1 (no ramp, no drain)."""
    return s.waves if concurrency <= 1 else (s.waves + 2) * concurrency


def category_passes(s: SweepConfig, n_prompts: int, concurrency: int) -> int:
    """Whole passes through a category's prompts in a closed-loop window at C: what that level needs, never what
    the largest C needs (docs/guide.md, "The workload of a window")."""
    return max(1, math.ceil(level_requests(s, concurrency) / max(1, n_prompts)))


def window_prompts(s: SweepConfig, prompts: list[Prompt], category: str, repeat: int, launch: int,
                   concurrency: int) -> list[Prompt]:
    """A closed-loop window's prompts in sending order: the category's set `category_passes` times, each pass in
    its own order seeded by the repeat and launch (never the variant or the point): every variant sends the
    same list at a point, and a level with more passes sends the same first passes."""
    rng = random.Random(f"{s.seed}|{category}|l{launch}|r{repeat}")
    out: list[Prompt] = []
    for _ in range(category_passes(s, len(prompts), concurrency)):
        one = list(prompts)
        rng.shuffle(one)
        out.extend(one)
    return out


def point_requests(s: SweepConfig, sweep: Sweep, point: SweepPoint) -> int:
    """How many requests one window of the point sends (warmup included in an open loop)."""
    load = s.load
    if point.rate is None:
        k = len(sweep.point_prompts(point))
        return k * category_passes(s, k, point.concurrency)
    return len(sweep.trace.requests) if sweep.trace else load.warmup_requests + load.requests_per_rate


def schedule_seed(s: SweepConfig, repeat: int) -> int:
    """The arrival seed of a window: the same for every variant, launch and rate; one per repeat."""
    return s.seed + 7919 * (repeat - 1)


def window_id(cell_id: str, repeat: int, launch: int = 1) -> str:
    """A window's id: `<cell>|r<repeat>` in a variant's first launch (as runs without launches have always
    written it, so they resume unchanged), `<cell>|l<launch>r<repeat>` in later launches."""
    return f"{cell_id}|r{repeat}" if launch == 1 else f"{cell_id}|l{launch}r{repeat}"


def window_requests(s: SweepConfig, sweep: Sweep, point: SweepPoint, variant: str,
                    repeat: int, launch: int = 1) -> list[PlannedRequest]:
    """The requests of one window. Closed loop: the category's whole prompt set in `category_passes` passes
    (`window_prompts`: each prompt equally often, the order rotated by repeat and launch). Open
    loop: the point's prompts in rotation, or as its trace names them. Every variant sends the same requests
    (same prompts, seeds, lengths) at a point, so variants compare like for like."""
    key = point.key(variant)
    prompts = sweep.point_prompts(point)
    by_id = {p.id: p for p in prompts}
    n = point_requests(s, sweep, point)
    offsets = _offsets(s, sweep, point, n, repeat)
    order = window_prompts(s, prompts, point.category, repeat, launch, point.concurrency) if not point.rate else None
    load = s.load
    out = []
    for index in range(n):
        prompt = order[index] if order is not None else prompts[index % len(prompts)]
        input_len, out_len = point.input_len, point.output_len
        if out_len == NATURAL_OUTPUT:
            out_len = sweep.natural[prompt.id]
        if sweep.trace is not None:  # a trace line may name its prompt and lengths
            line = sweep.trace.requests[index]
            prompt = by_id.get(line.prompt_id or "", prompt)
            input_len, out_len = line.input_len or input_len, line.output_len or out_len
        text = sweep.padded.get((prompt.id, input_len), prompt.text) if input_len else prompt.text
        spec = request_spec(s, text, out_len, point.temperature, seed=s.seed + index)
        fields = RequestIdentity(
            variant=variant, cell_id=key.cell_id, point_id=key.point_id,
            window_id=window_id(key.cell_id, repeat, launch), category=point.category, prompt_id=prompt.id,
            input_len=point.input_len, output_len=point.output_len, concurrency=point.concurrency,
            temperature=point.temperature, launch=launch, repeat=repeat, index=index, warmup=False)
        if point.rate is not None:  # open loop: the first requests ramp the load up and are left out
            fields["rate"] = point.rate
            fields["warmup"] = index < load.warmup_requests
        out.append(PlannedRequest(spec=spec, fields=fields, at_s=offsets[index] if offsets else None))
    return out


def _offsets(s: SweepConfig, sweep: Sweep, point: SweepPoint, n: int, repeat: int) -> list[float] | None:
    """Open loop: the window's send offsets (seeded, the same for every variant); None for a closed loop."""
    if point.rate is None:
        return None
    if sweep.trace is not None:
        return sweep.trace.offsets(point.rate)
    load = s.load  # the measured requests (after the warmup) realize the rate exactly
    return arrival_offsets(load.arrival, n, point.rate, schedule_seed(s, repeat), load.burstiness,
                           fit_from=load.warmup_requests)


def warmup_requests(s: SweepConfig, sweep: Sweep, variant: str, launch: int = 1) -> list[PlannedRequest]:
    """Warmup: the first prompts of the sweep at its shortest output length (fixed, or natural); recorded,
    flagged, unused."""
    all_prompts = [p for ps in sweep.prompts.values() for p in ps]
    out_len = min(s.fixed_output_lens + list(sweep.natural.values()))
    out = []
    for index in range(s.warmup_requests):
        prompt = all_prompts[index % len(all_prompts)]
        spec = request_spec(s, prompt.text, out_len, 0.0, seed=s.seed + index)
        out.append(PlannedRequest(spec=spec, fields=RequestIdentity(
            variant=variant, cell_id=f"{variant}|warmup", point_id="warmup", window_id=f"{variant}|warmup",
            category=prompt.category, prompt_id=prompt.id, input_len=None, output_len=out_len, concurrency=1,
            temperature=0.0, launch=launch, repeat=0, index=index, warmup=True)))
    return out


def request_spec(s: SweepConfig, text: str, max_tokens: int, temperature: float, seed: int) -> RequestSpec:
    messages = ([{"role": "system", "content": s.system_prompt}] if s.system_prompt else [])
    messages.append({"role": "user", "content": text})
    return RequestSpec(messages=messages, prompt_text=text, max_tokens=max_tokens, temperature=temperature,
                       seed=seed, endpoint=s.endpoint, chat_template_kwargs=dict(s.chat_template_kwargs),
                       ignore_eos=not s.stop_at_eos)

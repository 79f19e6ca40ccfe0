"""sweep.subset: a seeded stratified prompt subset at the slow levels, the same for every variant."""

from __future__ import annotations

from specbench.config import SubsetConfig, SweepConfig
from specbench.plan.prompts import Prompt
from specbench.plan.subset import applies, common_prompts, level_prompt_count, stratified_subset
from specbench.plan.windows import build_sweep, point_requests, window_requests

PROMPTS = [Prompt(f"{c}{i}", c, f"{c} prompt {i}") for c in ("chat", "code") for i in range(12)]


def _sweep(subset: dict[str, int] | None) -> SweepConfig:
    return SweepConfig.model_validate({"output_lens": [16, 32], "concurrency": [1, 2, 8], "subset": subset})


def test_subset_is_stratified_seeded_and_in_the_sets_order() -> None:
    by_cat = {c: [p for p in PROMPTS if p.category == c] for c in ("chat", "code")}
    a, b = stratified_subset(by_cat, 4, seed=0), stratified_subset(by_cat, 4, seed=0)
    assert a == b and {c: len(v) for c, v in a.items()} == {"chat": 4, "code": 4}
    for c, kept in a.items():
        ids = [p.id for p in by_cat[c]]
        assert [ids.index(p.id) for p in kept] == sorted(ids.index(p.id) for p in kept)
    assert stratified_subset(by_cat, 4, seed=1) != a  # another seed, another draw
    assert stratified_subset(by_cat, 20, seed=0) == by_cat  # a category smaller than the subset: whole
    assert common_prompts(a, by_cat) == {c: [p.id for p in a[c]] for c in a}


def test_levels_up_to_the_subset_send_it_and_every_variant_the_same() -> None:
    cfg = _sweep({"up_to": 2, "per_category": 4})
    sweep = build_sweep(cfg, PROMPTS)
    for point in sweep.points:
        sent = {r.fields["prompt_id"] for r in window_requests(cfg, sweep, point, "a", 1)}
        other = [r.fields["prompt_id"] for r in window_requests(cfg, sweep, point, "b", 1)]
        assert other == [r.fields["prompt_id"] for r in window_requests(cfg, sweep, point, "a", 1)]
        if point.concurrency <= 2:
            assert sent == {p.id for p in sweep.subset[point.category]} and len(sent) == 4
        else:
            assert len(sent) == 12
    at = {p.concurrency: point_requests(cfg, sweep, p) for p in sweep.points if p.category == "chat"}
    assert at == {1: 4, 2: 8, 8: 24}  # C=2: 6 requests wanted, whole passes of 4 prompts


def test_the_subset_changes_the_fingerprint_and_is_off_by_default() -> None:
    plain, sub = _sweep(None), _sweep({"up_to": 2, "per_category": 4})
    assert build_sweep(plain, PROMPTS).fingerprint(plain) != build_sweep(sub, PROMPTS).fingerprint(sub)
    assert build_sweep(plain, PROMPTS).subset == {}
    s = SubsetConfig(up_to=4, per_category=6)
    assert applies(s, 4) and not applies(s, 8) and not applies(None, 1)
    assert level_prompt_count(s, 32, 1) == 6 and level_prompt_count(s, 32, 8) == 32 and level_prompt_count(s, 3, 1) == 3

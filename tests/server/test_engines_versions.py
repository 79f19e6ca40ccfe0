"""One version parser (PEP 440, packaging.version) for drafter recipes, pins and preflight alike."""

from __future__ import annotations

import pytest

from specbench.config import parse_config
from specbench.plan.drafter import Drafter
from specbench.server.engines.base import parse_version
from specbench.server.engines.sglang import SGLangEngine
from specbench.server.launch import plan_launches, sweep_facts


@pytest.mark.parametrize("raw,expected", [
    ("0.5.23", (0, 5, 23)),
    ("0.5.20rc1", (0, 5, 20)),
    ("0.11.0rc3", (0, 11, 0)),
    ("0.5.23+ddtree", (0, 5, 23)),
    ("0.5.9.post1", (0, 5, 9)),
    ("1.0.0.dev4", (1, 0, 0)),
    ("", None),
    (None, None),
    ("nightly", None),
])
def test_parse_version(raw: str | None, expected: tuple[int, ...] | None) -> None:
    assert parse_version(raw) == expected


@pytest.mark.parametrize("raw", ["0.5.20rc1", "0.11.0rc3"])
def test_drafter_recipes_see_the_same_version_as_preflight(raw: str, monkeypatch) -> None:
    """plan_launches (drafter recipes) and preflight must read a pre-release alike."""
    seen = []
    real = Drafter.launch_args

    def spy(self, params, ctx):
        seen.append(ctx.engine_version)
        return real(self, params, ctx)

    monkeypatch.setattr(Drafter, "launch_args", spy)
    cfg = parse_config({"model": {"path": "/m"}, "engine": {"kind": "sglang", "version": raw},
                        "variants": [{"name": "a", "drafter": "autoregressive", "baseline": True}],
                        "sweep": {"output_lens": [8], "concurrency": [1]}})
    plan_launches(cfg, SGLangEngine(cfg.engine, sweep_facts(cfg), "/m", "m"))
    assert seen == [parse_version(raw)]

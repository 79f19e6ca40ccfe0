"""A drafter named by its import target (`module:Class` or `module:INSTANCE`), as the registry documents."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from specbench.config import parse_config
from specbench.plan.drafter import DRAFTERS, Drafter
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import plan_launches, sweep_facts
from specbench.shared.errors import ConfigError

MODULE = textwrap.dedent('''
    from pydantic import Field
    from specbench.plan.drafter import Drafter, DrafterParams, vllm_speculative_config

    class Medusa(Drafter):
        name = "medusa"

        class Params(DrafterParams):
            heads: int = Field(3, ge=1)

        def vllm(self, p, ctx):
            return vllm_speculative_config({"method": "medusa", "num_speculative_tokens": p.heads})

    DRAFTER = Medusa()
''')


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"user_drafters_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)
    DRAFTERS._cache.clear()


def _plan(drafter: str, params: dict) -> list:
    cfg = parse_config({"model": {"path": "/m"}, "engine": {"kind": "vllm", "version": "0.10.0"},
                        "variants": [{"name": "a", "drafter": "autoregressive", "baseline": True},
                                     {"name": "m", "drafter": drafter, "params": params}],
                        "sweep": {"output_lens": [8], "concurrency": [1]}})
    return plan_launches(cfg, VLLMEngine(cfg.engine, sweep_facts(cfg), "/m", "m"))


@pytest.mark.parametrize("attr", ["Medusa", "DRAFTER"])
def test_import_target_class_or_instance(user_module: str, attr: str) -> None:
    la = _plan(f"{user_module}:{attr}", {"heads": 5})
    assert isinstance(la[1].drafter, Drafter) and la[1].drafter.name == "medusa"
    assert la[1].params.heads == 5
    assert la[1].drafter_args == ("--speculative-config", '{"method":"medusa","num_speculative_tokens":5}')


def test_import_target_that_is_not_a_drafter() -> None:
    with pytest.raises(ConfigError, match=r"variants\[1\]\.drafter: .*json:dumps.* not a specbench Drafter"):
        _plan("json:dumps", {})

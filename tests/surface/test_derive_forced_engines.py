"""Forced acceptance on each engine (issue 38, item 5): SGLang's three variables and its chain rule, the
vllm-cpu plugin's version guard, k read per drafter and the range check, and which variants a surface offers."""

from __future__ import annotations

import sys
import types

import pytest

from specbench.config import parse_config
from specbench.shared.errors import ConfigError
from specbench.surface.derive import surface_config


def _cfg(kind: str, variant: dict, extra: dict | None = None):
    return parse_config({
        "name": "t", "model": {"path": "/m"}, "engine": {"kind": kind, **(extra or {})},
        "variants": [{"name": "ar", "drafter": "autoregressive", "baseline": True}, {"name": "d", **variant}],
        "sweep": {"prompts": [{"set": "seed"}], "output_lens": [64], "concurrency": [1, 4]}})


def _forced(cfg, al: float):
    from specbench.server.launch import make_engine, plan_launches

    derived = surface_config(cfg, ["d"], {"d": [al]})
    return {la.name: la for la in plan_launches(derived, make_engine(derived, "/m", "m"))}


EAGLE_CHAIN = {"drafter": "eagle3", "params": {"draft_model_path": "/nonexistent-head", "steps": 3, "topk": 1}}
SG = {"version": "0.5.23"}


def test_a_sglang_forced_variant_sets_length_method_and_token_mode():
    la = _forced(_cfg("sglang", EAGLE_CHAIN, SG), 2.5)["d-al2.5"]
    assert la.spec.env["SGLANG_SIMULATE_ACC_LEN"] == "2.5"
    assert la.spec.env["SGLANG_SIMULATE_ACC_METHOD"] == "match-expected"
    assert la.spec.env["SGLANG_SIMULATE_ACC_TOKEN_MODE"] == "real-draft-token"
    from specbench.checks.fairness import audit

    launches = _forced(_cfg("sglang", EAGLE_CHAIN, SG), 2.5)
    assert audit(list(launches.values())).fair  # the three variables are the forcing, not an unfair setting


@pytest.mark.parametrize("variant, match", [
    ({**EAGLE_CHAIN, "params": {**EAGLE_CHAIN["params"], "topk": 4, "num_draft_tokens": 8}},
     r"variants\[1\]\.forced_acceptance: .*topk=1 chains only; this EAGLE3 drafts a tree of topk 4"),
    ({**EAGLE_CHAIN, "params": {"draft_model_path": "/nonexistent-head"}}, r"set params.topk: 1"),
    ({"drafter": "ngram", "params": {"num_tokens": 3}}, r"NGRAM verifies a tree"),
    ({**EAGLE_CHAIN}, r"outside \[1, 4\] \(3 draft tokens per step\)"),  # at 4.5, below
])
def test_sglang_refuses_trees_and_lengths_beyond_k_plus_one(variant, match):
    with pytest.raises(ConfigError, match=match):
        _forced(_cfg("sglang", variant, SG), 4.5 if "outside" in match else 2.0)


def test_a_profile_reaches_vllm_as_its_rates_and_is_refused_where_one_length_is_all():
    from specbench.server.launch import make_engine, plan_launches

    def launches(cfg, profile):
        derived = surface_config(cfg, ["d"], {"d": [2.0]}, {"d": profile})
        return {la.name: la for la in plan_launches(derived, make_engine(derived, "/m", "m"))}

    ngram = {"drafter": "ngram", "params": {"num_tokens": 3}}
    argv = launches(_cfg("vllm", ngram), [0.8, 0.5, 0.25])["d-al2.55-profile"].spec.argv
    spec = argv[argv.index("--speculative-config") + 1]
    assert '"synthetic_acceptance_rates":[0.8,0.5,0.25]' in spec and "synthetic_acceptance_length" not in spec
    with pytest.raises(ConfigError, match=r"^variants\[2\]\.forced_acceptance: a profile of 2 positions, but 3 draft "
                                          r"tokens per step \(one rate per draft position\)$"):
        launches(_cfg("vllm", ngram), [0.8, 0.5])
    with pytest.raises(ConfigError, match=r"^variants\[2\]\.forced_acceptance: engine sglang forces one mean "
                                          r"acceptance length, not a per-position profile"):
        launches(_cfg("sglang", EAGLE_CHAIN, SG), [0.8, 0.5, 0.25])
    ddtree = {"drafter": "ddtree", "params": {"mode": "command", "tree_budget": 16},
              "command": ["serve", "--port", "{port}", "--force", "{forced_acceptance}"]}
    with pytest.raises(ConfigError, match=r"\{forced_acceptance\} takes one mean acceptance length"):
        launches(_cfg("vllm", ddtree), [0.8])


def test_k_is_read_for_dflash_and_ngram_on_both_engines():
    from specbench.surface.operations import variant_k

    dflash = {"drafter": "dflash", "params": {"draft_model_path": "/nonexistent-dflash", "block_size": 5}}
    ngram = {"drafter": "ngram", "params": {"num_tokens": 6}}
    assert variant_k(_cfg("sglang", dflash, SG), "d") == 4  # the block holds the anchor
    assert variant_k(_cfg("vllm", dflash), "d") == 4
    assert variant_k(_cfg("sglang", ngram, SG), "d") == 6  # --speculative-num-draft-tokens 7 counts the root
    assert variant_k(_cfg("vllm", ngram), "d") == 6
    assert _forced(_cfg("sglang", dflash, SG), 5.0)["d-al5"].spec.env["SGLANG_SIMULATE_ACC_LEN"] == "5"
    with pytest.raises(ConfigError, match=r"outside \[1, 5\]"):
        _forced(_cfg("sglang", dflash, SG), 5.5)


def test_a_command_server_is_offered_for_forcing_only_when_its_template_takes_the_length():
    from specbench.surface.operations import forceable

    ddtree = {"drafter": "ddtree", "params": {"mode": "command", "tree_budget": 16},
              "command": ["serve", "--budget", "{tree_budget}", "--port", "{port}"]}
    assert forceable(_cfg("vllm", ddtree)) == []
    declared = {**ddtree, "command": [*ddtree["command"], "--force", "{forced_acceptance}"]}
    assert forceable(_cfg("vllm", declared)) == ["d"]
    assert forceable(_cfg("vllm", {"drafter": "ngram"})) == ["d"]
    # SGLang: a tree is left out of the default surface, with the engine's reason
    from specbench.surface.operations import derive, force_refusals

    tree = _cfg("sglang", {"drafter": "ngram", "params": {"num_tokens": 3}}, SG)
    assert forceable(tree) == [] and "NGRAM verifies a tree" in force_refusals(tree)["d"]
    assert "variants[1].forced_acceptance" in force_refusals(tree)["d"]
    assert forceable(_cfg("sglang", EAGLE_CHAIN, SG)) == ["d"]
    chain = derive(_cfg("sglang", EAGLE_CHAIN, SG), None, None)  # default lengths up to k + 1 = 4
    assert [v.forced_acceptance for v in chain.variants[1:]] == [1.0, 1.5, 2.0, 3.0, 4.0]


def test_the_vllm_cpu_plugin_is_guarded_by_the_version_it_was_written_against(monkeypatch):
    from specbench.server.engines.vllm import cpu_plugin

    plugin = cpu_plugin()
    assert plugin.version_problem("0.32.0") is None and plugin.version_problem("0.32.0+cpu") is None
    assert "written against vLLM 0.32.0" in plugin.version_problem("0.33.0")
    assert "binds its kernel's arguments by position" in plugin.version_problem(None)
    # inside the server: register() refuses under another vLLM, before touching the kernel
    fake = types.ModuleType("vllm")
    fake.__version__ = "0.33.0"  # type: ignore[attr-defined]
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: True)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    with pytest.raises(RuntimeError, match="vLLM 0.33.0 may order them differently"):
        plugin.register()
    # before a launch: specbench refuses a forced variant on another installed vllm-cpu
    import specbench.server.engines.vllm as vllm_engine

    monkeypatch.setattr(vllm_engine, "dist_version", lambda python, dist: "0.33.0" if dist == "vllm-cpu" else None)
    with pytest.raises(ConfigError, match=r"variants\[1\]\.forced_acceptance: .*written against vLLM 0.32.0"):
        _forced(_cfg("vllm", {"drafter": "ngram"}), 2.0)
    monkeypatch.setattr(vllm_engine, "dist_version", lambda python, dist: "0.32.0" if dist == "vllm-cpu" else None)
    assert "synthetic" in " ".join(_forced(_cfg("vllm", {"drafter": "ngram"}), 2.0)["d-al2"].spec.argv)

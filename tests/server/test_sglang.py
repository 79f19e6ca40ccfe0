"""SGLang engine without a server: golden argv per version line, request body, spec parsing of both field
generations; the command engine's template and acceptance field; the external engine."""

from __future__ import annotations

from typing import Any

import pytest

from specbench.config import parse_config
from specbench.server.engines.base import RequestSpec
from specbench.server.engines.command import CommandEngine, dotted
from specbench.server.engines.external import ExternalEngine
from specbench.server.engines.sglang import SGLangEngine, parse_sglang_spec
from specbench.server.launch import plan_launches, sweep_facts
from specbench.shared.errors import ConfigError


def cfg(engine: dict[str, Any] | None = None, variants: list[dict[str, Any]] | None = None) -> Any:
    return parse_config({
        "model": {"path": "/models/K", "served_name": "k"},
        "engine": {"kind": "sglang", "version": "0.5.23", "args": ["--tp", "8"],
                   "env": {"NCCL_PROTO": "LL"}, **(engine or {})},
        "variants": variants or [
            {"name": "ar", "drafter": "autoregressive", "baseline": True},
            {"name": "e3", "drafter": "eagle3", "params": {"draft_model_path": "/d", "steps": 3, "topk": 1,
                                                             "num_draft_tokens": 4}, "env": {"X": "1"}}],
        "sweep": {"output_lens": [16], "concurrency": [1, 8, 4]}})


def test_golden_argv_new_line() -> None:
    c = cfg()
    eng = SGLangEngine(c.engine, sweep_facts(c), "/models/K", "k")
    la = plan_launches(c, eng)
    assert la[1].spec is not None
    assert la[1].spec.argv[1:] == [
        "-m", "sglang.launch_server", "--model-path", "/models/K", "--served-model-name", "k",
        "--host", "127.0.0.1", "--port", "8000", "--disable-radix-cache",
        "--max-running-requests", "8", "--cuda-graph-max-bs-decode", "8", "--mem-fraction-static", "0.85",
        "--tp", "8", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    assert la[1].spec.env == {"NCCL_PROTO": "LL", "X": "1"}
    assert la[1].drafter_args[0] == "--speculative-algorithm"


def test_golden_argv_old_line_and_prefix() -> None:
    c = cfg({"version": "0.5.9", "launch_prefix": ["srun", "--gres=gpu:8"], "python": "/opt/py"})
    la = plan_launches(c, SGLangEngine(c.engine, sweep_facts(c), "/models/K", "/models/K"))
    assert la[0].spec is not None
    assert la[0].spec.argv == ["srun", "--gres=gpu:8", "/opt/py", "-m", "sglang.launch_server",
                               "--model-path", "/models/K", "--host", "127.0.0.1", "--port", "8000",
                               "--disable-radix-cache", "--max-running-requests", "8", "--cuda-graph-max-bs", "8",
                               "--mem-fraction-static", "0.85", "--tp", "8"]


def test_user_values_win_over_pins() -> None:
    c = cfg({"args": ["--max-running-requests", "64", "--cuda-graph-max-bs-decode=64"]})
    argv = plan_launches(c, SGLangEngine(c.engine, sweep_facts(c), "/models/K", "k"))[0].spec.argv  # type: ignore[union-attr]
    assert argv.count("--max-running-requests") == 1 and "--cuda-graph-max-bs-decode" not in argv
    assert "--mem-fraction-static" in argv


def test_version_behind_prefix_is_unknown_unless_set() -> None:
    c = cfg({"version": None, "launch_prefix": ["docker", "exec", "sgl"]})
    assert SGLangEngine(c.engine, sweep_facts(c), "/m", "m").version() is None


REQ = RequestSpec(messages=[{"role": "user", "content": "hi"}], prompt_text="hi", max_tokens=32,
                  temperature=0.0, seed=1)


@pytest.mark.parametrize("version,expected", [("0.5.23", True), ("0.5.19", True), ("0.5.9", False), (None, True)])
def test_request_body_spec_details_by_version(version: str | None, expected: bool) -> None:
    c = cfg({"version": version} if version else {"version": None, "launch_prefix": ["x"]})
    body = SGLangEngine(c.engine, sweep_facts(c), "/m", "m").request_body(REQ)
    assert body["ignore_eos"] is True and body["max_tokens"] == 32 and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert "return_token_ids" not in body  # SGLang's streaming chat rejects it
    assert ("return_spec_tokens_details" in body) is expected


NEW_FIELDS = {"spec_verify_ct": 50, "spec_accept_length": 2.56, "spec_accept_rate": 0.52,
              "spec_num_correct_drafts": 78, "spec_num_proposed_drafts": 150,
              "spec_correct_drafts_histogram": [10, 12, 14, 14]}
OLD_FIELDS = {"spec_verify_ct": 50, "spec_accept_length": 2.56, "spec_accept_rate": 0.52,
              "spec_accept_token_num": 78, "spec_draft_token_num": 150, "spec_accept_histogram": [10, 12, 14, 14]}


@pytest.mark.parametrize("data", [
    {"choices": [], "sglext": {"spec_tokens_details": NEW_FIELDS}},
    {"choices": [], "sglext": {"spec_tokens_details": [NEW_FIELDS]}},
    {"text": "x", "meta_info": {"completion_tokens": 128, **NEW_FIELDS}},
    {"text": "x", "meta_info": {"completion_tokens": 128, **OLD_FIELDS}},
])
def test_parse_spec_both_generations(data: dict[str, Any]) -> None:
    s = parse_sglang_spec(data)
    assert s is not None
    assert (s.verify_steps, s.accepted_drafts, s.proposed_drafts) == (50, 78, 150)
    assert s.accept_histogram == [10, 12, 14, 14] and s.reported_accept_length == 2.56


def test_parse_spec_absent() -> None:
    assert parse_sglang_spec({"choices": [{"delta": {"content": "x"}}]}) is None
    assert parse_sglang_spec({"meta_info": {"completion_tokens": 3}}) is None


# -- command and external ----------------------------------------------------------------------------
def ddtree_cfg(command: list[str], **engine: Any) -> Any:
    return cfg(engine, [{"name": "ar", "drafter": "autoregressive", "baseline": True},
                        {"name": "dd", "drafter": "ddtree", "params": {"mode": "command", "tree_budget": 256,
                                                                        "draft_model_path": "/dflash"},
                         "command": command}])


def test_variant_command_overrides_the_engine_kind() -> None:
    c = ddtree_cfg(["{python}", "wrap.py", "--model", "{model}", "--budget={tree_budget}", "--draft",
                    "{draft_model_path}", "--port", "{port}", "--name", "{served_name}"])
    la = plan_launches(c, SGLangEngine(c.engine, sweep_facts(c), "/models/K", "k"))
    assert la[1].engine is not None and la[1].engine.kind == "command"
    assert la[1].spec is not None
    assert la[1].spec.argv[1:] == ["wrap.py", "--model", "/models/K", "--budget=256", "--draft", "/dflash",
                                   "--port", "8000", "--name", "k"]
    assert la[1].spec.env == {"NCCL_PROTO": "LL"}  # engine.env shared; SGLang's engine.args are not


def test_unknown_placeholder_names_the_field() -> None:
    c = ddtree_cfg(["{python}", "wrap.py", "--b", "{tree_size}"])
    with pytest.raises(ConfigError, match=r"variants\[1\]\.command\[3\]: unknown placeholder \{tree_size\}"):
        plan_launches(c, SGLangEngine(c.engine, sweep_facts(c), "/models/K", "k"))


def test_command_acceptance_field_and_metric() -> None:
    c = ddtree_cfg(["wrap"], acceptance_field="ddtree.acceptance_length")
    eng = CommandEngine(c.engine, sweep_facts(c), "/m", "m")
    assert not eng.counter_acceptance
    s = eng.parse_spec({"choices": [], "usage": {"completion_tokens": 300}, "ddtree": {"acceptance_length": 3.0}})
    assert s is not None and s.verify_steps == 100 and s.reported_accept_length == 3.0
    assert eng.parse_spec({"choices": [{"delta": {"content": "x"}}]}) is None
    c2 = ddtree_cfg(["wrap"], acceptance_field="stats.steps", acceptance_field_kind="verify_steps")
    s2 = CommandEngine(c2.engine, sweep_facts(c2), "/m", "m").parse_spec({"stats": {"steps": 42}})
    assert s2 is not None and s2.verify_steps == 42
    c3 = ddtree_cfg(["wrap"], acceptance_metric="ddtree:verify_steps_total")
    assert CommandEngine(c3.engine, sweep_facts(c3), "/m", "m").counter_acceptance
    assert dotted({"a": [{"b": 1}]}, "a.0.b") == 1


def test_external_engine_launches_nothing() -> None:
    c = parse_config({"model": {"path": "/m"}, "engine": {"kind": "external", "url": "http://h:9/",
                                                          "metrics_url": "http://h:9/m"},
                      "variants": [{"name": "a", "drafter": "autoregressive", "baseline": True},
                                   {"name": "b", "drafter": "eagle3", "url": "http://h2:9",
                                    "params": {"draft_model_path": "/d", "steps": 2}}],
                      "sweep": {"output_lens": [8], "concurrency": [1]}})
    la = plan_launches(c, ExternalEngine(c.engine, sweep_facts(c), "/m", "m"))
    assert [x.spec for x in la] == [None, None]
    assert [x.base_url for x in la] == ["http://h:9", "http://h2:9"]
    assert la[0].metrics_url == "http://h:9/m"

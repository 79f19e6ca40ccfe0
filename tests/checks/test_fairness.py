"""Fairness pins (SGLang per version line, vLLM) and the audit of everything outside the drafter's flags."""

from __future__ import annotations

from typing import Any

from specbench.checks.fairness import audit
from specbench.config import parse_config
from specbench.server.engines.pins import VLLM_CPU_ENV_PINS, sglang_pins, vllm_pins
from specbench.server.engines.sglang import SGLangEngine
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import plan_launches, sweep_facts

E3 = {"draft_model_path": "/d", "steps": 3, "topk": 1, "num_draft_tokens": 4}


def cfg(kind: str = "sglang", args: list[str] | None = None, variants: list[dict[str, Any]] | None = None,
        version: str = "0.5.23") -> Any:
    return parse_config({
        "model": {"path": "/m"}, "engine": {"kind": kind, "version": version, "args": args or [],
                                             "env": {"NCCL_ALGO": "Ring"}},
        "variants": variants or [{"name": "ar", "drafter": "autoregressive", "baseline": True},
                                 {"name": "e3", "drafter": "eagle3", "params": E3}],
        "sweep": {"output_lens": [16], "concurrency": [1, 32, 4]}})


def test_pins_follow_the_sweep_and_version() -> None:
    assert sweep_facts(cfg()).max_concurrency == 32  # the largest of concurrency [1, 32, 4]
    assert sglang_pins([], 32, (0, 5, 23)) == ["--disable-radix-cache", "--max-running-requests", "32",
                                               "--cuda-graph-max-bs-decode", "32", "--mem-fraction-static", "0.85"]
    assert sglang_pins([], 32, (0, 5, 9))[3] == "--cuda-graph-max-bs"
    assert sglang_pins(["--mem-fraction-static", "0.9", "--cuda-graph-max-bs", "16"], 32, None) == [
        "--disable-radix-cache", "--max-running-requests", "32"]
    assert vllm_pins([], 32) == ["--no-enable-prefix-caching", "--max-num-seqs", "32"]
    assert vllm_pins(["--max-num-seqs=8"], 32) == ["--no-enable-prefix-caching"]
    # prefix caching on only when engine.prefix_caching says so
    assert vllm_pins([], 32, prefix_caching=True)[0] == "--enable-prefix-caching"
    assert "--disable-radix-cache" not in sglang_pins([], 32, None, prefix_caching=True)


def test_fair_matrix() -> None:
    c = cfg()
    a = audit(plan_launches(c, SGLangEngine(c.engine, sweep_facts(c), "/m", "m")))
    assert a.fair and a.pinned == {"--cuda-graph-max-bs-decode": "32", "--disable-radix-cache": "",
                                   "--max-running-requests": "32", "--mem-fraction-static": "0.85"}
    assert "--speculative-algorithm" in a.drafter_flags["e3"]
    md = a.to_markdown()
    assert "| `--max-running-requests` | `32` |" in md
    assert a.to_dict()["ok"] is True


def test_variant_overrides_are_warnings() -> None:
    c = cfg(variants=[
        {"name": "ar", "drafter": "autoregressive", "baseline": True},
        {"name": "e3", "drafter": "eagle3", "params": E3, "env": {"NCCL_ALGO": "Tree"},
         "args": ["--max-running-requests", "48", "--attention-backend", "fa3",
                  "--speculative-attention-mode", "decode"]}])
    a = audit(plan_launches(c, SGLangEngine(c.engine, sweep_facts(c), "/m", "m")))
    settings = {w.setting for w in a.warnings}
    assert settings == {"--max-running-requests", "--attention-backend", "env:NCCL_ALGO"}
    assert "--max-running-requests" not in a.pinned
    d = a.to_dict()
    row = next(x for x in d["differences"] if x["what"] == "--attention-backend")
    assert row["values"] == {"ar": None, "e3": "fa3"}
    assert "warning (--attention-backend)" in a.to_markdown()


def test_vllm_matrix_pins_max_num_seqs(monkeypatch: Any) -> None:
    monkeypatch.setattr(VLLMEngine, "cpu_wheel", lambda self: False)  # GPU vLLM: no CPU thread pins
    c = cfg("vllm", variants=[{"name": "ar", "drafter": "autoregressive", "baseline": True},
                              {"name": "ng", "drafter": "ngram"}])
    a = audit(plan_launches(c, VLLMEngine(c.engine, sweep_facts(c), "/m", "m")))
    assert a.pinned == {"--max-num-seqs": "32", "--no-enable-prefix-caching": ""} and a.fair


def test_vllm_cpu_pins_its_thread_layout_on_every_variant(monkeypatch: Any) -> None:
    monkeypatch.setattr(VLLMEngine, "cpu_wheel", lambda self: True)
    c = cfg("vllm", variants=[{"name": "ar", "drafter": "autoregressive", "baseline": True},
                              {"name": "ng", "drafter": "ngram"}])
    launches = plan_launches(c, VLLMEngine(c.engine, sweep_facts(c), "/m", "m"))
    for la in launches:
        assert la.spec is not None
        assert {k: la.spec.env[k] for k in VLLM_CPU_ENV_PINS} == VLLM_CPU_ENV_PINS
        assert la.spec.env["NCCL_ALGO"] == "Ring"  # engine.env kept beside the pins
    a = audit(launches)
    assert a.fair and {f"env:{k}": v for k, v in VLLM_CPU_ENV_PINS.items()}.items() <= a.pinned.items()
    assert "| `env:VLLM_CPU_NUM_OF_RESERVED_CPU` |" in a.to_markdown()
    # the user's value wins, for every variant alike
    own = cfg("vllm", variants=[{"name": "ar", "drafter": "autoregressive", "baseline": True}])
    own.engine.env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    (la,) = plan_launches(own, VLLMEngine(own.engine, sweep_facts(own), "/m", "m"))
    assert la.spec is not None and la.spec.env["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    # off the CPU wheel nothing is added
    monkeypatch.setattr(VLLMEngine, "cpu_wheel", lambda self: False)
    (la,) = plan_launches(own, VLLMEngine(own.engine, sweep_facts(own), "/m", "m"))
    assert la.spec is not None and "VLLM_CPU_OMP_THREADS_BIND" not in la.spec.env


def test_a_wrapper_variant_is_flagged() -> None:
    c = cfg(variants=[{"name": "ar", "drafter": "autoregressive", "baseline": True},
                      {"name": "dd", "drafter": "ddtree", "params": {"mode": "command"},
                       "command": ["wrap", "--port", "{port}"]}])
    a = audit(plan_launches(c, SGLangEngine(c.engine, sweep_facts(c), "/m", "m")))
    assert [w.setting for w in a.warnings] == ["engine"] and "runs engine 'command'" in a.warnings[0].message


def test_a_command_servers_own_drafter_arguments_are_not_unfair_settings() -> None:
    from specbench.server.engines.command import CommandEngine

    serve = ["serve", "--port", "{port}", "--served-model-name", "{served_name}"]
    tree = [*serve, "--draft", "{draft_model_path}", "--tree-budget", "{tree_budget}"]
    c = parse_config({"model": {"path": "/m"}, "engine": {"kind": "command", "command": tree},
                      "sweep": {"output_lens": [16], "concurrency": [1]}, "variants": [
        {"name": "plain", "drafter": "autoregressive", "baseline": True, "command": [*serve, "--tree-budget", "0"]},
        {"name": "dd16", "drafter": "ddtree", "params": {"mode": "command", "draft_model_path": "/d",
                                                          "tree_budget": 16}},
        {"name": "dd64", "drafter": "ddtree", "params": {"mode": "command", "draft_model_path": "/d",
                                                          "tree_budget": 64}, "command": [*tree, "--sync", "1"]}]})
    a = audit(plan_launches(c, CommandEngine(c.engine, sweep_facts(c), "/m", "m")))
    # --draft and --tree-budget are the drafter's (filled from its parameters); --sync is a server setting
    assert [w.setting for w in a.warnings] == ["--sync"], a.warnings
    assert a.drafter_flags["dd16"] == ["--draft", "--tree-budget"] and a.drafter_flags["plain"] == ["--tree-budget"]


def test_prefix_caching_is_pinned_off_unless_the_config_turns_it_on() -> None:
    for kind, engine, flag in (("vllm", VLLMEngine, "--no-enable-prefix-caching"),
                               ("sglang", SGLangEngine, "--disable-radix-cache")):
        c = cfg(kind, variants=[{"name": "ar", "drafter": "autoregressive", "baseline": True},
                                {"name": "ng", "drafter": "ngram"}])
        a = audit(launches := plan_launches(c, engine(c.engine, sweep_facts(c), "/m", "m")))
        assert all(flag in la.spec.argv for la in launches if la.spec)
        assert a.prefix_caching.startswith("off for every variant") and a.to_dict()["prefix_caching"]
        assert f"| `{flag}` | (set) |" in a.to_markdown() and "Prefix caching: off for every variant" in a.to_markdown()
        on = parse_config({**c.model_dump(), "engine": {**c.engine.model_dump(), "prefix_caching": True}})
        a = audit(launches := plan_launches(on, engine(on.engine, sweep_facts(on), "/m", "m")))
        assert all(flag not in la.spec.argv for la in launches if la.spec)
        assert a.prefix_caching.startswith("on for every variant")


def test_a_command_engine_says_prefix_caching_is_not_pinned() -> None:
    c = cfg(variants=[{"name": "ar", "drafter": "autoregressive", "baseline": True},
                      {"name": "dd", "drafter": "ddtree", "params": {"mode": "command"},
                       "command": ["wrap", "--port", "{port}"]}])
    a = audit(plan_launches(c, SGLangEngine(c.engine, sweep_facts(c), "/m", "m")))
    assert "ar: off" in a.prefix_caching and "dd: not pinned (engine kind command: specbench cannot set it)" in \
        a.prefix_caching


def test_prefix_caching_flags_in_args_are_refused_before_launch() -> None:
    from specbench.checks.preflight import config_problems

    c = cfg("vllm", args=["--enable-prefix-caching"], variants=[
        {"name": "ar", "drafter": "autoregressive", "baseline": True},
        {"name": "ng", "drafter": "ngram", "args": ["--no-enable-prefix-caching"]}])
    engine = VLLMEngine(c.engine, sweep_facts(c), "/m", "m")
    problems = config_problems(c, engine, plan_launches(c, engine))
    assert "engine.args: --enable-prefix-caching sets prefix caching: set engine.prefix_caching (true or false) " \
           "instead, the fairness pin every variant gets" in problems
    assert any(p.startswith("variants[1].args: --no-enable-prefix-caching") for p in problems)


def test_validate_prints_the_prefix_cache_pin_on_every_variant_of_the_demo() -> None:
    from pathlib import Path

    from specbench.cli.validate import validate

    lines: list[str] = []
    validate(Path(__file__).resolve().parents[2] / "configs/demo-cpu.yaml", print_commands=True, out=lines.append)
    argvs = [line for line in lines if line.strip().startswith("argv:")]
    assert len(argvs) == 3 and all("--no-enable-prefix-caching" in a for a in argvs)
    assert any(line.startswith("Prefix caching: off for every variant") for text in lines
               for line in text.splitlines())


def test_validate_prints_the_cpu_thread_pins_on_every_variant_of_the_demo(monkeypatch: Any) -> None:
    from pathlib import Path

    from specbench.cli.validate import validate

    monkeypatch.setattr(VLLMEngine, "cpu_wheel", lambda self: True)
    lines: list[str] = []
    validate(Path(__file__).resolve().parents[2] / "configs/demo-cpu.yaml", print_commands=True, out=lines.append)
    envs = [line for line in lines if line.strip().startswith("env:")]
    # the engine's pin where the demo sets nothing; the demo's own layout (one unbound thread) where it does
    assert len(envs) == 3 and all("VLLM_CPU_NUM_OF_RESERVED_CPU=1" in e for e in envs), envs
    assert all("VLLM_CPU_OMP_THREADS_BIND=nobind" in e and "OMP_NUM_THREADS=1" in e for e in envs), envs
    text = "\n".join(lines)
    assert "| `env:VLLM_CPU_OMP_THREADS_BIND` | `nobind` |" in text and "| `env:OMP_NUM_THREADS` | `1` |" in text

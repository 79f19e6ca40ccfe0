"""Bad input: malformed configs and CLI calls. Each must end with exit code 2 and exactly one stderr line
`error: ...` naming the field at fault, never a traceback, and launch nothing."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from specbench.cli import main
from specbench.server.process import EngineProcess
from tests.conftest import REPO, free_port, make_model_dir, survivors, write_config


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse errors leave through sys.exit(2)
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, [ln for ln in out.err.splitlines() if ln.strip()], out.err


def assert_one_line_error(code: int, lines: list[str], raw: str, *needles: str) -> str:
    assert "Traceback" not in raw, raw
    assert code == 2, f"exit code {code}, stderr: {raw}"
    assert len(lines) == 1, f"expected one stderr line, got: {raw!r}"
    line = lines[0]
    assert line.startswith("error:"), line
    for n in needles:
        assert n in line, f"{n!r} not in {line!r}"
    return line


def base_config(model: Path) -> dict[str, Any]:
    """A valid config (nothing is launched by these tests: each case breaks it before launch)."""
    return {
        "name": "bad",
        "model": {"path": str(model)},
        "engine": {"kind": "vllm", "python": "/nonexistent/python", "version": "0.10.0",
                   "port": free_port(), "startup_timeout_s": 2},
        "variants": [{"name": "base", "drafter": "autoregressive", "baseline": True},
                     {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 3}}],
        "sweep": {"prompts": [{"set": "seed"}], "output_lens": [8], "concurrency": [1]},
        "output_dir": str(model.parent / "runs"),
    }


def setp(path: str, value: Any) -> Callable[[dict[str, Any], Path], None]:
    """A mutation: set a dotted path (with [i] list indices) to `value`."""

    def apply(cfg: dict[str, Any], tmp: Path) -> None:
        node: Any = cfg
        parts = path.replace("[", ".[").split(".")
        for i, part in enumerate(parts):
            key: Any = int(part[1:-1]) if part.startswith("[") else part
            if i == len(parts) - 1:
                node[key] = value
            else:
                node = node[key]

    return apply


def delp(path: str) -> Callable[[dict[str, Any], Path], None]:
    def apply(cfg: dict[str, Any], tmp: Path) -> None:
        node: Any = cfg
        parts = path.split(".")
        for part in parts[:-1]:
            node = node[part]
        del node[parts[-1]]

    return apply


def prompt_file(content: str | bytes | None, as_dir: bool = False) -> Callable[[dict[str, Any], Path], None]:
    def apply(cfg: dict[str, Any], tmp: Path) -> None:
        p = tmp / "prompts.jsonl"
        if as_dir:
            p.mkdir()
        elif content is not None:
            p.write_bytes(content if isinstance(content, bytes) else content.encode())
        cfg["sweep"]["prompts"] = [{"set": "file", "path": str(p)}]

    return apply


def unsupported_engine(cfg: dict[str, Any], tmp: Path) -> None:
    """A drafter on an engine it has no launch recipe for (standalone is SGLang-only, the config is vLLM)."""
    cfg["variants"][1] = {"name": "standalone", "drafter": "standalone", "params": {"draft_model_path": "/d"}}


def unsupported_engine_param(cfg: dict[str, Any], tmp: Path) -> None:
    """ngram on SGLang with a parameter the ngram drafter does not have."""
    cfg["engine"].update(kind="sglang", version="0.5.23")
    cfg["variants"][1]["params"] = {"num_tokens": 3, "tree_budget": 8}


def small_context(cfg: dict[str, Any], tmp: Path) -> None:
    make_model_dir(tmp / "model", context=128)
    cfg["sweep"]["output_lens"] = [64, 256]


def engine_capped_context(cfg: dict[str, Any], tmp: Path) -> None:
    cfg["engine"]["args"] = ["--max-model-len", "100"]
    cfg["sweep"]["output_lens"] = [128]


def eagle_tree_on_vllm(cfg: dict[str, Any], tmp: Path) -> None:
    """SGLang's EAGLE tree shape on vLLM, whose recipe drafts a chain and would drop it (issue 39)."""
    (tmp / "eagle3").mkdir()
    cfg["variants"][1] = {"name": "eagle3", "drafter": "eagle3",
                          "params": {"draft_model_path": str(tmp / "eagle3"), "steps": 3, "topk": 4,
                                     "num_draft_tokens": 16}}


def per_batch_size_on_sglang(cfg: dict[str, Any], tmp: Path) -> None:
    """vLLM's dynamic speculative decoding schedule on SGLang, which has no such setting."""
    cfg["engine"].update(kind="sglang", version="0.5.23")
    cfg["variants"][1]["params"] = {"num_tokens": 3, "per_batch_size": [[1, 4, 3], [5, 64, 1]]}


OPEN_LOOP = [delp("sweep.concurrency"), setp("sweep.load", {"kind": "open", "rates": [1]})]

# (id, mutation(s), substrings the one error line must contain)
CASES: list[tuple[str, list[Callable[[dict[str, Any], Path], None]], list[str]]] = [
    ("unknown-top-level-key", [setp("bogus", 1)], ["bogus", "unknown field `bogus`"]),
    ("unknown-engine-key", [setp("engine.prot", 8000)], ["engine.prot", "unknown field `prot` (did you mean `port`?)"]),
    ("unknown-variant-key", [setp("variants[1].parms", {})],
     ["variants[1].parms", "unknown field `parms` (did you mean `params`?)"]),
    ("unknown-sweep-key", [setp("sweep.concurency", [1])],
     ["sweep.concurency", "unknown field `concurency` (did you mean `concurrency`?)"]),
    # issue 39: a misspelled required field is the misspelling, not "required field is missing"
    ("misspelled-required-key", [delp("sweep.concurrency"), setp("sweep.concurency", [1])],
     ["sweep.concurency: unknown field `concurency` (did you mean `concurrency`?)"]),
    ("unknown-prompt-key", [setp("sweep.prompts", [{"set": "seed", "cat": ["code"]}])],
     ["sweep.prompts[0].cat", "unknown field `cat`"]),
    ("wrong-type-concurrency", [setp("sweep.concurrency", "four")], ["sweep.concurrency"]),
    ("wrong-type-port", [setp("engine.port", "http")], ["engine.port"]),
    ("wrong-type-variants", [setp("variants", {"name": "x"})], ["variants"]),
    ("wrong-type-engine-args", [setp("engine.args", "--enforce-eager")], ["engine.args"]),
    ("zero-concurrency", [setp("sweep.concurrency", [1, 0])], ["sweep.concurrency", ">= 1"]),
    ("negative-concurrency", [setp("sweep.concurrency", [-4])], ["sweep.concurrency", ">= 1"]),
    ("zero-output-len", [setp("sweep.output_lens", [0])], ["sweep.output_lens"]),
    ("empty-output-lens", [setp("sweep.output_lens", [])], ["sweep.output_lens"]),
    ("empty-concurrency", [setp("sweep.concurrency", [])], ["sweep.concurrency"]),
    ("empty-prompts", [setp("sweep.prompts", [])], ["sweep.prompts"]),
    ("missing-sweep", [delp("sweep")], ["sweep", "missing"]),
    ("missing-output-lens", [delp("sweep.output_lens")], ["sweep.output_lens", "missing"]),
    ("zero-repeats", [setp("sweep.repeats", 0)], ["sweep.repeats"]),
    ("negative-warmup", [setp("sweep.warmup_requests", -1)], ["sweep.warmup_requests"]),
    ("error-rate-over-one", [setp("sweep.max_error_rate", 1.5)], ["sweep.max_error_rate"]),
    ("zero-request-timeout", [setp("sweep.request_timeout_s", 0)], ["sweep.request_timeout_s"]),
    ("duplicate-concurrency", [setp("sweep.concurrency", [1, 4, 4])], ["sweep.concurrency", "duplicate"]),
    ("negative-temperature", [setp("sweep.temperatures", [0.0, -0.5])], ["sweep.temperatures", ">= 0"]),
    ("empty-variants", [setp("variants", [])], ["variants"]),
    ("no-baseline", [setp("variants[0].baseline", False)], ["variants", "baseline"]),
    ("two-baselines", [setp("variants[1]", {"name": "b2", "drafter": "autoregressive", "baseline": True})],
     ["variants", "baseline", "base, b2"]),
    ("duplicate-variant-names", [setp("variants[1].name", "base")], ["variants", "duplicate", "base"]),
    ("variant-name-slash", [setp("variants[1].name", "a/b")], ["variants[1].name"]),
    ("variant-name-dotdot", [setp("variants[1].name", "..")], ["variants[1].name"]),
    ("variant-name-traversal", [setp("variants[1].name", "../../etc")], ["variants[1].name"]),
    ("variant-name-empty", [setp("variants[1].name", "")], ["variants[1].name"]),
    ("unknown-drafter", [setp("variants[1].drafter", "medusa9")], ["variants[1].drafter", "medusa9"]),
    ("unknown-engine-kind", [setp("engine.kind", "tgi")], ["engine.kind"]),
    ("drafter-param-it-lacks", [setp("variants[1].params", {"num_tokens": 3, "topk": 4})],
     ["variants[1].params.topk", "unknown field `topk`"]),
    ("drafter-param-out-of-range", [setp("variants[1].params", {"num_tokens": 0})],
     ["variants[1].params.num_tokens"]),
    ("drafter-param-wrong-type", [setp("variants[1].params", {"num_tokens": "many"})],
     ["variants[1].params.num_tokens"]),
    ("drafter-params-inconsistent", [setp("variants[1].params", {"lookup_min": 5, "lookup_max": 2})],
     ["variants[1].params", "lookup_min"]),
    ("baseline-that-speculates", [setp("variants[0].drafter", "ngram")], ["variants[0].baseline"]),
    ("drafter-unsupported-by-engine", [unsupported_engine], ["variants[1].drafter", "vllm"]),
    ("drafter-param-not-on-this-engine", [unsupported_engine_param], ["variants[1].params.tree_budget"]),
    ("missing-model-path", [setp("model.path", "/nonexistent/model/folder")], ["model.path", "not found"]),
    ("model-path-and-demo", [setp("model.demo", "smollm2")], ["model", "exactly one"]),
    ("model-neither-path-nor-demo", [setp("model", {})], ["model", "exactly one"]),
    ("unknown-demo-model", [setp("model", {"demo": "gpt5"})], ["model.demo", "gpt5"]),
    ("missing-tokenizer", [setp("model.tokenizer", "/nonexistent/tok")], ["model.tokenizer"]),
    ("prompt-file-missing", [prompt_file(None)], ["sweep.prompts[0].path", "cannot read"]),
    ("prompt-file-unreadable", [prompt_file(None, as_dir=True)], ["sweep.prompts[0].path", "cannot read"]),
    ("prompt-file-bad-json", [prompt_file('{"category": "a", "prompt": "x"}\n{not json}\n')],
     ["sweep.prompts[0].path", "line 2"]),
    ("prompt-file-empty", [prompt_file("\n")], ["sweep.prompts[0].path", "no prompts"]),
    ("prompt-file-without-path", [setp("sweep.prompts", [{"set": "file"}])], ["sweep.prompts[0].path"]),
    ("unknown-prompt-set", [setp("sweep.prompts", [{"set": "gsm8k"}])], ["sweep.prompts[0].set", "gsm8k"]),
    ("unknown-category", [setp("sweep.prompts", [{"set": "seed", "categories": ["poetry"]}])],
     ["sweep.prompts[0].categories", "poetry"]),
    ("zero-per-category", [setp("sweep.prompts", [{"set": "seed", "per_category": 0}])],
     ["sweep.prompts[0].per_category"]),
    ("output-len-over-context", [small_context], ["sweep.output_lens", "128"]),
    ("output-len-over-engine-max-model-len", [engine_capped_context], ["sweep.output_lens", "--max-model-len"]),
    ("api-key-env-unset", [setp("engine.api_key_env", "SPECBENCH_TEST_UNSET_KEY")],
     ["engine.api_key_env", "SPECBENCH_TEST_UNSET_KEY"]),
    ("external-without-url", [setp("engine.kind", "external")], ["engine", "url"]),
    ("command-without-command", [setp("engine.kind", "command")], ["engine", "command"]),
    ("port-out-of-range", [setp("engine.port", 70000)], ["engine.port"]),
    ("zero-startup-timeout", [setp("engine.startup_timeout_s", 0)], ["engine.startup_timeout_s"]),
    ("env-not-a-mapping", [setp("engine.env", ["A=1"])], ["engine.env"]),
    # non-finite numbers (YAML .nan / .inf) anywhere in the config
    ("nan-temperature", [setp("sweep.temperatures", [0.0, float("nan")])], ["sweep.temperatures[1]", "finite"]),
    ("inf-temperature", [setp("sweep.temperatures", [float("inf")])], ["sweep.temperatures[0]", "finite"]),
    ("inf-startup-timeout", [setp("engine.startup_timeout_s", float("inf"))], ["engine.startup_timeout_s", "finite"]),
    ("nan-request-timeout", [setp("sweep.request_timeout_s", float("nan"))], ["sweep.request_timeout_s", "finite"]),
    ("nan-error-rate", [setp("sweep.max_error_rate", float("nan"))], ["sweep.max_error_rate", "finite"]),
    ("nan-drafter-param", [setp("variants[1].params", {"num_tokens": 3, "lookup_min": float("nan")})],
     ["variants[1].params.lookup_min", "finite"]),
    ("nan-chat-template-kwarg", [setp("sweep.chat_template_kwargs", {"budget": float("-inf")})],
     ["sweep.chat_template_kwargs.budget", "finite"]),
    # a drafter named by import target that is not a Drafter
    ("drafter-target-not-a-drafter", [setp("variants[1].drafter", "json:dumps")],
     ["variants[1].drafter", "not a specbench Drafter"]),
    ("drafter-target-missing", [setp("variants[1].drafter", "no_such_module_x:Medusa")],
     ["variants[1].drafter", "cannot import"]),
    ("prompt-file-not-utf8", [prompt_file(b'{"category": "a", "prompt": "caf\xe9"}\n')],
     ["sweep.prompts[0].path", "UTF-8"]),
    ("prompt-path-without-file-set", [setp("sweep.prompts", [{"set": "seed", "path": "x.jsonl"}])],
     ["sweep.prompts[0].path", "set: file"]),
    ("unknown-demo-model-name", [setp("model", {"demo": "llama70b"})], ["model.demo", "llama70b"]),
    ("open-loop-without-rates", [delp("sweep.concurrency"), setp("sweep.load", {"kind": "open"})],
     ["sweep.load", "needs rates"]),
    ("open-loop-zero-rate", [delp("sweep.concurrency"), setp("sweep.load", {"kind": "open", "rates": [0]})],
     ["sweep.load.rates", "> 0"]),
    ("open-loop-with-concurrency", [setp("sweep.load", {"kind": "open", "rates": [1]})],
     ["sweep", "concurrency is not used"]),
    ("slo-on-a-closed-loop", [setp("slo", {"ttft_s": {"p90": 1}})], ["slo", "needs sweep.load.kind open"]),
    ("slo-unknown-metric", [delp("sweep.concurrency"), setp("sweep.load", {"kind": "open", "rates": [1]}),
                            setp("slo", {"latency": {"p90": 1}})], ["slo", "unknown metric"]),
    ("open-loop-trace-missing", [delp("sweep.concurrency"),
                                 setp("sweep.load", {"kind": "open", "trace": "/nonexistent/traffic.jsonl"})],
     ["sweep.load.trace", "cannot read trace"]),
    ("zero-max-concurrency", [setp("variants[1].max_concurrency", 0)],
     ["variants[1].max_concurrency", "greater than or equal to 1"]),
    ("negative-max-concurrency", [setp("variants[1].max_concurrency", -2)],
     ["variants[1].max_concurrency", "greater than or equal to 1"]),
    ("max-concurrency-below-the-sweep", [setp("sweep.concurrency", [4, 8]), setp("variants[1].max_concurrency", 2)],
     ["variants[1].max_concurrency", "below every sweep.concurrency", "nothing would be measured"]),
    ("max-concurrency-on-the-baseline", [setp("variants[0].max_concurrency", 1)],
     ["variants[0].max_concurrency", "the baseline measures every point"]),
    ("forced-profile-increasing", [setp("variants[1].forced_acceptance", [0.5, 0.7, 0.1])],
     ["variants[1].forced_acceptance: position 1: 0.7 is above position 0's 0.5 (per-position rates are "
      "unconditional, so non-increasing)"]),
    # issue 39: drafter params an engine would silently drop, SLO units
    ("eagle-tree-params-on-vllm", [eagle_tree_on_vllm],
     ["variants[1].params.topk: vLLM drafts a chain of `steps` tokens (no EAGLE tree) and would silently ignore topk"]),
    ("vllm-only-param-on-sglang", [per_batch_size_on_sglang],
     ["variants[1].params.per_batch_size: dynamic speculative decoding is a vLLM setting"]),
    ("startup-timeout-below-the-estimate",
     [setp("engine.startup_timeout_s", 30), setp("estimates", {"startup_s": 600})],
     ["engine.startup_timeout_s: 30 s is shorter than estimates.startup_s 600 s: every launch would be stopped "
      "before it is ready; raise it above 600"]),
    ("slo-without-unit", [*OPEN_LOOP, setp("slo", {"tpot": {"p90": 50}})],
     ["slo: tpot.p90: give the unit: 50ms or 50s"]),
    ("slo-not-a-duration", [*OPEN_LOOP, setp("slo", {"ttft_s": {"p90": "2 min"}})],
     ["slo: ttft_s.p90: '2 min' is not a duration"]),
    ("max-concurrency-on-an-open-loop", [delp("sweep.concurrency"), setp("sweep.load", {"kind": "open", "rates": [1]}),
                                         setp("variants[1].max_concurrency", 1)],
     ["variants[1].max_concurrency", "needs a closed loop"]),
]

# Problems of a variant's launch plan (a drafter's check): validate lists them under "Refused before launch"
LISTED = {"eagle-tree-params-on-vllm", "vllm-only-param-on-sglang"}

# Problems of this machine, not of the config: run refuses them, validate lists them without failing.
HOST_ONLY = {"missing-model-path", "missing-tokenizer", "api-key-env-unset"}


@pytest.mark.parametrize("case_id,mutations,needles", CASES, ids=[c[0] for c in CASES])
def test_bad_config(case_id, mutations, needles, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("SPECBENCH_TEST_UNSET_KEY", raising=False)
    before = frozenset(p.pid for p in psutil.Process().children(recursive=True))
    started: list[str] = []  # every engine launch, counted where it happens (nothing may start)
    monkeypatch.setattr(EngineProcess, "start", lambda self: started.append(self.name))
    model = make_model_dir(tmp_path / "model")
    cfg = base_config(model)
    for m in mutations:
        m(cfg, tmp_path)
    path = write_config(tmp_path / "bad.yaml", cfg)
    code, lines, raw = run_cli(["run", str(path), "--out", str(tmp_path / "run")], capsys)
    assert_one_line_error(code, lines, raw, *needles)
    assert not (tmp_path / "run" / "requests.jsonl").exists()  # nothing was measured
    assert started == []
    assert survivors(ignore=before) == []  # and no other child either (checks run to their end: no wait)


@pytest.mark.parametrize("case_id,mutations,needles", [c for c in CASES if c[0] not in HOST_ONLY],
                         ids=[c[0] for c in CASES if c[0] not in HOST_ONLY])
def test_validate_refuses_what_run_refuses(case_id, mutations, needles, tmp_path, monkeypatch, capsys):
    """`specbench validate` checks everything run checks before launching: never "OK" for these."""
    model = make_model_dir(tmp_path / "model")
    cfg = base_config(model)
    for m in mutations:
        m(cfg, tmp_path)
    path = write_config(tmp_path / "bad.yaml", cfg)
    try:
        code = main(["validate", str(path)])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "OK:" not in out.out, text
    if case_id in LISTED:  # a problem of the launch plan: validate lists every one (exit 2), run stops at the first
        refused = out.out.split("Refused before launch:\n")[-1].splitlines()
        assert code == 2 and any(all(n in line for n in needles) for line in refused), text
        return
    assert_one_line_error(code, [ln for ln in out.err.splitlines() if ln.strip()], out.err, *needles)


# -- files that are not configs ---------------------------------------------------------------------------
def alias_bomb() -> str:
    """11 lines: level a is a list of 10 scalars, each next level a list of 10 aliases of the one before;
    `variants` names level i, which expands to more than 10^9 nodes."""
    levels = ["a: &a [" + ", ".join(["lol"] * 10) + "]"]
    levels += [f"{c}: &{c} [" + ", ".join([f"*{p}"] * 10) + "]" for p, c in zip("abcdefgh", "bcdefghi")]
    return "\n".join([*levels, "model: {path: /m}", "variants: [*i]", ""])


NOT_A_CONFIG = [
    ("model: {path: /m\nvariants: [", ["invalid YAML"]),
    ("name: a\n\tmodel: x\n", ["invalid YAML"]),
    ("- a\n- b\n", ["mapping"]),
    ("just a string\n", ["mapping"]),
    ("", ["mapping"]),
    (b"name: caf\xe9\n", ["not UTF-8", "byte 9"]),
    (b"\xff\xfename: a\n", ["not UTF-8", "byte 0"]),
    ("x: &x [*x]\n", ["refused", "alias"]),
    (alias_bomb(), ["refused", "more than 1,000,000 YAML nodes"]),
]


@pytest.mark.parametrize("text,needles", NOT_A_CONFIG, ids=["unclosed-flow", "tab-indent", "yaml-list",
                                                             "yaml-scalar", "empty-file", "latin-1", "utf-16-bom",
                                                             "recursive-alias", "alias-bomb"])
def test_not_a_config(text, needles, tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    code, lines, raw = run_cli(["run", str(path)], capsys)
    assert_one_line_error(code, lines, raw, str(path), *needles)


ALIAS_BOMB = alias_bomb()


def test_alias_bomb_is_refused_before_anything_walks_it(tmp_path, monkeypatch, capsys):
    """The bomb's aliases expand it to 10^9 nodes; the loader counts its expansion over the composed graph
    (each node once) and refuses it past the cap, before construction, validation or any other walk."""
    import yaml

    from specbench import config

    assert len(ALIAS_BOMB.splitlines()) == 11
    # the count itself, exactly: level a is a list of 10 scalars (11 nodes), each next level a list of 10
    # aliases of the one before, so level i holds 1 + 10 * (level i-1): 111,111,111 nodes at level h
    h = next(v for k, v in yaml.compose(ALIAS_BOMB).value if k.value == "h")
    assert config.expanded_size(h, limit=10**12) == 111_111_111
    assert config.expanded_size(h) == config.MAX_YAML_NODES + 1  # stops at the cap
    from specbench.config import load as config_load  # where load_config looks its helpers up

    monkeypatch.setattr(config_load, "parse_config", lambda *a, **k: pytest.fail("the bomb reached validation"))
    monkeypatch.setattr(config_load._BoundedLoader, "construct_object",
                        lambda *a, **k: pytest.fail("the bomb reached construction"))
    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)
    code, lines, raw = run_cli(["run", str(path)], capsys)
    assert_one_line_error(code, lines, raw, str(path), f"more than {config.MAX_YAML_NODES:,} YAML nodes")


def test_missing_config_file(tmp_path, capsys):
    code, lines, raw = run_cli(["run", str(tmp_path / "nope.yaml")], capsys)
    assert_one_line_error(code, lines, raw, "not found", "nope.yaml")


# -- CLI calls ---------------------------------------------------------------------------------------------
BAD_CLI_CALLS = [
        (["run", "--bogus-flag"], ["--bogus-flag"]),
        ([], ["command"]),
        (["frobnicate"], ["frobnicate"]),
        (["run"], ["CONFIG"]),
        (["compare", "only-one"], ["run_b"]),
        (["compare", "a", "b", "--threshold", "lots"], ["--threshold"]),
        (["bench", "--url", "http://127.0.0.1:1", "--model", "m", "--concurrency", "x"], ["--concurrency"]),
        (["models", "prepare"], ["name"]),
]


def test_bad_cli_calls(tmp_path, capsys):
    for argv, needles in BAD_CLI_CALLS:
        code, lines, raw = run_cli(argv, capsys)
        assert_one_line_error(code, lines, raw, *needles)


def test_resume_on_non_run_dirs(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, lines, raw = run_cli(["run", "--resume", str(empty)], capsys)
    assert_one_line_error(code, lines, raw, "--resume", str(empty))
    code, lines, raw = run_cli(["run", "--resume", str(tmp_path / "missing")], capsys)
    assert_one_line_error(code, lines, raw, "--resume")
    # a folder with a config but no run.json is not a run either
    half = tmp_path / "half"
    half.mkdir()
    model = make_model_dir(tmp_path / "model")
    write_config(half / "config.yaml", base_config(model))
    code, lines, raw = run_cli(["run", "--resume", str(half)], capsys)
    assert_one_line_error(code, lines, raw, "--resume", "run.json")
    assert not (half / "requests.jsonl").exists()


def test_compare_and_report_on_non_run_dirs(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    code, lines, raw = run_cli(["compare", str(a), str(b)], capsys)
    assert_one_line_error(code, lines, raw, str(a))
    code, lines, raw = run_cli(["compare", str(tmp_path / "x"), str(tmp_path / "y")], capsys)
    assert_one_line_error(code, lines, raw, "x")
    code, lines, raw = run_cli(["report", str(tmp_path / "missing")], capsys)
    assert_one_line_error(code, lines, raw, "missing")
    code, lines, raw = run_cli(["report", str(a)], capsys)
    assert_one_line_error(code, lines, raw, "run.json")


def test_existing_run_dir_refused_without_resume_or_force(tmp_path, capsys):
    model = make_model_dir(tmp_path / "model")
    path = write_config(tmp_path / "c.yaml", base_config(model))
    out = tmp_path / "run"
    out.mkdir()
    (out / "requests.jsonl").write_text('{"keep": "me"}\n')
    code, lines, raw = run_cli(["run", str(path), "--out", str(out)], capsys)
    assert_one_line_error(code, lines, raw, str(out), "--resume", "--force")
    assert (out / "requests.jsonl").read_text() == '{"keep": "me"}\n'


# -- through a real process: the console entry point, exit status and stderr as a user sees them ------------
PROCESS_CASES = ["unknown-key", "invalid-yaml", "bad-flag"]
RESUME_CALLS = 3  # the three calls of test_resume_on_non_run_dirs
COMPARE_REPORT_CALLS = 4  # the four calls of test_compare_and_report_on_non_run_dirs


@pytest.mark.parametrize("case", PROCESS_CASES)
def test_bad_input_in_a_real_process(case, tmp_path):
    model = make_model_dir(tmp_path / "model")
    cfg = base_config(model)
    if case == "unknown-key":
        cfg["sweep"]["bogus"] = True
        argv = ["run", str(write_config(tmp_path / "c.yaml", cfg))]
        needles = ["sweep.bogus", "unknown field `bogus`"]
    elif case == "invalid-yaml":
        (tmp_path / "c.yaml").write_text("sweep: [\n")
        argv = ["run", str(tmp_path / "c.yaml")]
        needles = ["invalid YAML"]
    else:
        argv = ["run", "--no-such-flag"]
        needles = ["--no-such-flag"]
    r = subprocess.run([sys.executable, "-m", "specbench.cli", *argv], capture_output=True, text=True,
                       cwd=REPO, timeout=60)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert_one_line_error(r.returncode, lines, r.stderr, *needles)


def bad_input_count() -> tuple[int, int]:
    """(bad inputs `specbench run` and the other commands answer with one error line and exit 2,
    configs `specbench validate` answers the same way), counted from the cases above."""
    run_side = (len(CASES) + len(NOT_A_CONFIG) + 1 + len(BAD_CLI_CALLS) + RESUME_CALLS + COMPARE_REPORT_CALLS
                + 1 + len(PROCESS_CASES))
    return run_side, len([c for c in CASES if c[0] not in HOST_ONLY])


def test_case_count():
    """docs/reliability.md states the counts that this suite tries."""
    run_side, validate_side = bad_input_count()
    doc = (REPO / "docs" / "reliability.md").read_text()
    assert f"Bad input ({run_side} configs, files and CLI calls" in doc
    assert f"{validate_side} of the configs also through `specbench validate`" in doc
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    # a case without a mutation or without an expected word would pass without testing anything
    assert [c[0] for c in CASES if not c[1] or not c[2] or not all(c[2])] == []


def test_slo_thresholds_with_units_are_seconds(tmp_path):
    """`tpot: {p90: 50ms}` and `ttft_s: {p90: 2s}` are seconds; a run directory's config.yaml reads back the
    same SLO (a threshold above 10 s is written with its unit, not as a bare number taken for ms)."""
    from specbench.config import dump_config, load_yaml, parse_config

    cfg = base_config(make_model_dir(tmp_path / "model"))
    del cfg["sweep"]["concurrency"]
    cfg["sweep"]["load"] = {"kind": "open", "rates": [1]}
    cfg["slo"] = {"tpot": {"p90": "50ms"}, "ttft_s": {"p90": "2s", "p99": 3}, "e2e_s": {"p90": "30s"}}
    parsed = parse_config(cfg)
    assert parsed.slo == {"tpot_s": {"p90": 0.05}, "ttft_s": {"p90": 2.0, "p99": 3.0}, "e2e_s": {"p90": 30.0}}
    assert parse_config(load_yaml(dump_config(parsed), "config.yaml")).slo == parsed.slo

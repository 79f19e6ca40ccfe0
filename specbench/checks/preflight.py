"""Checks before any launch. Each problem is one line that says what is wrong, where, and what to do.

`config_problems` needs nothing but the config (also run by `specbench validate` on a laptop);
`host_problems` looks at this machine (GPUs, port, paths, engine install). `preflight` runs both.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.checks.argv import argv_problems
from specbench.checks.fairness import plain_speculation, plain_speculation_message
from specbench.checks.fit import fit_problems, read_model_config
from specbench.checks.node import hub_id_problems, node_problems, node_warnings
from specbench.config import RunConfig, slo_unit_warnings
from specbench.plan.drafter import DRAFTERS, Drafter, LaunchContext, get_drafter
from specbench.server.engines import Engine
from specbench.server.engines.base import dist_version, parse_version
from specbench.server.engines.pins import has_option, parse_options
from specbench.server.launch import VariantLaunch
from specbench.shared.errors import ConfigError, UsageError


def preflight(cfg: RunConfig, engine: Engine, launches: list[VariantLaunch], port: int) -> list[str]:
    """Every reason not to launch, one line each (empty: go)."""
    return config_problems(cfg, engine, launches) + host_problems(cfg, engine, launches, port)


def preflight_warnings(cfg: RunConfig, engine: Engine, launches: list[VariantLaunch]) -> list[str]:
    """What is said before a launch but does not stop it (the KV cache's room on the node, the memory
    fraction's headroom, an SLO threshold unusual for its metric)."""
    return node_warnings(cfg, launches, engine.model_path, here=not cfg.engine.launch_prefix) + \
        slo_unit_warnings(cfg.slo)


def _drafter_problems(engine: Engine, la: VariantLaunch, i: int, version: tuple[int, ...] | None,
                      check_paths: bool) -> list[str]:
    eng = la.engine or engine
    ctx = LaunchContext(engine=eng.kind, engine_version=version, model_path=engine.model_path,
                        check_paths=check_paths)
    return [f"variants[{i}].{p}" for p in la.drafter.check(la.params, ctx)]


# -- config -------------------------------------------------------------------------------------------
def config_problems(cfg: RunConfig, engine: Engine, launches: list[VariantLaunch]) -> list[str]:
    out: list[str] = []
    raw_version = engine.version()
    version = parse_version(raw_version)
    for i, la in enumerate(launches):
        eng = la.engine or engine
        drafter_problems = _drafter_problems(engine, la, i, version, check_paths=False)
        out += drafter_problems
        out += _plain_speculation_problems(cfg, i, la)
        out += [f"{_flag_field(cfg, i, f)}: {f} sets prefix caching: set engine.prefix_caching (true or false) "
                "instead, the fairness pin every variant gets" for f in eng.prefix_caching_flags
                if has_option([*cfg.engine.args, *cfg.variants[i].args], f)]
        if la.spec is not None:
            flagged = " ".join(drafter_problems)  # the drafter already said it in its own terms
            out += [p for p in engine_flag_problems(cfg, i, la, eng, raw_version, version)
                    if not (("AssertionError" in p and "params.steps" in flagged)
                            or ("draft path" in p and "draft_model_path" in flagged))]
    out += hub_id_problems(cfg, launches)
    out += node_problems(cfg, launches, engine.model_path, here=False)  # engine.gpus as the config states it
    out += fit_problems(launches, engine.model_path)  # where the folders are readable here
    out += argv_problems(cfg, engine, launches)
    return _unique(out)


def _plain_speculation_problems(cfg: RunConfig, i: int, la: VariantLaunch) -> list[str]:
    """A speculative flag in a plain-decoding variant's argv, one line per config list it came from."""
    by_field: dict[str, list[str]] = {}
    for flag in plain_speculation(la):
        by_field.setdefault(_flag_field(cfg, i, flag), []).append(flag)
    return [f"{field}: {plain_speculation_message(la, flags)}" for field, flags in by_field.items()]


def _flag_field(cfg: RunConfig, i: int, flag: str) -> str:
    """Which config list a flag came from, for the message."""
    if has_option(cfg.variants[i].args, flag):
        return f"variants[{i}].args"
    if has_option(cfg.engine.args, flag):
        return "engine.args"
    return f"variants[{i}]"


def engine_flag_problems(cfg: RunConfig, i: int, la: VariantLaunch, eng: Engine, raw_version: str | None,
                         version: tuple[int, ...] | None) -> list[str]:
    assert la.spec is not None
    argv = la.spec.argv
    _, opts = parse_options(argv)
    shown = raw_version or "unknown"
    out = [f"{_flag_field(cfg, i, flag)}: {why}" for flag, why in eng.argv_problems(argv, version, shown)]
    algo = (opts.get(eng.algorithm_flag) or "").upper() if eng.algorithm_flag else ""
    owner = algorithm_owner(algo, la.drafter) if algo else None
    if owner is not None:  # the drafter that knows this algorithm's rules checks the final argv
        ctx = LaunchContext(engine=eng.kind, engine_version=version, model_path=eng.model_path,
                            engine_version_text=raw_version)
        for p in owner.check_engine_args(opts, ctx):
            where = _flag_field(cfg, i, p.where) if p.where.startswith("--") else \
                f"variants[{i}]" + (f".{p.where}" if p.where else "")
            out.append(f"{where}: {p.message}")
    return out


def algorithm_owner(algorithm: str, drafter: Drafter[Any]) -> Drafter[Any] | None:
    """The drafter whose `sglang_algorithms` include `algorithm`: the variant's own, else the first
    registered one (a raw `--speculative-algorithm` in args under another drafter is checked too)."""
    if algorithm in drafter.sglang_algorithms:
        return drafter
    for name in DRAFTERS.names():
        try:
            d = get_drafter(name)
        except UsageError:
            continue
        if algorithm in d.sglang_algorithms:
            return d
    return None


# -- host ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    memory: str


def gpu_processes() -> list[GpuProcess] | None:
    """Compute processes on the GPUs (nvidia-smi); None when nvidia-smi is not on PATH or fails."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        r = subprocess.run([exe, "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    out = []
    for line in r.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            out.append(GpuProcess(int(parts[0]), parts[1], parts[2]))
    return out


def _command_of(pid: int, fallback: str) -> str:
    try:
        import psutil

        return " ".join(psutil.Process(pid).cmdline())[:120] or fallback
    except Exception:  # noqa: BLE001 - another user's process, gone, or psutil missing: keep nvidia-smi's name
        return fallback


def host_problems(cfg: RunConfig, engine: Engine, launches: list[VariantLaunch], port: int) -> list[str]:
    launched = [la for la in launches if la.spec is not None]
    if not launched:
        return []  # an external endpoint: nothing runs here
    out: list[str] = []
    remote = bool(cfg.engine.launch_prefix)  # srun / container: GPUs and paths are not this machine's
    if not remote and not cfg.engine.allow_busy_gpu:
        for g in gpu_processes() or []:
            out.append(f"GPU busy: PID {g.pid} ({_command_of(g.pid, g.name)}) holds {g.memory}; stop it or set "
                       f"engine.allow_busy_gpu: true")
    from specbench.server.ports import port_in_use, port_owner

    if port_in_use(cfg.engine.host, port):
        owner = port_owner(port) or "a process specbench cannot see"
        out.append(f"engine.port: {cfg.engine.host}:{port} is already in use by {owner}; stop it or choose "
                   f"another port")
    if not remote and cfg.model.path and not Path(engine.model_path).expanduser().exists():
        out.append(f"model.path: not found on this machine: {engine.model_path}")
    if not remote:
        version = parse_version(engine.version())
        for i, la in enumerate(launches):  # draft folders: what check() adds once paths are checked here
            offline = set(_drafter_problems(engine, la, i, version, check_paths=False))
            out += [p for p in _drafter_problems(engine, la, i, version, check_paths=True) if p not in offline]
        out += engine_install_problems(cfg, engine, launched)
        said = set(node_problems(cfg, launches, engine.model_path, here=False))
        out += [p for p in node_problems(cfg, launches, engine.model_path, here=True) if p not in said]
    return out


def engine_install_problems(cfg: RunConfig, engine: Engine, launched: list[VariantLaunch]) -> list[str]:
    kinds = {(la.engine or engine).kind: (la.engine or engine).distributions for la in launched}
    python = engine.python()
    out = []
    if any(kinds.values()) and not Path(python).exists() and not shutil.which(python):
        return [f"engine.python: interpreter not found: {python}"]
    for kind, dists in kinds.items():
        if not dists:
            continue
        installed = next((v for v in (dist_version(python, d) for d in dists) if v), None)
        if installed is None:
            out.append(f"engine.python: {kind} is not installed in {python} (install it there, or point "
                       f"engine.python at the interpreter that has it)")
        elif cfg.engine.version and parse_version(cfg.engine.version) != parse_version(installed):
            out.append(f"engine.version: the config says {cfg.engine.version} but {python} has {kind} {installed}")
    for la in launched:
        if (la.engine or engine).user_command and la.spec and la.spec.argv:
            exe = la.spec.argv[0]
            if not (Path(exe).exists() or shutil.which(exe)):
                out.append(f"variants[{cfg.variants.index(la.variant)}].command: executable not found: {exe}")
    return out


# -- the model folder's context ------------------------------------------------------------------
# config.json keys that hold a model's context length, most specific first
_CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length")
# engine flags that cap the context below the model's own (vLLM, SGLang)
_CONTEXT_FLAGS = ("--max-model-len", "--context-length")


def model_context(cfg: RunConfig, model_path: str | os.PathLike[str]) -> tuple[int, str] | None:
    """(context length in tokens, where it comes from) for the model folder and the engine args, or None."""
    found: list[tuple[int, str]] = []
    conf = Path(model_path) / "config.json"
    data = read_model_config(Path(model_path))
    if data is not None:
        for section in (data, data.get("text_config")):
            if not isinstance(section, dict):
                continue
            key = next((k for k in _CONTEXT_KEYS if isinstance(section.get(k), int) and section[k] > 0), None)
            if key:
                found.append((int(section[key]), f"{key} in {conf}"))
                break
    for where, args in [("engine.args", cfg.engine.args)] + [
            (f"variants[{i}].args", v.args) for i, v in enumerate(cfg.variants)]:
        for i, a in enumerate(args):
            flag, eq, val = a.partition("=")
            if flag in _CONTEXT_FLAGS:
                raw = val if eq else (args[i + 1] if i + 1 < len(args) else "")
                if raw.isdigit() and int(raw) > 0:
                    found.append((int(raw), f"{flag} in {where}"))
    return min(found) if found else None


def check_model_context(cfg: RunConfig, model_path: str | os.PathLike[str]) -> int | None:
    """Refuse a sweep whose lengths cannot fit the model's context (ConfigError naming the sweep field); the
    context length it checked against (None: not known), which also caps natural output lengths."""
    ctx = model_context(cfg, model_path)
    if ctx is None:
        return None
    limit, source = ctx
    s = cfg.sweep
    if not s.fixed_output_lens:
        return limit  # natural lengths only: each is capped at the context left after its prompt (plan.natural)
    longest_out = max(s.fixed_output_lens)
    if longest_out >= limit:
        raise ConfigError("sweep.output_lens", f"{longest_out} output tokens do not fit the model's context "
                          f"of {limit} tokens ({source})")
    if s.input_lens and max(s.input_lens) + longest_out > limit:
        raise ConfigError("sweep.input_lens", f"{max(s.input_lens)} input + {longest_out} output tokens exceed "
                          f"the model's context of {limit} tokens ({source})")
    return limit


_VARIANT_LINE = re.compile(r"variants\[(\d+)\]([^:\s]*): (.*)", re.S)


def _unique(items: list[str]) -> list[str]:
    """Each problem once, in order: lines that differ only in their variant's index are one line naming
    the others (`variants[0] (also variants[1]): ...`)."""
    out: dict[tuple[str, str], list[str]] = {}
    for line in dict.fromkeys(items):
        m = _VARIANT_LINE.fullmatch(line)
        out.setdefault((m.group(2), m.group(3)) if m else ("", line), []).append(m.group(1) if m else "")
    return [f"variants[{idx[0]}]{field}" + (f" (also {', '.join(f'variants[{i}]' for i in idx[1:])})"
                                           if len(idx) > 1 else "") + f": {rest}" if idx[0] else rest
            for (field, rest), idx in out.items()]

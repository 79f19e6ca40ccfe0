"""`specbench validate CONFIG [--print-commands]`: check a config without launching anything (no GPU needed).

Runs every check `specbench run` makes before it launches (the same functions: config, demo model name,
model context, launch plan, prompts and categories, preflight), prints every variant's exact argv and env
(secrets redacted) and the fairness audit. SGLang argvs go through SGLang's own argument parser
(`prepare_server_args`, in a subprocess) when sglang is importable in the engine's python; otherwise their
flag names are checked against the flag list of the release (package data, see server/sglang_flags.py), and the
closing line says what was not checked. vLLM argvs go through vLLM's own `vllm serve` parser and
`SpeculativeConfig` (server/vllm_args.py, one subprocess for all variants) when vllm is importable there;
each variant's line says "checked by vLLM X's parser" or "not checked: why".
Exit code: 0 when the config can be launched, 2 when it would be refused. Problems found on this machine
(missing model folder, busy GPU, taken port, unset API key variable) are listed but do not fail
validation: the config may be meant for another host.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

from specbench.checks.fairness import audit
from specbench.checks.node import variant_fits
from specbench.checks.preflight import check_model_context, config_problems, host_problems, preflight_warnings
from specbench.config import RunConfig, load_config
from specbench.plan.prompts import load_prompts
from specbench.plan.windows import Sweep, build_sweep, window_requests
from specbench.server import sglang_flags, vllm_args
from specbench.server.engines import Engine
from specbench.server.launch import VariantLaunch, make_engine, plan_launches
from specbench.server.multinode import Placement, RankedLaunch, placeholder_nodes, ranked_launch
from specbench.server.vllm_args import ARGV_LOOP
from specbench.shared.errors import PreflightError

Out = Callable[[str], None]

_PARSER_CHECK = r"""
import contextlib, io, json, sys
try:
    from sglang.srt.server_args import prepare_server_args
except Exception as exc:
    print(json.dumps({"import_error": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
try:
    from sglang.version import __version__
except Exception:
    __version__ = ""
ARGVS = json.loads(sys.argv[1])


def check_one(argv):
    prepare_server_args(argv)
""" + ARGV_LOOP + r"""
print(json.dumps({"version": __version__, "results": results}))
"""


def validate(path: str | Path, print_commands: bool = False, out: Out = print) -> int:
    cfg = load_config(path)
    tuned = ""
    if cfg.tune is not None:  # specbench tune launches the baseline and every setting: check each launch
        from specbench.tune.rounds import settings_config

        cfg, tuned = settings_config(cfg)
    engine = _engine(cfg)
    check_model_context(cfg, engine.model_path)  # when the model folder is here: lengths vs its context
    launches = plan_launches(cfg, engine)
    sweep = build_sweep(cfg.sweep, load_prompts(cfg.sweep.prompts))  # prompt sets, files, categories, as run loads them
    problems = config_problems(cfg, engine, launches)
    version = engine.version()
    out(f"config: {path}")
    out(f"engine: {cfg.engine.kind} {version or '(version unknown: set engine.version)'}"
        f"{'  via ' + shlex.join(cfg.engine.launch_prefix) if cfg.engine.launch_prefix else ''}")
    out(f"model: {engine.model_path}")
    if tuned:
        out(tuned)
    if cfg.sweep.load.open:
        out(open_loop_summary(cfg, sweep))
    out("")
    fits = variant_fits(cfg, launches, engine.model_path, not cfg.engine.launch_prefix)
    for i, la in enumerate(launches):
        _print_variant(cfg, la, engine, print_commands, out, next((f.lines() for f in fits if f.index == i), []))
    out(audit(launches).to_markdown())
    parser_errors, unchecked = _parser_section(cfg, engine, launches, out, " ".join(problems))
    vllm_refused, vllm_unchecked = _vllm_section(cfg, engine, launches, out)
    gpus_unknown = "the GPUs a node (set engine.gpus)" if any(f.gpus_unchecked for f in fits) else ""
    unchecked = "; ".join(filter(None, [unchecked, vllm_unchecked, gpus_unknown]))
    host = host_problems(cfg, engine, launches, cfg.engine.port) + _environment_problems(cfg)
    if host:
        out("On this machine (not a config error if the run is meant for another host):")
        for p in host:
            out(f"  - {p}")
        out("")
    for w in preflight_warnings(cfg, engine, launches):
        out(f"warning: {w}")
    refused = problems + [f"{name}: {err}" for name, err in parser_errors.items()] + vllm_refused
    if refused:
        out("Refused before launch:")
        for p in refused:
            out(f"  - {p}")
        return 2
    if cfg.sweep.input_lens:  # padding needs the tokenizer loaded: run checks it when it builds the sweep
        unchecked = "; ".join(filter(None, [unchecked, "padding prompts to sweep.input_lens (needs the tokenizer)"]))
    out(f"OK: {len(launches)} variant(s) would launch as printed."
        + (f" Not checked: {unchecked}." if unchecked else ""))
    return 0


def open_loop_summary(cfg: RunConfig, sweep: Sweep) -> str:
    """One line: the offered load, the SLOs, the search, and how long the configured rates take to send."""
    from specbench.metrics.slo import parse_slos

    load, cap = cfg.sweep.load, cfg.capacity
    send_s = sum((window_requests(cfg.sweep, sweep, p, "v", r)[-1].at_s or 0.0) for p in sweep.points
                 for r in range(1, cfg.sweep.repeats + 1))
    rates = ", ".join(f"{p.rate:g}" for p in sweep.points)
    how = f"trace {load.trace}" if load.trace else f"{load.arrival} arrivals"
    slos = "; ".join(s.label for s in parse_slos(cfg.slo)) or "none"
    search = (f"; capacity search: tolerance {cap.tolerance:g}, up to {cap.max_steps} rate(s) per SLO"
              if cap.search else "")
    return (f"load: open loop, {how} at {rates} req/s, {load.warmup_requests} + {load.requests_per_rate} requests "
            f"per rate, at most {load.max_in_flight} in flight; SLOs: {slos}{search}; sending the configured rates "
            f"takes {send_s:.0f} s per variant and launch (plus the last responses, and any search rates)")


def _engine(cfg: RunConfig) -> Engine:
    """The engine without preparing a demo model or requiring the model folder to exist here."""
    if cfg.model.path:
        model_path = str(Path(cfg.model.path).expanduser())
    else:
        from specbench.demo_models import demo_model, demo_model_path

        demo_model(cfg.model.demo or "")  # an unknown name is refused as run refuses it
        model_path = str(demo_model_path(cfg.model.demo or ""))
    return make_engine(cfg, model_path, cfg.model.served_name or model_path)


def _ranked(cfg: RunConfig, la: VariantLaunch, engine: Engine) -> RankedLaunch | None:
    """A multi-node variant's srun step and rank argvs, on placeholder nodes (Slurm places it at run time)."""
    if cfg.engine.nodes < 2 or la.spec is None:
        return None
    return ranked_launch(la.engine or engine, la.spec, Placement(tuple(placeholder_nodes(cfg.engine.nodes))),
                         srun_args=cfg.scheduler.srun_args, name=la.name)


def _print_variant(cfg: RunConfig, la: VariantLaunch, engine: Engine, print_commands: bool, out: Out,
                   node_lines: list[str]) -> None:
    from specbench.server.launch import redact_env

    kind = (la.engine or engine).kind
    role = " (baseline)" if la.variant.baseline else ""
    ranked = _ranked(cfg, la, engine)
    out(f"variant {la.name}{role}: drafter {la.drafter.name}, engine {kind}"
        + (f", {len(ranked.nodes)} nodes" if ranked else ""))
    if la.spec is None:
        out(f"  endpoint: {la.base_url} (already running; nothing launched)")
    elif print_commands and ranked:
        out(f"  srun: {shlex.join(ranked.spec.argv)}")
        for r, (node, argv) in enumerate(zip(ranked.nodes, ranked.ranks)):
            out(f"  rank {r} on {node}: {shlex.join(argv)}")
    elif print_commands:
        out(f"  argv: {shlex.join(la.spec.argv)}")
        env = redact_env(la.spec.env)
        shown = [f"{k}={v if v == '<redacted>' else shlex.quote(v)}" for k, v in env.items()]
        out("  env: " + (" ".join(shown) if shown else "(none added)"))
    for line in node_lines:  # the GPUs and memory it asks of the node (checks/node.py)
        out(f"  {line}")
    out("")


def _environment_problems(cfg: RunConfig) -> list[str]:
    """What run refuses in this shell's environment (an unset API key variable)."""
    from specbench.server.launch import api_headers

    try:
        api_headers(cfg.engine)
    except PreflightError as exc:
        return [str(exc)]
    return []


def _parser_section(cfg: RunConfig, engine: Engine, launches: list[VariantLaunch], out: Out,
                    said: str = "") -> tuple[dict[str, str], str]:
    """SGLang's own parser on every SGLang argv, else its flag names against the release's flag list
    (a flag the preflight problems in `said` already name is not reported twice).
    Returns ({variant: error}, what was not checked: "" when everything was)."""
    argvs: dict[str, list[str]] = {}
    for la in launches:
        if la.spec is None or (la.engine or engine).argv_parser != sglang_flags.__name__:
            continue
        ranked = _ranked(cfg, la, engine)
        if ranked is None:
            argvs[la.name] = sglang_server_args(la.spec.argv)
        else:  # every rank's argv, as it runs on its node
            argvs.update({f"{la.name} rank {r}": sglang_server_args(list(argv))
                          for r, argv in enumerate(ranked.ranks)})
    if not argvs:
        return {}, ""
    status, errors, version = check_with_sglang_parser(cfg, engine, argvs)
    errors = {k: f"SGLang's parser rejects the argv: {v}" for k, v in errors.items()}
    unchecked = ""
    if status.startswith("not checked"):
        why = ("the engine runs behind engine.launch_prefix" if cfg.engine.launch_prefix
               else "SGLang's parser cannot run here")
        errors, offline, unchecked = _offline_flag_check(engine.version(), argvs, why, said)
        status = f"{status}\nSGLang flag names: {offline}"
    out(f"SGLang argument parser: {status}")
    for name in argvs:
        if name in errors:
            out(f"  - {name}: {errors[name]}")
        elif version:  # one line per variant, as for vLLM
            out(f"  - {name}: checked by SGLang {version}'s parser: accepted")
    out("")
    return errors, unchecked


def _vllm_section(cfg: RunConfig, engine: Engine, launches: list[VariantLaunch],
                  out: Out) -> tuple[list[str], str]:
    """vLLM's own parser on every vLLM argv, one line per variant: checked by it, refused, or not checked.
    Returns (one line per refusal, what was not checked)."""
    from specbench.server.vllm_args import ParserCheck, check_with_vllm_parser, launch_module, refusal_lines, serve_args

    argvs = {la.name: serve_args(la.spec.argv) for la in launches
             if la.spec is not None and (la.engine or engine).argv_parser == vllm_args.__name__}
    if not argvs:
        return [], ""
    if cfg.engine.launch_prefix:
        check = ParserCheck(why="the engine runs behind engine.launch_prefix, its python is not visible here")
    else:
        first = next(la.spec.argv for la in launches if la.spec is not None and la.name in argvs)
        check = check_with_vllm_parser(engine.python(), argvs, launch_module(first))
    out("vLLM argument parser:")
    errors = check.errors or {}
    for name in argvs:
        said = "refused (below)" if name in errors else "accepted"
        out(f"  - {name}: " + (f"not checked: {check.why}" if check.why
                               else f"checked by vLLM {check.version}'s parser: {said}"))
    out("")
    return refusal_lines(errors, cfg), f"vLLM arguments ({check.why})" if check.why else ""


def _offline_flag_check(raw_version: str | None, argvs: dict[str, list[str]], why: str,
                        said: str = "") -> tuple[dict[str, str], str, str]:
    """({variant: unknown flags}, status line, what stays unchecked) from the shipped flag lists."""
    from specbench.server.sglang_flags import argv_problems, flags_for

    found = flags_for(raw_version)
    if isinstance(found, str):
        return {}, f"not checked: {found}", f"SGLang flag names and values ({found}; {why})"
    release, known = found
    errors = {}
    for name, argv in argvs.items():
        new = [p for p in argv_problems(argv, known, release) if p.split()[0] not in said.split()]
        if new:
            errors[name] = "; ".join(new)
    assumed = "" if raw_version else " (engine version unknown: set engine.version if you run another release)"
    status = (f"checked offline against the flag list of SGLang {release}{assumed}: "
              f"{len(argvs) - len(errors)} of {len(argvs)} argv(s) use only known flags")
    return errors, status, f"SGLang flag values and combinations ({why})"


def sglang_server_args(argv: list[str]) -> list[str]:
    """The arguments after `-m sglang.launch_server`."""
    return argv[argv.index("sglang.launch_server") + 1:] if "sglang.launch_server" in argv else argv


def check_with_sglang_parser(cfg: RunConfig, engine: Engine,
                             argvs: dict[str, list[str]]) -> tuple[str, dict[str, str], str]:
    """(status line, {variant: parser error}, SGLang's version or ""). Says clearly when the check could not run."""
    if cfg.engine.launch_prefix:
        return "not checked: the engine runs behind engine.launch_prefix, its python is not visible here", {}, ""
    python = engine.python()
    try:
        r = subprocess.run([python, "-c", _PARSER_CHECK, json.dumps(argvs)], capture_output=True, text=True,
                           timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"not checked: could not run {python} ({type(exc).__name__})", {}, ""
    last = (r.stdout.strip().splitlines() or [""])[-1]
    try:
        result = json.loads(last)
    except ValueError:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return f"not checked: the check in {python} failed ({tail[:160]})", {}, ""
    if "import_error" in result:
        return (f"not checked: sglang is not importable in {python} ({result['import_error'][:120]}); "
                f"see docs/sglang.md to install it for offline validation"), {}, ""
    errors = {k: v for k, v in result["results"].items() if v}
    ok = len(argvs) - len(errors)
    return (f"checked with sglang's prepare_server_args: {ok} of {len(argvs)} argv(s) accepted", errors,
            str(result.get("version", "")))

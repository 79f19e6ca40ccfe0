"""Before anything is measured: the plan of a run (engine, launches, sweep) and its run directory.

`prepare_plan` builds demo models on first use, resolves the model, loads the prompts and plans every
variant's launch. `open_run_dir` applies --resume/--force: a non-empty directory is refused unless one of
them is given, and --force sets earlier raw files aside (never deletes them).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from specbench.checks.preflight import check_model_context
from specbench.config import NATURAL, RunConfig, VerdictConfig, dump_config
from specbench.plan.windows import Sweep, build_sweep
from specbench.records.rundir import RAW_FILES, RunDir, atomic_write, write_json
from specbench.server.engines import ENGINES
from specbench.server.engines.base import Engine
from specbench.server.launch import VariantLaunch, api_headers, make_engine, plan_launches
from specbench.shared import environment
from specbench.shared.cpu_dtype import cpu_dtype, uses_auto
from specbench.shared.errors import ConfigError, RunDirError

SET_ASIDE = ("requests.jsonl", "windows.jsonl", "run.json", "requests.jsonl.torn", "windows.jsonl.torn")


@dataclass(frozen=True)
class Plan:
    """What a run measures: the resolved config, its engine, every variant's launch and the sweep."""

    cfg: RunConfig
    engine: Engine
    launches: list[VariantLaunch]
    sweep: Sweep
    eos_token_ids: list[int] | None = None  # the model folder's (plan.eos_ids); None when it names none

    def launch(self, variant: str) -> VariantLaunch:
        for vl in self.launches:
            if vl.name == variant:
                return vl
        raise KeyError(f"no variant {variant!r} in this run (known: {', '.join(v.name for v in self.launches)})")


def prepare_plan(cfg: RunConfig) -> Plan:
    from specbench.demo_models import prepare_all, resolve_model
    from specbench.plan.eos_ids import eos_token_ids
    from specbench.plan.prompts import load_prompts

    m = cfg.model
    model_path: Path | str
    tokenizer_path: Path | str | None
    context: int | None = None
    if not ENGINES.get(cfg.engine.kind).launched and m.path and not Path(m.path).expanduser().is_dir():
        # an endpoint someone else runs: model.path is the name it serves, nothing local to read
        model_path, tokenizer_path = m.path, m.tokenizer
    else:
        prepare_all(m, cfg.variants)  # demo models (target, and a demo draft model) are built on first use
        model_path, tokenizer_path = resolve_model(m)
        # sweep.output_lens vs the model's context, read once; it also caps natural output lengths
        context = check_model_context(cfg, model_path)
    api_headers(cfg.engine)  # an unset engine.api_key_env is refused before anything starts
    served = cfg.model.served_name or str(model_path)
    engine = make_engine(cfg, str(model_path), served)
    launches = plan_launches(cfg, engine)
    prompts = load_prompts(cfg.sweep.prompts)
    pad = None
    if cfg.sweep.input_lens:
        if tokenizer_path is None:
            raise ConfigError("model.tokenizer", "sweep.input_lens needs a local tokenizer folder")
        pad = _padder(str(tokenizer_path))
    count = None  # output_lens natural: reference answers counted in the target's tokens, as padding counts
    if NATURAL in cfg.sweep.output_lens and tokenizer_path is not None:
        count = _counter(str(tokenizer_path))
    return Plan(cfg=cfg, engine=engine, launches=launches,
                sweep=build_sweep(cfg.sweep, prompts, pad, count=count, context=context),
                eos_token_ids=eos_token_ids(model_path))


def check_run_dir(path: Path, resume: bool, force: bool) -> None:
    """Refuse a run directory this call must not touch; no side effects (runs before any check)."""
    if path.exists() and not path.is_dir():
        raise RunDirError(f"--out: {path} exists and is not a directory")
    if resume:
        if not RunDir(path).meta.exists():
            raise RunDirError(f"--resume: {path} is not a specbench run directory (no run.json)")
    elif path.exists() and any(path.iterdir()) and not force:
        raise RunDirError(f"{path} already exists and is not empty: use --resume to finish it "
                          f"or --force to measure again into it (earlier data is kept aside)")


def check_writable(path: Path, resume: bool) -> None:
    """Refuse a run directory that cannot be written, before anything is launched. A real probe (a
    temporary file created and removed), not os.access: root passes every permission check, yet a
    read-only mount, an immutable folder or a path through a regular file still refuse it."""
    flag = "--resume" if resume else "--out"
    target = path
    while not target.exists() and target != target.parent:
        target = target.parent
    if not target.is_dir():
        raise RunDirError(f"{flag}: cannot create {path}: {target} is a file, not a directory")
    what = target
    try:
        fd, probe = tempfile.mkstemp(dir=target, prefix=".specbench-write-check-")
        os.close(fd)
        os.unlink(probe)
        if resume:  # the raw files a resume appends to
            for what in (target / f for f in RAW_FILES):
                if what.exists():
                    os.close(os.open(what, os.O_WRONLY | os.O_APPEND))
    except OSError as exc:
        raise RunDirError(f"{flag}: cannot write to {what}: {exc.strerror} (nothing was launched)") from None


def open_run_dir(path: Path, resume: bool, force: bool) -> RunDir:
    rd = RunDir(path)
    check_run_dir(rd.path, resume, force)
    if not resume and rd.path.exists() and any(rd.path.iterdir()) and rd.has_measurements():
        # --force never deletes measurements: earlier raw files are set aside, not removed
        stamp = datetime.now().strftime('%Y%m%d-%H%M%S')
        aside = rd.path / f"previous-{stamp}"
        n = 1
        while aside.exists():  # two --force runs within one second must not collide
            n += 1
            aside = rd.path / f"previous-{stamp}-{n}"
        aside.mkdir()
        for name in SET_ASIDE:
            if (rd.path / name).exists():
                (rd.path / name).rename(aside / name)
    rd.path.mkdir(parents=True, exist_ok=True)
    return rd


def default_run_path(cfg: RunConfig) -> Path:
    return Path(cfg.output_dir) / f"{cfg.name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


def write_side_files(rd: RunDir, plan: Plan) -> None:
    """config.yaml (the resolved config), environment.json, fairness.json and model.json."""
    from specbench.checks.fairness import audit

    atomic_write(rd.config, dump_config(plan.cfg))
    cfg = plan.cfg
    auto = uses_auto(cfg.engine.args) or any(uses_auto(v.args) for v in cfg.variants)
    drafters = {vl.name: vl.drafter.name for vl in plan.launches}
    env = environment.collect(cfg.engine.kind, plan.engine.version(), drafters,
                              cpu_dtype=cpu_dtype().to_dict() if auto else None)
    if not plan.engine.launched:
        env = environment.for_external(env, cfg.engine.hardware)
    write_json(rd.environment, env)
    write_json(rd.fairness, audit(plan.launches).to_dict())
    write_json(rd.model_facts, {"eos_token_ids": plan.eos_token_ids})


def config_hash(cfg: RunConfig) -> str:
    """What the measurements depend on: the config without its `verdict` section (advice only)."""
    return hashlib.sha256(dump_config(cfg.model_copy(update={"verdict": VerdictConfig()})).encode()).hexdigest()[:16]


def _counter(tokenizer_path: str) -> Callable[[str], int]:
    from specbench.plan.padding import count_tokens, load_tokenizer

    tok = load_tokenizer(tokenizer_path)
    return lambda text: count_tokens(text, tok)


def _padder(tokenizer_path: str) -> Callable[[str, int], str]:
    from specbench.plan.padding import load_tokenizer, pad_prompt

    tok = load_tokenizer(tokenizer_path)
    return lambda text, n: pad_prompt(text, n, tok)

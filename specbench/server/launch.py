"""Config -> the exact launch of every variant (argv + env), validated before anything starts."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace

from specbench.config import EngineConfig, RunConfig, VariantConfig
from specbench.plan.drafter import Drafter, DrafterParams, LaunchContext, engine_equivalent, get_drafter
from specbench.plan.specs import SweepFacts
from specbench.server.engines import ENGINES, Engine, LaunchSpec
from specbench.server.engines.base import parse_version
from specbench.server.engines.command import CommandEngine
from specbench.shared.cpu_dtype import cpu_dtype, resolve_args, uses_auto
from specbench.shared.errors import ConfigError, PreflightError, UsageError

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass(frozen=True)
class VariantLaunch:
    variant: VariantConfig
    drafter: Drafter
    params: DrafterParams
    spec: LaunchSpec | None  # None: nothing to launch (external endpoint)
    base_url: str
    metrics_url: str
    drafter_args: tuple[str, ...] = ()  # the drafter's own arguments (left out of the fairness audit)
    engine: Engine | None = None  # the engine serving this variant (a variant `command` overrides the kind)

    @property
    def name(self) -> str:
        return self.variant.name

    def fingerprint(self) -> str:
        """Hash of what determines this variant's launch (for reuse across runs)."""
        blob = json.dumps({"drafter": self.drafter.name, "params": self.params.model_dump(mode="json"),
                           "argv": self.spec.argv if self.spec else None,
                           "env": self.spec.env if self.spec else None, "url": self.base_url,
                           # only when set, so a variant without it keeps the fingerprint earlier runs recorded
                           **({"max_concurrency": cap} if (cap := self.variant.max_concurrency) is not None else {})},
                          sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """The environment as shown in command.json and `validate --print-commands`: secrets hidden."""
    return {k: ("<redacted>" if any(m in k.upper() for m in SECRET_MARKERS) else v) for k, v in env.items()}


def api_headers(engine: EngineConfig) -> dict[str, str] | None:
    """The API key is read from the environment variable the config names; it is never stored."""
    name = engine.api_key_env
    if not name:
        return None
    key = os.environ.get(name)
    if not key:
        raise PreflightError(f"engine.api_key_env: environment variable {name} is not set")
    return {"Authorization": f"Bearer {key}"}


def sweep_facts(cfg: RunConfig) -> SweepFacts:
    """The few facts of the sweep an engine needs (engines are built from `engine:` and these alone)."""
    return SweepFacts(endpoint=cfg.sweep.endpoint, max_concurrency=max(cfg.sweep.concurrency))


def make_engine(cfg: RunConfig, model_path: str, served_name: str) -> Engine:
    return ENGINES.get(cfg.engine.kind)(cfg.engine, sweep_facts(cfg), model_path, served_name)


def variant_engine(engine: Engine, variant: VariantConfig) -> Engine:
    """A variant with its own `command` runs under the command engine whatever engine.kind is."""
    if variant.command and not engine.user_command:
        return CommandEngine(engine.config, engine.sweep, engine.model_path, engine.served_name)
    return engine


def resolve_drafter(cfg: RunConfig, i: int) -> tuple[Drafter, DrafterParams]:
    v = cfg.variants[i]
    try:
        drafter = get_drafter(v.drafter)
    except UsageError as exc:
        raise ConfigError(f"variants[{i}].drafter", str(exc)) from None
    try:
        params = drafter.parse_params(v.params)
    except Exception as exc:  # pydantic ValidationError: name the offending parameter
        from pydantic import ValidationError

        from specbench.config import format_validation_error

        if not isinstance(exc, ValidationError):
            raise
        where, msg = format_validation_error(exc, drafter.Params)
        key = next((str(e["loc"][-1]) for e in exc.errors() if e["type"] == "extra_forbidden"), "")
        same = engine_equivalent(drafter.Params, key) if key else None
        if same:  # an engine's own name for one of the drafter's params
            msg = f"unknown field `{key}` (the engine's name for `{same}`: write {same})"
        raise ConfigError(f"variants[{i}].params{'.' + where if where else ''}",
                          f"{msg} (drafter {drafter.name})") from None
    if drafter.speculative and v.baseline:
        raise ConfigError(f"variants[{i}].baseline", f"the baseline must not speculate (drafter {drafter.name})")
    return drafter, params


def plan_launches(cfg: RunConfig, engine: Engine) -> list[VariantLaunch]:
    """Every variant's launch, in config order. Raises ConfigError naming the variant field at fault."""
    out = []
    version = parse_version(engine.version())
    for i, v in enumerate(cfg.variants):
        drafter, params = resolve_drafter(cfg, i)
        eng = variant_engine(engine, v)
        if v.forced_acceptance is not None:  # the engine's own refusal (it cannot force, or not a profile)
            why = eng.force_refusal(v) if drafter.speculative else "the variant does not draft"
            if why is not None:
                raise ConfigError(f"variants[{i}].forced_acceptance", why)
        ctx = LaunchContext(engine=eng.kind, engine_version=version, model_path=engine.model_path)
        try:
            drafter_args = eng.drafter_args(drafter, params, ctx)
        except UsageError as exc:
            raise ConfigError(f"variants[{i}].drafter", str(exc)) from None
        port = cfg.engine.port
        spec = eng.launch_spec(v, drafter_args, port, f"variants[{i}]")
        if spec is not None and uses_auto(spec.argv):  # `--dtype auto-cpu`: what this CPU runs fast
            spec = replace(spec, argv=resolve_args(spec.argv, cpu_dtype()))
        if cfg.engine.nodes > 1 and spec is not None:
            from specbench.server.multinode import rank_flags

            rank_flags(eng)  # an engine that cannot span nodes is refused here, naming engine.nodes
        base = eng.base_url(v, port)
        out.append(VariantLaunch(variant=v, drafter=drafter, params=params, spec=spec, base_url=base,
                                 metrics_url=eng.metrics_url(v, port), drafter_args=tuple(drafter_args),
                                 engine=eng))
    return out

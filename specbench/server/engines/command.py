"""Any OpenAI-compatible server started from an argv template (`engine.kind: command`, or a variant's own
`command` in a config of another kind, e.g. a DDTree wrapper next to SGLang variants).

Placeholders: {python} {model} {host} {port} {served_name}, the drafter's parameters by name (e.g.
{tree_budget} {draft_model_path}), and {drafter_args} alone in an element, which expands to the drafter's
engine arguments. An unknown placeholder is a ConfigError naming the template element.

A server that can force its acceptance (docs/surface.md) declares it by taking {forced_acceptance}: the
variant's forced acceptance length, or 0 when none is forced (a per-position profile is refused: the
placeholder is one number).

Acceptance comes from `engine.acceptance_field` (a dotted path into a response chunk, e.g.
"ddtree.acceptance_length" or "usage.verify_steps"; `engine.acceptance_field_kind` says which) or from
`engine.acceptance_metric` (a Prometheus counter of verify steps, diffed per window).
"""

from __future__ import annotations

import string
from typing import Any

import httpx

from specbench.config import VariantConfig
from specbench.server.engines.base import Engine, LaunchSpec
from specbench.server.engines.prometheus import scrape, total
from specbench.shared.errors import ConfigError
from specbench.shared.schema import SpecDetails

BUILTIN = ("python", "model", "host", "port", "served_name")


class CommandEngine(Engine):
    kind = "command"
    forced_acceptance: str | None = "the command template's {forced_acceptance} placeholder (the server declares it)"
    user_command = True

    @property
    def counter_acceptance(self) -> bool:  # type: ignore[override]
        """Counter windows only when acceptance comes from a Prometheus counter."""
        return bool(self.config.acceptance_metric)

    def launch_spec(self, variant: VariantConfig, drafter_args: list[str], port: int,
                    where: str) -> LaunchSpec | None:
        e = self.config
        where, template = self._template(variant, where)
        if variant.forced_acceptance is not None and (why := self.force_refusal(variant)):
            raise ConfigError(f"{where}", f"forced_acceptance: {why}")
        values = {"python": self.python(), "model": self.model_path, "host": e.host, "port": str(port),
                  "served_name": self.served_name, **self._drafter_values(variant),
                  "forced_acceptance": f"{variant.forced_length or 0:g}"}
        argv = fill_template(template, values, drafter_args, where)
        engine_args = e.args if e.kind == "command" else []  # another kind's args are not this server's
        return LaunchSpec(argv=[*e.launch_prefix, *argv, *engine_args, *variant.args],
                          env={**e.env, **variant.env})

    def force_refusal(self, variant: VariantConfig) -> str | None:
        """Only a server whose command takes {forced_acceptance} declares that it can be forced, and then at one
        mean length (the placeholder is a number): a per-position profile is refused."""
        if self.forced_acceptance is None:  # an endpoint specbench does not launch (ExternalEngine)
            return super().force_refusal(variant)
        template = variant.command or self.config.command or []
        if not any("{forced_acceptance}" in t for t in template):
            return "this server's command does not take {forced_acceptance}, so it cannot be forced"
        if isinstance(variant.forced_acceptance, list):
            return ("this server's {forced_acceptance} takes one mean acceptance length, not a per-position "
                    "profile (give a number)")
        return None

    def drafter_flags(self, variant: VariantConfig) -> set[str]:
        """The template's flags that carry the drafter's own settings: those whose value is filled from a
        drafter parameter ({tree_budget}, {draft_model_path}, ...) or is {forced_acceptance}. They are the
        drafter's arguments on this server, as --speculative-* flags are on vLLM and SGLang."""
        template = variant.command or self.config.command or []
        out: set[str] = set()
        for j, element in enumerate(template):
            try:
                names = {f for _, f, _, _ in string.Formatter().parse(element) if f}
            except ValueError:
                continue
            if not names - set(BUILTIN) or element == "{drafter_args}":
                continue
            if element.startswith("--"):
                out.add(element.partition("=")[0])
            elif j and template[j - 1].startswith("--"):
                out.add(template[j - 1])
        return out

    def _template(self, variant: VariantConfig, where: str) -> tuple[str, list[str]]:
        if variant.command:
            return f"{where}.command", variant.command
        if self.config.command:
            return "engine.command", self.config.command
        raise ConfigError(f"{where}.command", "no command template (set it here or in engine.command)")

    @staticmethod
    def _drafter_values(variant: VariantConfig) -> dict[str, str]:
        from specbench.plan.drafter import get_drafter

        params = get_drafter(variant.drafter).parse_params(variant.params).model_dump(mode="json")
        return {k: "" if v is None else str(v) for k, v in params.items() if not isinstance(v, (list, dict))}

    def version(self) -> str | None:
        return self.config.version

    # -- acceptance -------------------------------------------------------------------------------
    def parse_spec(self, data: dict[str, Any]) -> SpecDetails | None:
        field = self.config.acceptance_field
        if not field:
            return None
        value = dotted(data, field)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        if self.config.acceptance_field_kind == "verify_steps":
            return SpecDetails(verify_steps=int(value))
        completion = dotted(data, "usage.completion_tokens")
        steps = round(completion / value) if isinstance(completion, int) and value > 0 else None
        return SpecDetails(verify_steps=steps, reported_accept_length=float(value))

    def spec_keys(self) -> tuple[str, ...] | None:
        field = self.config.acceptance_field
        head = field.split(".", 1)[0] if field else None
        if head in ("choices", "usage"):  # fields every token chunk has: each chunk is read as a dict
            return None
        return (head,) if head else ()

    async def read_counters(self, http: httpx.AsyncClient, metrics_url: str) -> dict[str, Any] | None:
        metric = self.config.acceptance_metric
        if not metric:
            return None
        samples = await scrape(http, metrics_url)
        return {"verify_steps": total(samples, metric)}  # None when the server does not expose it


def fill_template(template: list[str], values: dict[str, str], drafter_args: list[str], where: str) -> list[str]:
    """Fill each element's {placeholders}; "{drafter_args}" alone expands to several elements."""
    known = sorted({*values, "drafter_args"})
    out: list[str] = []
    for j, element in enumerate(template):
        if element == "{drafter_args}":
            out += drafter_args
            continue
        try:
            names = [f for _, f, _, _ in string.Formatter().parse(element) if f is not None]
        except ValueError as exc:
            raise ConfigError(f"{where}[{j}]", f"bad template {element!r}: {exc}") from None
        for name in names:
            if name not in values:
                hint = " ({drafter_args} must be a whole element)" if name == "drafter_args" else ""
                raise ConfigError(f"{where}[{j}]", f"unknown placeholder {{{name}}}{hint} "
                                                   f"(known: {', '.join(known)})")
        out.append(element.format(**values))
    return out


def dotted(data: Any, path: str) -> Any:
    """`a.b.0.c` into nested dicts and lists; None when any step is missing."""
    cur = data
    for part in path.split("."):
        if isinstance(cur, dict):
            cur = cur.get(part)
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur

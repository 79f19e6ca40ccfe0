"""Lazy registries: names map to "module:attribute" targets imported only when used.

Drafters are discovered from the modules of the top-level `drafters` package (one file = one drafter,
nothing in the core to edit); a user can also name any importable target, e.g. `mypkg.drafters:Medusa`.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from specbench.shared.errors import UsageError

T = TypeVar("T")


@dataclass(frozen=True)
class EngineKind:
    """An engine kind: its Engine class, and the two facts config/ checks before any engine is imported
    (config sits above server/; the Engine class holds the same facts: `launched`, and its `launch_spec`
    reads the field it needs)."""

    target: str  # "module:Class"
    endpoint: bool = False  # an endpoint already running: nothing launched (engine.url, .hardware, .protocol)
    needs: tuple[str, str] | None = None  # (engine.<field>, what it holds): a config of this kind needs it


# Engine kinds: name -> the Engine class. The one place an engine is registered (config validates
# engine.kind against it; engines/__init__.py builds ENGINES from it; drafters name their recipes after it).
ENGINE_KINDS: dict[str, EngineKind] = {
    "vllm": EngineKind("specbench.server.engines.vllm:VLLMEngine"),
    "sglang": EngineKind("specbench.server.engines.sglang:SGLangEngine"),
    "command": EngineKind("specbench.server.engines.command:CommandEngine", needs=("command", "an argv template")),
    "external": EngineKind("specbench.server.engines.external:ExternalEngine", endpoint=True,
                           needs=("url", "the running endpoint")),
}
ENGINE_TARGETS: dict[str, str] = {name: k.target for name, k in ENGINE_KINDS.items()}
DEFAULT_ENGINE = "vllm"  # engine.kind when the config does not say


def load_target(target: str) -> Any:
    """Import `module:attr` (or `module`, whose `ATTR` default is looked up by the caller)."""
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr) if attr else module


class Registry(Generic[T]):
    """Name -> lazily imported object. Unknown names raise a UsageError listing the valid ones."""

    def __init__(self, kind: str, targets: dict[str, str] | None = None, package: str | None = None,
                 attribute: str = "", instantiate: bool = False):
        self.kind = kind
        self._targets = dict(targets or {})
        self._package = package  # discover "<package>.<module>:<attribute>" for every module in it
        self._attribute = attribute
        self._instantiate = instantiate  # a target that names a class yields an instance of it
        self._cache: dict[str, T] = {}

    def names(self) -> list[str]:
        names = set(self._targets)
        if self._package:
            pkg = importlib.import_module(self._package)
            names |= {m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}
        return sorted(names)

    def register(self, name: str, target: str) -> None:
        self._targets[name] = target

    def get(self, name: str) -> T:
        if name in self._cache:
            return self._cache[name]
        if ":" in name:  # an explicit import target given by the user
            target = name
        elif name in self._targets:
            target = self._targets[name]
        elif self._package and name in self.names():
            target = f"{self._package}.{name}:{self._attribute}"
        else:
            raise UsageError(f"unknown {self.kind} {name!r} (known: {', '.join(self.names())})")
        try:
            obj = load_target(target)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"{self.kind} {name!r}: cannot import {target}: {exc}") from exc
        if self._instantiate and isinstance(obj, type):
            try:
                obj = obj()
            except TypeError as exc:
                raise UsageError(f"{self.kind} {name!r}: cannot create {target}(): {exc}") from None
        self._cache[name] = obj
        return obj

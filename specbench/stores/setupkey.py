"""The setup of a variance-history entry: what determines the variance between launches of an engine.

    setup_of(hardware, engine, baseline_launch, nodes) -> {"hardware", "engine", "launch", "model", "parallelism"}

- hardware: a hash of `environment.hardware_fingerprint()` (CPU model, extensions and count, memory, GPU models);
- engine: its kind and version ("vllm 0.11.2"; "?" where the version is unknown);
- launch: a hash of the baseline's launch as it runs: argv (interpreter or launch prefix included) without
  the drafter's own flags, and with the model path, host, port and served name replaced by placeholders,
  plus the environment it adds;
- model: a hash of the model folder's config.json and weight index and of its file list with sizes (not its
  path: the same weights copied elsewhere are the same model; a rebuilt or re-quantized one is not);
- parallelism: tensor / pipeline / data / expert parallel sizes read from the argv, and engine.nodes.

Two entries are of one setup only when all five are equal (`differences` names the fields that are not).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specbench.server.engines.base import Engine
    from specbench.server.launch import VariantLaunch

FIELDS = ("hardware", "engine", "launch", "model", "parallelism")
SHOWN = ("engine", "parallelism")  # fields readable as they are; the others are hashes
INDEX_FILES = ("config.json", "model.safetensors.index.json", "pytorch_model.bin.index.json")
PARALLEL_FLAGS = {"--tensor-parallel-size": "tp", "--tp": "tp", "--tp-size": "tp",
                  "--pipeline-parallel-size": "pp", "--pp": "pp", "--pp-size": "pp",
                  "--data-parallel-size": "dp", "--dp": "dp", "--dp-size": "dp",
                  "--expert-parallel-size": "ep", "--ep-size": "ep", "--enable-expert-parallel": "ep"}


def _hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def hardware_key(hardware: dict[str, Any]) -> str:
    return _hash(hardware)


def model_identity(model_path: str) -> str:
    """A hash of a model folder's index files (content) and of its file names with sizes; a name that is no
    local folder (an endpoint's served model) is hashed as a name."""
    path = Path(model_path).expanduser()
    if not path.is_dir():
        return "name:" + _hash(model_path)
    parts: list[Any] = []
    for name in INDEX_FILES:
        try:
            parts.append([name, (path / name).read_text()])
        except OSError:
            pass
    for f in sorted(path.iterdir()):
        if f.is_file() and not f.name.startswith("."):
            parts.append([f.name, f.stat().st_size])
    return _hash(parts)


def _normalize(argv: list[str], names: dict[str, str]) -> list[str]:
    """argv with each value in `names` (model path, host, port, served name) replaced by its placeholder,
    also inside --flag=value words."""
    out = []
    for word in argv:
        flag, eq, value = word.partition("=")
        if eq and flag.startswith("--") and value in names:
            word = f"{flag}={names[value]}"
        out.append(names.get(word, word))
    return out


def parallelism(argv: list[str], nodes: int) -> str:
    from specbench.server.engines.pins import parse_options

    _, opts = parse_options(argv)
    sizes = {PARALLEL_FLAGS[k]: (v or "on") for k, v in sorted(opts.items()) if k in PARALLEL_FLAGS}
    sizes = {k: sizes[k] for k in sorted(sizes)}
    return " ".join(f"{k}={v}" for k, v in sizes.items()) + (" " if sizes else "") + f"nodes={nodes}"


def setup_of(hardware: dict[str, Any], engine: Engine, baseline: VariantLaunch, nodes: int = 1) -> dict[str, str]:
    """The setup of a run's baseline launch (module docstring)."""
    from specbench.server.engines.pins import parse_options

    spec = baseline.spec
    version = engine.version()
    out = {"hardware": hardware_key(hardware), "engine": f"{baseline.engine.kind if baseline.engine else engine.kind} "
                                                        f"{version or '?'}",
           "model": model_identity(engine.model_path)}
    if spec is None:  # an endpoint someone else runs: its URL is all there is of its launch
        return {**out, "launch": _hash({"url": baseline.base_url}), "parallelism": f"nodes={nodes}"}
    port = spec.argv[spec.argv.index("--port") + 1] if "--port" in spec.argv[:-1] else str(engine.config.port)
    names = {engine.model_path: "{model}", engine.config.host: "{host}", port: "{port}",
             engine.served_name: "{served_name}"}
    head, opts = parse_options(_normalize(list(spec.argv), names))
    drafter = set(parse_options(list(baseline.drafter_args))[1])
    kept = {k: v for k, v in opts.items() if k not in drafter and not k.startswith("--speculative")}
    return {**out, "launch": _hash({"head": head, "opts": kept, "env": spec.env}),
            "parallelism": parallelism(list(spec.argv), nodes)}


def differences(entry: dict[str, str], setup: dict[str, str]) -> list[str]:
    """The fields in which an entry's setup differs from this run's, readable ones with both values:
    ["engine (vllm 0.32.0; this run: vllm 0.11.2)", "model", "launch"]."""
    out = []
    for f in FIELDS:
        if entry.get(f) != setup.get(f):
            out.append(f"{f} ({entry.get(f) or 'unknown'}; this run: {setup.get(f) or 'unknown'})" if f in SHOWN else f)
    return out

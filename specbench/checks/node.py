"""Preflight against the node (issue 39 item 4): the GPUs a launch needs against the GPUs there, the
weights against the GPU memory the engine may use, and draft paths an engine would download from a hub.

GPUs a node: `engine.gpus` as stated, else nvidia-smi's count where the engine runs here. GPU memory:
`engine.gpu_memory_gb`, else nvidia-smi's. The weights: the model folder's safetensors (the index's
`metadata.total_size`, else the files' sizes), plus the draft's, split over TP x PP (a draft runs at the
target's TP). The engine may use `--mem-fraction-static` (SGLang; pinned to 0.85) or
`--gpu-memory-utilization` (vLLM; default 0.9) of each GPU for weights and KV cache.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.config import RunConfig
from specbench.server.engines import ENGINES
from specbench.server.parallel import last_flag, parallel_of

if TYPE_CHECKING:
    from specbench.server.launch import VariantLaunch

KV_ROOM = 0.05  # least share of a GPU left for the KV cache before the memory check speaks
GB = 1e9


def weights_bytes(folder: str) -> tuple[int, str] | None:
    """(bytes of the safetensors weights in a local folder, where the figure comes from), or None."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        return None
    index = next(iter(sorted(path.glob("*.safetensors.index.json"))), None)
    if index is not None:
        try:
            total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
        except (OSError, ValueError):
            total = None
        if isinstance(total, int) and total > 0:
            return total, f"{index.name} total_size"
    files = sorted(path.glob("*.safetensors"))
    return (sum(f.stat().st_size for f in files), f"{len(files)} safetensors file(s)") if files else None


def draft_paths(la: VariantLaunch) -> list[tuple[str, str]]:
    """(params field, path) of the variant's draft model, whichever name its drafter gives the field."""
    return [(f, v) for f in ("draft_model_path", "model") if isinstance(v := getattr(la.params, f, None), str) and v]


def hub_id_problems(cfg: RunConfig, launches: list[VariantLaunch]) -> list[str]:
    """A draft path without "/" that is no folder here and no demo model: an engine takes it as a hub id
    and downloads it (a relative path run from another directory, or a typo)."""
    if cfg.engine.allow_hub_ids:
        return []
    from specbench.demo_models import DEMO_MODELS

    out = []
    for i, la in enumerate(launches):
        for field, path in draft_paths(la):
            if "/" not in path and path not in DEMO_MODELS and not Path(path).expanduser().is_dir():
                out.append(f"variants[{i}].params.{field}: {path!r} is not a folder here, and the engine would take "
                           f"it for a hub id and download it; give the draft's absolute path (or set "
                           f"engine.allow_hub_ids: true to download it)")
    return out


def _memory_gb(text: str) -> float | None:
    """nvidia-smi's memory.total ("81559 MiB") in GB."""
    m = re.match(r"\s*([0-9.]+)\s*(MiB|GiB|MB|GB)?", text)
    if not m:
        return None
    scale = {"MiB": 2 ** 20, "GiB": 2 ** 30, "MB": 1e6, "GB": 1e9}.get(m.group(2) or "MiB", 2 ** 20)
    return float(m.group(1)) * scale / GB


def node_gpus(cfg: RunConfig, here: bool) -> tuple[int | None, float | None, str]:
    """(GPUs a node, GB a GPU, where from): the config's figures first, nvidia-smi where the engine runs here."""
    from specbench.shared.environment import gpus

    found = gpus() if here else []
    count = cfg.engine.gpus if cfg.engine.gpus is not None else (len(found) or None)
    memory = cfg.engine.gpu_memory_gb
    if memory is None and found:
        memory = _memory_gb(found[0].get("memory", ""))
    source = ", ".join(filter(None, ["engine.gpus" if cfg.engine.gpus is not None else "nvidia-smi" if found else "",
                                     "engine.gpu_memory_gb" if cfg.engine.gpu_memory_gb is not None
                                     else "nvidia-smi" if found and memory else ""]))
    return count, memory, ", ".join(dict.fromkeys(source.split(", "))) or "unknown"


def node_problems(cfg: RunConfig, launches: list[VariantLaunch], model_path: str, here: bool) -> list[str]:
    """Refused: TP x PP beyond the GPUs a node, weights beyond the memory the engine may use. `here`: the
    engine runs on this machine (nvidia-smi and the model folder are its)."""
    return _findings(cfg, launches, model_path, here)[0]


def node_warnings(cfg: RunConfig, launches: list[VariantLaunch], model_path: str, here: bool) -> list[str]:
    """Said, not refused: weights that leave under KV_ROOM of a GPU for the KV cache."""
    return _findings(cfg, launches, model_path, here)[1]


def _findings(cfg: RunConfig, launches: list[VariantLaunch], model_path: str,
              here: bool) -> tuple[list[str], list[str]]:
    count, memory, source = node_gpus(cfg, here)
    target = weights_bytes(model_path) if here else None
    out: list[str] = []
    warn: list[str] = []
    for i, la in enumerate(launches):
        if la.spec is None:
            continue  # nothing launched here (an external endpoint)
        par = parallel_of(la.spec.argv)
        need = -(-par.gpus // cfg.engine.nodes)
        if count is not None and need > count:
            out.append(f"variants[{i}]: {par.source} needs {need} GPUs a node (TP x PP over engine.nodes "
                       f"{cfg.engine.nodes}) but the node has {count} ({source}); lower the parallel size or "
                       f"add nodes (engine.nodes)")
            continue
        fraction = (la.engine or ENGINES.get(cfg.engine.kind)).memory_fraction  # (flag, default)
        if fraction is None or memory is None or target is None:
            continue
        line = _memory_line(i, la, fraction, par.gpus, (memory, source), target)
        if line is not None:
            (out if line[0] else warn).append(line[1])
    return out, warn


def _memory_line(i: int, la: VariantLaunch, fraction_flag: tuple[str, float], gpus: int, gpu: tuple[float, str],
                 target: tuple[int, str]) -> tuple[bool, str] | None:
    """(refused, the line) for one GPU's (GB, where from) and the target's (bytes, where from): refused when
    the weights do not fit the memory the engine may use at all."""
    memory, source = gpu
    assert la.spec is not None
    flag, default = fraction_flag
    found = last_flag(la.spec.argv, (flag,))
    fraction = float(found[1]) if found and found[1] and re.fullmatch(r"[0-9.]+", found[1]) else default
    drafts = [w for _, p in draft_paths(la) if (w := weights_bytes(p)) is not None]
    per_gpu = (target[0] + sum(w[0] for w in drafts)) / gpus / GB
    budget = fraction * memory
    if per_gpu <= budget - KV_ROOM * memory:
        return None
    need = min(0.99, -(-(per_gpu / memory + KV_ROOM) * 100 // 1) / 100)
    what = f"weights{' + draft' if drafts else ''} take {per_gpu:.1f} GB a GPU ({target[1]}, over {gpus} GPUs)"
    return per_gpu > budget, (
        f"variants[{i}]: {what} of the {fraction:g} x {memory:.1f} GB = {budget:.1f} GB the engine may use ({flag}, "
        f"GPU memory from {source}), leaving {max(0.0, budget - per_gpu):.1f} GB for the KV cache; set {flag} to at "
        f"least {need:.2f} in engine.args, or spread the model over more GPUs")

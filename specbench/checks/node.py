"""Preflight against the node (issues 39 item 4 and 51): one model of what a variant asks of the node, the
GPUs and the memory, built once (`variant_fits`) and read by validate, run and plan alike.

GPUs: the launch's TP x PP x DP (server/parallel.py) spread over `engine.nodes`, against the GPUs a node:
`engine.gpus` as stated, else nvidia-smi's count where the engine runs here; neither: not checked, and said.
GPU memory: `engine.gpu_memory_gb` in GiB, the spec sheet's "GB" (an H100 "80GB" is 80 GiB = 85.9 GB;
nvidia-smi shows 81559 MiB), else nvidia-smi's. Figures are printed in decimal GB (1e9 bytes).
Weights: the safetensors of the target and of each draft (the index's `metadata.total_size`, else the files'
sizes), each distinct folder counted once (an MTP draft that is the target's own folder adds nothing), split
over TP x PP (a draft runs at the target's TP; DP replicates them). The engine may use its memory fraction
(`Engine.memory_fraction`) of each GPU for weights and KV cache; above `HEADROOM` too little is left for what it
allocates outside that pool (CUDA context, NCCL buffers, CUDA graphs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.config import RunConfig
from specbench.server.parallel import Parallel, last_flag, parallel_of

if TYPE_CHECKING:
    from specbench.server.launch import VariantLaunch

KV_ROOM = 0.05  # least share of a GPU left for the KV cache before the memory check speaks
HEADROOM = 0.95  # a memory fraction above this leaves under 5% of the GPU outside the engine's pool
GB = 1e9
GIB = 2 ** 30


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
    """A draft path that is no folder here and no demo model, without "/" (an engine takes it for a hub id
    and downloads it) or relative (`models/EAGLE3-LLaMA3.1-8B`: a folder of another directory, or a typo,
    that an engine would also try as a hub id). Nothing is downloaded at run time: the folder must exist."""
    if cfg.engine.allow_hub_ids:
        return []
    from specbench.demo_models import DEMO_MODELS

    out = []
    for i, la in enumerate(launches):
        for field, path in draft_paths(la):
            p = Path(path).expanduser()
            if path in DEMO_MODELS or p.is_dir() or (p.is_absolute() and "/" in path):
                continue  # an absolute folder missing here is the host check's (the run may be elsewhere)
            why = ("the engine would take it for a hub id and download it" if "/" not in path else
                   "a relative path is read from the directory the engine starts in, and an engine takes "
                   "owner/name for a hub id")
            out.append(f"variants[{i}].params.{field}: {path!r} is not a folder here, and {why}; give the draft's "
                       f"absolute path (or set engine.allow_hub_ids: true to download it)")
    return out


def _memory_gb(text: str) -> float | None:
    """nvidia-smi's memory.total ("81559 MiB") in GB."""
    m = re.match(r"\s*([0-9.]+)\s*(MiB|GiB|MB|GB)?", text)
    if not m:
        return None
    scale = {"MiB": 2 ** 20, "GiB": 2 ** 30, "MB": 1e6, "GB": 1e9}.get(m.group(2) or "MiB", 2 ** 20)
    return float(m.group(1)) * scale / GB


@dataclass(frozen=True)
class Node:
    """One node as preflight sees it: GPUs, GB of one GPU (decimal), where each figure comes from."""

    gpus: int | None
    memory_gb: float | None
    gpus_source: str
    memory_source: str
    nodes: int = 1

    @property
    def source(self) -> str:
        return ", ".join(dict.fromkeys(s for s in (self.gpus_source, self.memory_source) if s)) or "unknown"


def node_of(cfg: RunConfig, here: bool) -> Node:
    """The config's figures first, nvidia-smi where the engine runs here."""
    from specbench.shared.environment import gpus

    found = gpus() if here else []
    e = cfg.engine
    count = e.gpus if e.gpus is not None else (len(found) or None)
    memory = e.gpu_memory_gb * GIB / GB if e.gpu_memory_gb is not None else (
        _memory_gb(found[0].get("memory", "")) if found else None)
    return Node(count, memory, "engine.gpus" if e.gpus is not None else "nvidia-smi" if found else "",
                "engine.gpu_memory_gb" if e.gpu_memory_gb is not None else "nvidia-smi" if memory else "",
                e.nodes)


def node_gpus(cfg: RunConfig, here: bool) -> tuple[int | None, float | None, str]:
    """(GPUs a node, GB a GPU, where from)."""
    node = node_of(cfg, here)
    return node.gpus, node.memory_gb, node.source


@dataclass(frozen=True)
class VariantFit:
    """What one launched variant asks of the node."""

    index: int
    par: Parallel
    node: Node
    weights: tuple[tuple[str, int, str], ...]  # (folder, bytes, where from): the target's first, each folder once
    unread: tuple[str, ...]  # folders whose weights could not be read here
    flag: str | None  # the engine's memory-fraction flag (None: an engine without one)
    fraction: float

    @property
    def need(self) -> int:
        """GPUs a node."""
        return -(-self.par.gpus // self.node.nodes)

    @property
    def gpus_unchecked(self) -> bool:
        """More than one GPU a node asked of a node whose GPU count is unknown (one fits any node)."""
        return self.node.gpus is None and self.need > 1

    @property
    def per_gpu_gb(self) -> float | None:
        if self.unread or not self.weights:
            return None
        return sum(w[1] for w in self.weights) / self.par.shards / GB

    def gpu_problem(self) -> str | None:
        if self.node.gpus is None or self.need <= self.node.gpus:
            return None
        return (f"variants[{self.index}]: {self.par.source} needs {self.need} GPUs a node (TP x PP x DP over "
                f"engine.nodes {self.node.nodes}) but the node has {self.node.gpus} ({self.node.gpus_source}); "
                f"lower the parallel size or add nodes (engine.nodes)")

    def memory_finding(self) -> tuple[bool, str] | None:
        """(refused, the line): refused when the weights do not fit the memory the engine may use at all;
        said when they leave under KV_ROOM of a GPU for the KV cache."""
        memory, per_gpu = self.node.memory_gb, self.per_gpu_gb
        if self.flag is None or memory is None or per_gpu is None:
            return None
        budget = self.fraction * memory
        if per_gpu <= budget - KV_ROOM * memory:
            return None
        need = min(0.99, -(-(per_gpu / memory + KV_ROOM) * 100 // 1) / 100)
        drafts = len(self.weights) > 1
        what = (f"weights{' + draft' if drafts else ''} take {per_gpu:.1f} GB a GPU ({self.weights[0][2]}, over "
                f"{self.par.shards} GPUs)")
        return per_gpu > budget, (
            f"variants[{self.index}]: {what} of the {self.fraction:g} x {memory:.1f} GB = {budget:.1f} GB the engine "
            f"may use ({self.flag}, GPU memory from {self.node.source}), leaving {max(0.0, budget - per_gpu):.1f} GB "
            f"for the KV cache; set {self.flag} to at least {need:.2f} in engine.args, or spread the model over "
            f"more GPUs")

    def headroom_warning(self) -> str | None:
        if self.flag is None or self.fraction <= HEADROOM:
            return None
        left = f" ({(1 - self.fraction) * self.node.memory_gb:.1f} GB)" if self.node.memory_gb else ""
        return (f"variants[{self.index}]: {self.flag} {self.fraction:g} leaves {1 - self.fraction:.0%} of each GPU"
                f"{left} outside the engine's pool for the CUDA context, NCCL buffers and CUDA graphs: an "
                f"out-of-memory at startup is likely; {HEADROOM:g} at most leaves room")

    def lines(self) -> list[str]:
        """What validate prints for the variant: its GPUs and its memory, checked or why not."""
        node = self.node
        where = f" over {node.nodes} nodes" if node.nodes > 1 else ""
        gpus = (f"GPUs: {self.par.gpus} ({self.par.source}{where}), {self.need} a node"
                + (f" of {node.gpus} ({node.gpus_source})" if node.gpus is not None
                   else "" if not self.gpus_unchecked else ": not checked, the node's GPU count is unknown (set "
                                                           "engine.gpus)"))
        per_gpu = self.per_gpu_gb
        if per_gpu is None:
            why = (f"weights not readable here ({', '.join(self.unread)})" if self.unread else "no weights")
            return [gpus, f"memory: not checked: {why}"]
        parts = " + ".join(f"{w[1] / GB:.1f} GB ({'target' if k == 0 else 'draft'})"
                           for k, w in enumerate(self.weights))
        mem = f"memory: weights {per_gpu:.1f} GB a GPU ({parts}, over {self.par.shards} GPUs)"
        if self.flag is None:
            return [gpus, mem]
        if node.memory_gb is None:
            return [gpus, f"{mem}; GPU memory unknown: not checked (set engine.gpu_memory_gb)"]
        budget = self.fraction * node.memory_gb
        return [gpus, f"{mem} of {self.fraction:g} x {node.memory_gb:.1f} GB = {budget:.1f} GB ({self.flag}, "
                      f"{node.memory_source}), {max(0.0, budget - per_gpu):.1f} GB left for the KV cache"]


def variant_fits(cfg: RunConfig, launches: list[VariantLaunch], model_path: str, here: bool) -> list[VariantFit]:
    """The fit of every variant specbench launches (an external endpoint launches nothing). `here`: the
    engine runs on this machine (nvidia-smi is its). Weights are read wherever the folders are readable."""
    node = node_of(cfg, here)
    out = []
    for i, la in enumerate(launches):
        if la.spec is None:
            continue
        folders = list(dict.fromkeys(str(Path(p).expanduser().resolve()) if Path(p).expanduser().is_dir() else p
                                     for p in [model_path, *(p for _, p in draft_paths(la))]))
        read = {f: weights_bytes(f) for f in folders}
        flag, default = (la.engine.memory_fraction if la.engine is not None else None) or (None, 1.0)
        found = last_flag(la.spec.argv, (flag,)) if flag else None
        fraction = float(found[1]) if found and found[1] and re.fullmatch(r"[0-9.]+", found[1]) else default
        out.append(VariantFit(i, parallel_of(la.spec.argv), node,
                              tuple((f, *w) for f, w in read.items() if w is not None),
                              tuple(f for f, w in read.items() if w is None), flag, fraction))
    return out


def node_problems(cfg: RunConfig, launches: list[VariantLaunch], model_path: str, here: bool) -> list[str]:
    """Refused: TP x PP x DP beyond the GPUs a node, weights beyond the memory the engine may use."""
    out: list[str] = []
    for fit in variant_fits(cfg, launches, model_path, here):
        gpu = fit.gpu_problem()
        memory = None if gpu else fit.memory_finding()
        out += [gpu] if gpu else [memory[1]] if memory and memory[0] else []
    return out


def node_warnings(cfg: RunConfig, launches: list[VariantLaunch], model_path: str, here: bool) -> list[str]:
    """Said, not refused: weights that leave under KV_ROOM of a GPU for the KV cache, a fraction above HEADROOM."""
    out: list[str] = []
    for fit in variant_fits(cfg, launches, model_path, here):
        memory = None if fit.gpu_problem() else fit.memory_finding()
        out += [w for w in (memory[1] if memory and not memory[0] else None, fit.headroom_warning()) if w]
    return out

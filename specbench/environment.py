"""What the measurements ran on: host, CPU/GPU, engine and specbench versions (environment.json)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
import time
from collections.abc import Collection
from typing import Any

import psutil


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpus() -> list[dict[str, str]]:
    """GPUs as nvidia-smi lists them (empty when there is no nvidia-smi)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    return [dict(zip(("index", "name", "memory", "driver"), r)) for r in rows]


def specbench_version() -> str:
    try:
        return importlib.metadata.version("specbench-matrix")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def hardware_fingerprint() -> dict[str, Any]:
    """What makes measurements comparable across runs: CPU model and count, memory, GPU models."""
    return {"cpu": cpu_model(), "cpus": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30),
            "gpus": [g.get("name") for g in gpus()]}


def busy_processes(exclude: Collection[int] = frozenset(), seconds: float = 1.0,
                   min_percent: float = 5.0) -> list[tuple[str, float]]:
    """Other processes using more than `min_percent` CPU over `seconds` (is the machine quiet?),
    busiest first, as (command line, percent)."""
    procs = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            p.cpu_percent(None)
            procs.append(p)
        except psutil.Error:
            pass
    time.sleep(seconds)
    out = []
    for p in procs:
        try:
            pct = p.cpu_percent(None)
            if p.pid not in exclude and pct > min_percent:
                out.append((" ".join(p.info["cmdline"] or [])[:90] or str(p.pid), pct))
        except psutil.Error:
            pass
    return sorted(out, key=lambda x: -x[1])


def collect(engine_kind: str, engine_version: str | None, drafters: dict[str, str]) -> dict[str, Any]:
    hw = hardware_fingerprint()
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": hw["cpu"],
        "cpus": hw["cpus"],
        "memory_gib": hw["memory_gib"],
        "gpus": gpus(),
        "engine": {"kind": engine_kind, "version": engine_version},
        "specbench_version": specbench_version(),
        "drafters": drafters,
    }

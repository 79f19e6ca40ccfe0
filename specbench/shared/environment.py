"""What the measurements ran on: host, CPU/GPU, engine and specbench versions (environment.json)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
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


TELEMETRY_FIELDS = (("sm_clock_mhz", "clocks.sm"), ("power_w", "power.draw"), ("temperature_c", "temperature.gpu"))


def gpu_telemetry() -> list[dict[str, float | None]] | None:
    """Per GPU now: SM clock (MHz), power draw (W), temperature (C) from nvidia-smi; None without it.
    Recorded in each window's raw record, so clock or thermal drift between variants can be checked."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    query = ",".join(["index", *(q for _, q in TELEMETRY_FIELDS)])
    try:
        out = subprocess.run([exe, f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    rows = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 1 + len(TELEMETRY_FIELDS):
            continue
        row: dict[str, float | None] = {"index": _float(cells[0])}
        row.update({name: _float(v) for (name, _), v in zip(TELEMETRY_FIELDS, cells[1:])})
        rows.append(row)
    return rows or None


def _float(text: str) -> float | None:
    """nvidia-smi prints "[N/A]" or "[Not Supported]" for what a GPU cannot report."""
    try:
        return float(text)
    except ValueError:
        return None


def specbench_version() -> str:
    try:
        return importlib.metadata.version("specbench-matrix")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# CPU extensions that change what a CPU engine computes and how fast (bf16 or float32 matmuls, AVX-512 or AVX2
# kernels): two machines that /proc/cpuinfo names alike ("AMD EPYC") may differ in them, 2x in speed
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve",
             "bf16")


def cpu_isa(flags: Collection[str] | None = None) -> list[str]:
    """The CPU's extensions among ISA_FLAGS, sorted (this CPU's by default)."""
    from specbench.shared.cpu_dtype import cpu_flags

    found = cpu_flags() if flags is None else frozenset(flags)
    return sorted(f for f in ISA_FLAGS if f in found)


def hardware_fingerprint() -> dict[str, Any]:
    """What makes measurements comparable across runs: CPU model, extensions and count, memory, GPU models."""
    return {"cpu": cpu_model(), "cpu_isa": cpu_isa(), "cpus": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30),
            "gpus": [g.get("name") for g in gpus()]}


def _nvidia_smi(*args: str) -> str:
    if not shutil.which("nvidia-smi"):
        return ""
    try:
        r = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout if r.returncode == 0 else ""


def cuda_version(smi_banner: str) -> str | None:
    """The CUDA version from nvidia-smi's banner ("CUDA Version: 12.8")."""
    m = re.search(r"CUDA Version:\s*([0-9.]+)", smi_banner)
    return m.group(1) if m else None


def topology(topo_m: str) -> str | None:
    """The connection matrix of `nvidia-smi topo -m` (legend dropped, whitespace normalised), or None."""
    lines = []
    for line in topo_m.splitlines():
        if line.strip().startswith("Legend"):
            break
        if line.strip():
            lines.append(" ".join(line.split()))
    return "\n".join(lines) or None


def node_fingerprint(engine_version: str | None) -> dict[str, Any]:
    """This node's fingerprint (hardware.FINGERPRINT_FIELDS, plus its host name), collected where the
    engine runs: what must be equal for two nodes' measurements to be compared."""
    found = gpus()
    names = sorted({g.get("name", "") for g in found})
    memory = sorted({g.get("memory", "") for g in found})
    drivers = sorted({g.get("driver", "") for g in found})
    hw = hardware_fingerprint()
    return {"host": socket.gethostname(), "cpu": hw["cpu"], "cpu_isa": hw["cpu_isa"], "cpus": hw["cpus"],
            "memory_gib": hw["memory_gib"],
            "gpu_model": " + ".join(names) or None, "gpu_count": len(found),
            "gpu_memory": " + ".join(memory) or None, "driver": " + ".join(drivers) or None,
            "cuda": cuda_version(_nvidia_smi()) if found else None,
            "topology": topology(_nvidia_smi("topo", "-m")) if found else None,
            "engine_version": engine_version}


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


def collect(engine_kind: str, engine_version: str | None, drafters: dict[str, str],
            cpu_dtype: dict[str, str] | None = None) -> dict[str, Any]:
    """environment.json of a run measured on this one host: every variant on this node. `cpu_dtype`: the
    dtype `--dtype auto-cpu` resolved to and why (shared/cpu_dtype.py), when the config asked for it."""
    hw = hardware_fingerprint()
    host = socket.gethostname()
    return {
        "host": host,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": hw["cpu"],
        "cpu_isa": hw["cpu_isa"],
        "cpus": hw["cpus"],
        "memory_gib": hw["memory_gib"],
        "gpus": gpus(),
        "engine": {"kind": engine_kind, "version": engine_version},
        "specbench_version": specbench_version(),
        "drafters": drafters,
        "nodes": {host: node_fingerprint(engine_version)},
        "variant_nodes": {name: [host] for name in drafters},
        **({"cpu_dtype": cpu_dtype} if cpu_dtype else {}),
    }


UNKNOWN_SERVER = "unknown (an endpoint specbench did not launch; describe it with engine.hardware)"


def for_external(env: dict[str, Any], server_hardware: str | None) -> dict[str, Any]:
    """environment.json of a run against an endpoint specbench did not launch (engine.kind external): what
    `collect` found here is the client's machine, not the server's, so no node is said to have served a
    variant, and the server's hardware is what the config states, else unknown."""
    return {**env, "nodes": {}, "variant_nodes": {}, "measured_from": "client (host, CPU and GPUs are the "
            "machine that sent the requests, not the server's)", "server_hardware": server_hardware or UNKNOWN_SERVER}

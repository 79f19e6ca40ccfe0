"""Which node measured what, and whether two nodes are the same hardware (so their numbers may be compared).

A node's fingerprint (environment.json `nodes`, from `environment.node_fingerprint`) holds what changes a
measurement: CPU model, extensions (AVX-512, BF16, AMX: environment.ISA_FLAGS) and count, memory, GPU model, count
and memory, driver, CUDA version, the GPU interconnect as `nvidia-smi topo -m` prints it, and the engine version.
`variant_nodes` says which node(s) served each variant (rank 0 of its first launch first; a resumed variant may have
run on several nodes in turn); the single-node runner puts every variant on its one host.

A speedup divides two variants' throughputs, so both must come from equal fingerprints: `check` names the
variants measured on hardware unlike the baseline's, and the analysis withholds their speedups unless the
config overrides it (`scheduler.allow_mixed_hardware: true`); the report says which, and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

# what makes two nodes measure alike (the host name is not: identical nodes have different names)
FINGERPRINT_FIELDS = ("cpu", "cpu_isa", "cpus", "memory_gib", "gpu_model", "gpu_count", "gpu_memory", "driver", "cuda",
                      "topology", "engine_version")


def differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Fingerprint fields whose values differ: {field: (a's, b's)}. A field one side lacks is not compared
    (an older run directory records fewer of them)."""
    return {k: (a[k], b[k]) for k in FINGERPRINT_FIELDS if k in a and k in b and a[k] != b[k]}


def _one_line(v: Any) -> str:
    return " | ".join(str(v).splitlines()) if v is not None else "(none)"


def describe(diff: dict[str, tuple[Any, Any]]) -> str:
    """`gpu_model: NVIDIA H100 vs NVIDIA A100; cuda: 12.8 vs 12.4`"""
    return "; ".join(f"{k}: {_one_line(x)} vs {_one_line(y)}" for k, (x, y) in diff.items())


def variant_fingerprints(env: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """variant -> the fingerprint of the first node that served it (rank 0 of its first launch)."""
    nodes: dict[str, dict[str, Any]] = env.get("nodes") or {}
    placement: dict[str, list[str]] = env.get("variant_nodes") or {}
    return {v: nodes[names[0]] for v, names in placement.items() if names and names[0] in nodes}


@dataclass
class HardwareCheck:
    baseline: str
    variants: list[str] = field(default_factory=list)
    mismatched: dict[str, str] = field(default_factory=dict)  # variant -> what differs from the baseline's node
    allowed: bool = False  # the config says to compare anyway

    @property
    def withheld(self) -> set[str]:
        """Variants whose speedups must not be reported: every one when the baseline itself ran on unlike
        nodes (its ranks, or launches on several nodes)."""
        if self.allowed:
            return set()
        return set(self.variants) if self.baseline in self.mismatched else set(self.mismatched)


def check(env: dict[str, Any], baseline: str, allowed: bool = False) -> HardwareCheck:
    """Compare the fingerprint of every node that served a variant (every rank, every launch) with the
    baseline's first node."""
    nodes: dict[str, dict[str, Any]] = env.get("nodes") or {}
    placement: dict[str, list[str]] = env.get("variant_nodes") or {}
    result = HardwareCheck(baseline=baseline, variants=list(placement), allowed=allowed)
    served = placement.get(baseline) or []
    if not served or served[0] not in nodes:
        return result
    first = served[0]
    for variant, names in placement.items():
        problems = [f"node {n} differs from the baseline's node {first}: {describe(d)}"
                    for n in names if n in nodes and (d := differences(nodes[first], nodes[n]))]
        if problems:
            result.mismatched[variant] = "; ".join(problems)
    return result


def check_saved(env: dict[str, Any], config: dict[str, Any], baseline: str) -> HardwareCheck:
    """`check` for a run directory's environment.json and config.yaml, as loaded (dicts)."""
    allowed = bool((config.get("scheduler") or {}).get("allow_mixed_hardware"))
    return check(env, baseline, allowed)


def withhold_speedups(cells: pd.DataFrame, result: HardwareCheck) -> pd.DataFrame:
    """The cells with every speedup column of the withheld variants blanked (NaN): a ratio of two
    throughputs measured on unlike hardware says nothing about the drafter."""
    withheld = result.withheld
    if not withheld or not len(cells):
        return cells
    out = cells.copy()
    rows = out["variant"].isin(withheld)
    out.loc[rows, [c for c in out.columns if "speedup" in c]] = float("nan")
    return out

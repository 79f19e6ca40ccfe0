"""Read Prometheus text exposition into {name: {labels: value}} with prometheus_client's parser."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


def parse_metrics(text: str, prefix: str = "") -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Samples whose name starts with `prefix`, keyed by sample name then sorted label pairs."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith(prefix) and not s.name.endswith("_created"):
                out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = float(s.value)
    return out


def total(samples: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str) -> float | None:
    """Sum of a metric over all label sets (all engines / model names), None when absent."""
    series = samples.get(name)
    return sum(series.values()) if series else None


async def scrape(http: httpx.AsyncClient, url: str, prefix: str = "") -> dict:
    r = await http.get(url, timeout=10.0)
    r.raise_for_status()
    return parse_metrics(r.text, prefix)


def state_of(samples: dict[str, dict[tuple[tuple[str, str], ...], float]], names: dict[str, str]) -> dict[str, float]:
    """An engine's state from one scrape: per key its metric summed over label sets (requests of every engine
    of a data-parallel server), except `kv_usage`, a fraction per engine: the fullest one. Absent: left out."""
    out: dict[str, float] = {}
    for key, name in names.items():
        series = samples.get(name)
        if series:
            out[key] = max(series.values()) if key == "kv_usage" else sum(series.values())
    return out

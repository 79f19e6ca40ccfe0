"""The mix columns of cells.csv: per drafter and concurrency (and temperature, rate), the speedup over the
workload's mix with its two-level interval (decide.primary.mix_interval), written on every cell of the group."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from specbench.decide.intervals import LaunchVariance
from specbench.decide.primary import mix_interval
from specbench.metrics.common import key_nan
from specbench.metrics.speedup import MeasuredCell

MIX_COLUMNS = ["mix_speedup", "mix_speedup_ci_low", "mix_speedup_ci_high", "mix_speedup_ci_df", "mix_points"]


def mix_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The group a cell's mix is taken over: one drafter at one concurrency, temperature and rate."""
    return row["variant"], row["concurrency"], key_nan(row.get("temperature")), key_nan(row.get("rate"))


def add_mix_columns(cells: list[MeasuredCell], base_cells: Mapping[str, MeasuredCell],
                    calibration: LaunchVariance | None) -> None:
    """Fill MIX_COLUMNS on every valid drafter cell with a speedup: the geometric mean (equal weights) of
    its group's speedups and the two-level interval of that mean."""
    groups: dict[tuple[Any, ...], list[MeasuredCell]] = {}
    for c in cells:
        r = c.row
        if not r["is_baseline"] and r["valid"] and math.isfinite(r["speedup"]) and r["point_id"] in base_cells:
            groups.setdefault(mix_key(r), []).append(c)
    for group in groups.values():
        mix = mix_interval([(c.row["speedup"], c.window_tp, base_cells[c.row["point_id"]].window_tp)
                            for c in group], calibration)
        for c in group:
            c.row.update(mix_speedup=mix.speedup, mix_speedup_ci_low=mix.low, mix_speedup_ci_high=mix.high,
                         mix_speedup_ci_df=mix.df, mix_points=mix.points)

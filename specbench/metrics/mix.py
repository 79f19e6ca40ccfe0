"""The mix columns of cells.csv: per drafter and concurrency (and temperature, rate), the speedup over the
workload's mix, weighted by the baseline's time on each point (decide.primary.workload_weights), with its
two-level interval (decide.primary.mix_interval), written on every cell of the group."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from specbench.decide.family import launch_sharing
from specbench.decide.intervals import LaunchVariance
from specbench.decide.primary import mix_interval, workload_weights
from specbench.decide.sampling import SubsetSampling
from specbench.metrics.common import key_nan
from specbench.metrics.speedup import MeasuredCell

MIX_COLUMNS = ["mix_speedup", "mix_speedup_ci_low", "mix_speedup_ci_high", "mix_speedup_ci_df", "mix_points",
               "mix_weight", "launch_sharing", "launch_sharing_df"]


def mix_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The group a cell's mix is taken over: one drafter at one concurrency, temperature and rate."""
    return row["variant"], row["concurrency"], key_nan(row.get("temperature")), key_nan(row.get("rate"))


def add_mix_columns(cells: list[MeasuredCell], base_cells: Mapping[str, MeasuredCell],
                    calibration: LaunchVariance | None, subset: SubsetSampling | None = None) -> None:
    """Fill MIX_COLUMNS on every valid drafter cell with a speedup: its group's time ratio, each point weighted
    by the baseline's time on it (mean output tokens per request / output throughput; `mix_weight`, its share),
    and the two-level interval of that ratio; and on every cell the run's launch sharing (the correlation of a
    launch's effects across its points, decide.family.launch_sharing) when some variant ran 2+ launches. A
    level measured on a prompt subset (`subset`) adds its sampling variance (decide.sampling) to the interval,
    each category weighing its points' workload weights."""
    groups: dict[tuple[Any, ...], list[MeasuredCell]] = {}
    for c in cells:
        r = c.row
        if not r["is_baseline"] and r["valid"] and math.isfinite(r["speedup"]) and r["point_id"] in base_cells:
            groups.setdefault(mix_key(r), []).append(c)
    for group in groups.values():
        bases = [base_cells[c.row["point_id"]] for c in group]
        weights = workload_weights([_tokens(b) for b in bases], [b.row["output_throughput_tok_s"] for b in bases])
        extra = subset.component(group[0].row["concurrency"], [str(c.row["category"]) for c in group],
                                 weights) if subset is not None else None
        mix = mix_interval([(c.row["speedup"], c.window_tp, b.window_tp) for c, b in zip(group, bases)],
                           calibration, weights=weights, extra=[extra] if extra is not None else [])
        for c, w in zip(group, weights or [1.0 / len(group)] * len(group)):
            c.row.update(mix_speedup=mix.speedup, mix_speedup_ci_low=mix.low, mix_speedup_ci_high=mix.high,
                         mix_speedup_ci_df=mix.df, mix_points=mix.points, mix_weight=w)
    by_variant: dict[str, list[MeasuredCell]] = {}
    for c in cells:
        if c.row["valid"] and c.n_launches >= 2:
            by_variant.setdefault(str(c.row["variant"]), []).append(c)
    sharing = launch_sharing([[c.window_tp for c in sorted(cs, key=lambda c: str(c.row["point_id"]))]
                              for cs in by_variant.values()])
    if sharing is not None:
        for c in cells:
            c.row.update(launch_sharing=sharing.rho, launch_sharing_df=sharing.df)


def _tokens(base: MeasuredCell) -> float:
    """Output tokens per request at a point: the mean over the baseline's successful requests (the outputs
    are the drafter's too: lossless), else the point's output_len."""
    n = [r.n_out for r in base.reqs if r.ok and math.isfinite(r.n_out)]
    return math.fsum(n) / len(n) if n else float(base.row.get("output_len") or math.nan)

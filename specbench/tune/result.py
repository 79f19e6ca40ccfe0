"""What the tune's search measured, shared by the search (search.py) and its outputs (output.py): the rounds,
the scores, the settings left standing, and what the rounds' run directories say about each setting."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from specbench.metrics.common import geometric_mean
from specbench.records.rundir import RunDir
from specbench.tune.rounds import Setting


@dataclass
class Round:
    label: str
    run_dir: Path
    cells: pd.DataFrame


@dataclass
class TuneResult:
    tune_dir: Path
    grid: dict[str, list[Setting]]
    rounds: list[Round] = field(default_factory=list)
    # (tuned variant, concurrency) -> [(round label, setting name, score)] of every measurement
    scores: dict[tuple[str, int], list[tuple[str, str, float]]] = field(default_factory=dict)
    final: dict[tuple[str, int], str] = field(default_factory=dict)  # the last setting standing
    confirm: Round | None = None
    dynamic: dict[str, str] = field(default_factory=dict)  # tuned variant -> its dynamic variant's name
    dynamic_params: dict[str, dict[str, Any]] = field(default_factory=dict)


def score(cells: pd.DataFrame, variant: str, concurrency: int) -> float:
    """Geometric mean of a variant's valid speedups at one concurrency (NaN when none)."""
    c = cells[(cells["variant"] == variant) & (cells["concurrency"] == concurrency) & cells["valid"].astype(bool)]
    return geometric_mean(pd.to_numeric(c["speedup"], errors="coerce")).value


def search_score(res: TuneResult, tuned: str, concurrency: int) -> float:
    """The final setting's speedup in the last search round that measured it (the search-split estimate)."""
    final = res.final[(tuned, concurrency)]
    got = [sc for _, n, sc in res.scores.get((tuned, concurrency), []) if n == final]
    return got[-1] if got else math.nan


def param_names(drafter: str) -> set[str]:
    from specbench.plan.drafter import get_drafter

    return set(get_drafter(drafter).Params.model_fields)


def launch_argv(rounds: list[Round]) -> dict[str, list[str]]:
    """Each measured setting's launch argv, from its round's run directory (the first round that has it)."""
    out: dict[str, list[str]] = {}
    for r in rounds:
        for name, argv in RunDir(r.run_dir).launch_argv().items():
            out.setdefault(name, argv)
    return out


def spec_k(argv: list[str]) -> int:
    from specbench.tune.schedule import spec_config

    c = spec_config(argv) or {}
    return int(c.get("num_speculative_tokens") or 0)

"""The mix is the workload's (issue 50 item 8): each point weighted by the baseline's time on it."""

from __future__ import annotations

import math

import pytest
import scipy.stats

from specbench.decide import primary
from specbench.decide.decision import Outcome


def _launches(level: float, *effects: float) -> dict[tuple[int, int], float]:
    return {(la + 1, 1): level * e for la, e in enumerate(effects)}


def test_the_issue_example_reads_the_workloads_time_ratio_not_the_equal_weight_mean() -> None:
    """1.5x on 64-token outputs, 0.9x on 1024-token ones, the baseline at 100 tok/s on both: the workload
    spends 64 + 1024 baseline-seconds-per-100-tokens and 64/1.5 + 1024/0.9 with the drafter, 0.922x, where the
    equal-weight geometric mean read 1.162 ("adopt")."""
    effects = (1.0, 1.01, 0.99)
    pts = [(s, _launches(100.0 * s, *effects), _launches(100.0, *effects)) for s in (1.5, 0.9)]
    weights = primary.workload_weights([64.0, 1024.0], [100.0, 100.0])
    assert weights == pytest.approx([64 / 1088, 1024 / 1088])
    got = primary.mix_interval(pts, None, weights=weights)
    assert got.speedup == pytest.approx(1088 / (64 / 1.5 + 1024 / 0.9)) and round(got.speedup, 3) == 0.922
    assert got.low < got.speedup < got.high < 1.0
    assert primary.primary_outcome(got.low, got.high, got.df, 1, 1.05) is not Outcome.ADOPT
    equal = primary.mix_interval(pts, None)  # equal time shares: the harmonic mean of the two
    assert equal.speedup == pytest.approx(2 / (1 / 1.5 + 1 / 0.9))


def test_weights_need_a_positive_time_at_every_point() -> None:
    assert primary.workload_weights([64.0, 1024.0], [100.0, 0.0]) is None
    assert primary.workload_weights([math.nan], [100.0]) is None
    with pytest.raises(ValueError, match="mix weights"):
        primary.mix_interval([(1.0, _launches(1.0, 1, 1), _launches(1.0, 1, 1))], None, weights=[0.5, 0.5])


def test_a_weighted_launch_unit_is_the_weighted_mean_of_its_points() -> None:
    """Equal speedups: a_p = u_p, and the launch units are sum_p u_p ln(launch mean at p)."""
    d1, d2 = (1.0, 1.05, 0.97), (1.0, 0.95, 1.02)
    pts = [(1.0, _launches(100.0, *d1), _launches(100.0, 1, 1, 1)),
           (1.0, _launches(100.0, *d2), _launches(100.0, 1, 1, 1))]
    got = primary.mix_interval(pts, None, weights=[0.25, 0.75])
    ys = [0.25 * math.log(a) + 0.75 * math.log(b) for a, b in zip(d1, d2)]
    m = sum(ys) / 3
    var = sum((y - m) ** 2 for y in ys) / 2 / 3
    assert math.log(got.high) == pytest.approx(scipy.stats.t.ppf(0.975, 2) * math.sqrt(var))

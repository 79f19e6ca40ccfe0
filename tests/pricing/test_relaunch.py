"""One more launch's price: startup plus the measured share of a launch's measuring time, the share by the
cells' measured times (a C=1 window lasts longer than a C=32 one of as many requests), else by count."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from specbench.pricing.relaunch import cell_seconds, launch_seconds, measuring_share


def test_launch_seconds_is_startup_plus_the_share_of_measuring() -> None:
    # 3 launches in 480 s with a 100 s startup: 60 s measuring a launch
    assert launch_seconds(100.0, 480.0, 3) == pytest.approx(160.0)
    assert launch_seconds(100.0, 480.0, 3, 0.25) == pytest.approx(115.0)
    assert launch_seconds(None, None, 3, 0.5) == 0.0  # nothing recorded: nothing to price
    assert launch_seconds(100.0, 50.0, 1, 1.0) == pytest.approx(100.0)  # a wall shorter than the startup


def cells(e2e: tuple[float, float] = (2.0, 2.0)) -> pd.DataFrame:
    """C=1 and C=32, 32 requests per launch each (2 launches): C=1 waits for each, C=32 sends them at once."""
    return pd.DataFrame([{"variant": "v", "point_id": f"p{c}", "n_requests": 64, "launches": 2,
                          "client_e2e_mean_s": e, "concurrency": c} for c, e in zip((1, 32), e2e)])


def test_cell_seconds_is_requests_over_c_times_latency() -> None:
    assert list(cell_seconds(cells())) == pytest.approx([64.0, 2.0])


def test_measuring_share_by_measured_time_else_by_count() -> None:
    assert measuring_share(cells(), "v", {"p1"}) == pytest.approx(64 / 66)
    assert measuring_share(cells(), "v", {"p32"}) == pytest.approx(2 / 66)
    assert measuring_share(cells((2.0, math.nan)), "v", {"p32"}) == pytest.approx(0.5)  # a time missing: count
    assert measuring_share(cells()[["variant", "point_id"]], "v", {"p1"}) == pytest.approx(0.5)
    assert measuring_share(cells(), "other", {"p1"}) == 0.0

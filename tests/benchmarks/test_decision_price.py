"""benchmarks/decision_price.py: issue 50's price line, through the product's own functions (few trials)."""

from __future__ import annotations

import re

import pytest

from benchmarks import decision_price

LINE = re.compile(r"price: K2\.6 at [\d.]+ GPU-hours adopts C=1 and C=16 in [\d.]+% of runs at the public curve, "
                  r"family-wise error at the margin [\d.]+%, demo decided after calibrate in [\d.]+% of simulated "
                  r"demos, a drafter update costs (n/a|[\d.]+)% of its full matrix with the full matrix's words on "
                  r"(n/a|[\d.]+)% of decided points")


def test_public_curve_interpolates_in_log_concurrency() -> None:
    assert decision_price.public_curve(1) == 1.29 and decision_price.public_curve(16) == 1.39
    assert decision_price.public_curve(32) == pytest.approx(1.265)
    assert decision_price.public_curve(256) == 0.98


def test_last_line_is_the_issues_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert decision_price.main(["--trials", "6", "--update-trials", "2"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert (m := LINE.fullmatch(last)), last
    assert m.group(2) != "n/a" and 0 <= float(m.group(2)) <= 100, last  # S simulated (benchmarks.update_fidelity)
    b = float(last.split(" at ")[1].split(" GPU-hours")[0])
    assert b <= 48


def test_update_price_takes_the_update_commands_function() -> None:
    assert decision_price.update_price(None, None) == ("n/a", "n/a")
    assert decision_price.update_price(0.125, 0.96) == ("12.5", "96.0")
    assert decision_price.update_price(0.2, None) == ("20.0", "n/a")


def test_update_share_is_the_update_commands_price_on_the_budget_design() -> None:
    """U on K2.6 at the plan's --budget 48 design: update.operation's one launch of the baseline and EAGLE-3 at
    the highest level against their full matrix at that design; a share, and below the whole-matrix share 1."""
    from specbench.config import load_config
    from specbench.pricing.budget import plan_budget

    cfg = load_config(decision_price.CONFIG)
    plan = plan_budget(cfg, None, 48.0)
    assert not isinstance(plan, str) and plan.best is not None
    u = decision_price.update_share(cfg, plan)
    assert u is not None and 0.05 < u < 0.5, u

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
    assert decision_price.main(["--trials", "6"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert LINE.fullmatch(last), last
    b = float(last.split(" at ")[1].split(" GPU-hours")[0])
    assert b <= 48


def test_update_price_takes_the_update_commands_function() -> None:
    assert decision_price.update_price(None) == ("n/a", "n/a")
    assert decision_price.update_price(lambda: (0.125, 0.96)) == ("12.5", "96.0")

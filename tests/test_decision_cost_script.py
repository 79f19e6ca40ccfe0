"""benchmarks/decision_cost.py: its last line's exact format, on a small seeded run."""

from __future__ import annotations

import re

from benchmarks import decision_cost


def test_last_line_format(capsys) -> None:
    decision_cost.main(["--matrices", "4", "--seed", "3"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"decision cost: \d+% of the fixed design's GPU-hours, \d+% of points decided "
                        r"\(fixed: \d+%\), false adopt \d+\.\d%, coverage \d\.\d{3}", last), last

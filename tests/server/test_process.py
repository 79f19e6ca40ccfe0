"""`EngineProcess.wait_ready`'s probe pacing, on a fake clock and a fake probe (no process, no sleeps)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from specbench.server.engines.base import LaunchSpec
from specbench.server.process import EngineProcess, probe_pause
from specbench.shared.errors import EngineStartError


class FakeTime:
    """A clock that moves only when the code under test pauses: every pause is recorded."""

    def __init__(self) -> None:
        self.now = 100.0
        self.pauses: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, s: float) -> None:
        self.pauses.append(round(s, 6))
        self.now += s


def never_started(tmp_path: Path) -> EngineProcess:
    """An EngineProcess that was never started: no exit code, no tree to remember, a log that is absent."""
    return EngineProcess("x", LaunchSpec(argv=["true"]), tmp_path / "server.log", "127.0.0.1", 1)


def test_probe_pause_starts_at_a_tenth_of_a_second_and_doubles_to_one() -> None:
    assert [probe_pause(i) for i in range(7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert probe_pause(10_000) == 1.0


def test_wait_ready_probes_with_doubling_pauses_until_the_probe_succeeds(tmp_path: Path) -> None:
    t = FakeTime()
    answers = iter([False] * 6 + [True])

    async def probe() -> bool:
        return next(answers)

    waited: list[float] = []
    took = asyncio.run(never_started(tmp_path).wait_ready(probe, 60, lambda e, _: waited.append(e),
                                                          clock=t.clock, sleep=t.sleep))
    assert t.pauses == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert took == pytest.approx(3.5)  # the sum of the pauses: ready at the first probe after them
    assert waited == pytest.approx([0.0, 0.1, 0.3, 0.7, 1.5, 2.5])


def test_wait_ready_pauses_no_longer_than_the_time_left(tmp_path: Path) -> None:
    t = FakeTime()

    async def probe() -> bool:
        return False

    with pytest.raises(EngineStartError, match="not ready after 1s"):
        asyncio.run(never_started(tmp_path).wait_ready(probe, 1.0, clock=t.clock, sleep=t.sleep))
    assert t.pauses == pytest.approx([0.1, 0.2, 0.4, 0.3])  # the last pause ends at the timeout

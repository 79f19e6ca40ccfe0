"""A calibration probe against the full sweep's launch variance (stores/probe_check.py): pooled unchecked while
the setup has no full-sweep entry, F-tested once it has one (whichever came first), refused when a launch
moves the probed point unlike the sweep; a full-sweep entry is never refused because of a probe."""

from __future__ import annotations

import math
from pathlib import Path

from specbench.stores import history_checks, history_lookup, probe_check, variance_history
from specbench.stores.variance_history import Calibration

SETUP = {"hardware": "h", "engine": "vllm 0.1", "launch": "l", "model": "m", "parallelism": "tp1"}


def entry(run: str, cv: float, df: float, kind: str = "calibration", repeat_cv: float = 0.01,
          repeat_df: float = 10.0) -> Calibration:
    return Calibration(rel_var=cv ** 2, df=df, launches=int(df) + 1, cells=1 if kind == "probe" else 6,
                       hardware={"cpu": "x"}, engine="vllm 0.1", model="demo:m", created="2026-01-01", source_run=run,
                       repeat_rel_var=repeat_cv ** 2, repeat_df=repeat_df, kind=kind, setup=dict(SETUP))


def test_a_probe_without_a_full_sweep_is_pooled_unchecked() -> None:
    probe = entry("p1", 0.05, 10, probe_check.PROBE)
    got = probe_check.check(probe, [])
    assert got.ok and got.full is None and math.isnan(got.p)
    assert "probe launch CV 5.0% (df 10), not checked against a full sweep" in got.line()
    found = history_lookup.lookup([probe], SETUP)
    assert [e.source_run for e in found.candidates] == ["p1"] and found.pooled is not None
    assert found.pooled.df == 10


def test_a_probe_that_agrees_with_the_full_sweep_is_pooled_with_it() -> None:
    full, probe = entry("f1", 0.045, 2), entry("p1", 0.05, 10, probe_check.PROBE)
    got = probe_check.check(probe, probe_check.full_sweep([full, probe]))
    assert got.ok and got.entries == 1 and 0.01 <= got.p <= 1
    assert "is consistent with the full sweep's 4.5% (df 2, 1 entry; F test p = " in got.line()
    pooled = history_lookup.lookup([full, probe], SETUP).pooled
    assert pooled is not None and pooled.df == 12 and pooled.entries == 2


def test_a_probe_unlike_the_full_sweep_is_refused_whichever_came_first(tmp_path: Path) -> None:
    """Full sweep CV 35% (df 10, a loaded machine), probe CV 12.8% (df 10): F = 0.13, p ~ 0.003 < 0.01."""
    full, probe = entry("f1", 0.351, 10), entry("p1", 0.128, 10, probe_check.PROBE)
    got = probe_check.check(probe, [full])
    assert not got.ok and got.p < 0.01 and "inconsistent" in got.line() and "not pooled" in got.line()
    for order in ([probe, full], [full, probe]):
        path = tmp_path / f"{order[0].source_run}.json"
        for e in order:
            history_checks.add(e, path)
        stored = {e.source_run: e for e in variance_history.load_history(path)}
        assert stored["f1"].pooled  # the full sweep is the reference: never refused because of a probe
        found = history_lookup.lookup(list(stored.values()), SETUP)
        assert [e.source_run for e in found.candidates] == ["f1"]
        [refused] = found.not_pooled
        assert refused["source_run"] == "p1" and "CV 12.8% (df 10) is inconsistent" in refused["reason"]
        assert found.pooled is not None and found.pooled.df == 10 and math.isclose(found.pooled.rel_var, full.rel_var)


def test_a_probe_is_checked_against_full_sweeps_not_other_probes(tmp_path: Path) -> None:
    """Two probes far apart are both pooled without a full sweep (old code: the second is F-tested against the
    first and refused); the full sweep added later then decides which of them stands for it."""
    path = tmp_path / "h.json"
    history_checks.add(entry("p1", 0.03, 10, probe_check.PROBE), path)
    second = history_checks.add(entry("p2", 0.12, 10, probe_check.PROBE), path)
    assert second.pooled
    history_checks.add(entry("f1", 0.03, 10), path)
    found = history_lookup.lookup(variance_history.load_history(path), SETUP)
    assert sorted(e.source_run for e in found.candidates) == ["f1", "p1"]
    assert [n["source_run"] for n in found.not_pooled] == ["p2"]


def test_the_pooled_rates_keep_every_level_a_probe_did_not_measure() -> None:
    """A probe measures the largest concurrency only: the plan's speed at C=1 stays the full sweep's."""
    full = Calibration(**{**entry("f1", 0.04, 2).__dict__, "rates": {"1": 30.0, "8": 15.0}})
    probe = Calibration(**{**entry("p1", 0.04, 10, probe_check.PROBE).__dict__, "rates": {"8": 16.0}})
    pooled = variance_history.pooled([full, probe])
    assert pooled is not None and pooled.rates == {"1": 30.0, "8": 16.0}

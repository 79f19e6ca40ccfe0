"""benchmarks/verdict_family.py: a quick run prints its last line in the stated format, and what it simulates
is specbench's own code (issue 41 item 5)."""

from __future__ import annotations

import re

from benchmarks import verdict_family
from specbench.decide import primary, secondary
from specbench.metrics import speedup

LAST = (r"verdict family: P\(any adopt \| all at the margin\) \d+\.\d% over \d+ drafters x \d+ claims, coverage of "
        r"the mix interval \d\.\d{3}, demo decides after calibrate: (yes|no), after calibrate --probe: (yes|no)")


def test_verdict_family_quick_prints_its_line(capsys) -> None:
    verdict_family.main(["--trials", "4", "--seed", "2"])
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(LAST, out[-1]), out[-1]
    assert out[-1].startswith("verdict family: P(any adopt | all at the margin) ")
    assert " over 7 drafters x 4 claims, " in out[-1]


def test_verdict_family_calls_the_product() -> None:
    from specbench.metrics import mix as metrics_mix

    assert verdict_family.add_mix_columns is metrics_mix.add_mix_columns  # which calls decide.primary.mix_interval
    assert verdict_family.primary_outcome is primary.primary_outcome
    assert verdict_family.speedup_columns is speedup.speedup_columns
    assert verdict_family.secondary_outcomes is secondary.secondary_outcomes


def test_verdict_family_prints_the_secondary_family(capsys) -> None:
    verdict_family.main(["--trials", "4", "--seed", "2"])
    out = capsys.readouterr().out
    assert "secondary family: P(any secondary adopt | all at the margin) " in out
    assert "per drafter at its family's level (over its 24 points, as the report decides)" in out
    assert 'some row says "never pays" in ' in out


def test_verdict_family_reads_the_level_the_report_reads() -> None:
    from specbench.metrics import claims as family

    assert verdict_family.primary_level is family.primary_level
    assert verdict_family.secondary_level is family.secondary_level
    assert verdict_family.family_outcome is primary.family_outcome


def test_the_probe_path_calibrates_as_calibrate_probe_does() -> None:
    """README's path simulated: the history of `calibrate --probe` (stores.calibration's launches and repeats at
    one point: df 10), not the full-sweep calibration's 3 launches (df 2)."""
    import numpy as np

    from specbench.stores.calibration import PROBE_LAUNCHES

    rng = np.random.default_rng(0)
    probe = verdict_family._demo_table(rng, 0, (verdict_family.M, verdict_family.M), probe=True)
    full = verdict_family._demo_table(rng, 1, (verdict_family.M, verdict_family.M))
    assert probe.history is not None and probe.history["df"] == PROBE_LAUNCHES - 1
    assert full.history is not None and full.history["df"] == verdict_family.CAL_LAUNCHES - 1


def test_each_blind_spot_breaks_the_truth_it_names_and_prints_its_line(capsys) -> None:
    """`Blind`: the same draws (seed 0) with each condition the report states as untested broken: the history's
    SDs scaled, the drafters' launch CV scaled, the baseline given a session of its own."""
    import numpy as np

    def table(blind: verdict_family.Blind) -> verdict_family.Table:
        return verdict_family._demo_table(np.random.default_rng(0), 0, (1.0, 1.0), blind, probe=True)

    def speed(t: verdict_family.Table, variant: str) -> np.ndarray:
        return t.cells.loc[t.cells["variant"] == variant, "output_throughput_tok_s"].to_numpy()

    same = table(verdict_family.Blind())
    assert table(verdict_family.Blind(history_scale=0.5)).history["rel_var"] < same.history["rel_var"] / 2
    moved = speed(table(verdict_family.Blind(drafter_scale=3.0)), "ngram") / speed(same, "ngram")
    assert not np.allclose(moved, 1.0) and np.allclose(moved, moved[0])  # one launch: its effect, every cell's
    assert np.allclose(speed(table(verdict_family.Blind(drafter_scale=3.0)), "base"), speed(same, "base"))
    shifted = table(verdict_family.Blind(session_cv=0.2))
    assert not np.allclose(speed(shifted, "base") / speed(same, "base"), 1.0)
    verdict_family.main(["--trials", "4", "--seed", "2"])
    out = capsys.readouterr().out
    for name in verdict_family.BLIND_SPOTS:
        assert f"demo after `calibrate --probe` at the margin, {name} (untested, stated in the report): " in out

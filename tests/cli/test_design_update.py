"""`specbench update CONFIG --from RUN --variant NAME`: what it measures and costs (--dry-run), the words it
decides from an update run (--measured), and its one-line refusals."""

from __future__ import annotations

import pandas as pd

from specbench.cli import main
from tests.fixtures_update import RUN, update_config, update_run


def test_dry_run_says_what_it_measures_and_its_share_of_the_full_matrix(tmp_path, capsys):
    code = main(["update", str(update_config(tmp_path)), "--from", str(RUN), "--variant", "eagle3", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    assert f"update: eagle3 replaces eagle3 of {RUN}" in out and "one launch at C=16" in out
    assert "update cost of eagle3: 2 launches, " in out and "(the full matrix: 6 launches, " in out
    assert "% of the full matrix)" in out
    assert not list(tmp_path.glob("update-run*"))


def test_measured_writes_update_csv_and_prints_each_words_source(tmp_path, capsys):
    new = update_run(tmp_path)
    code = main(["update", str(update_config(tmp_path)), "--from", str(RUN), "--variant", "eagle3",
                 "--measured", str(new)])
    out = capsys.readouterr().out
    assert code == 0
    assert f"update: {new / 'update.csv'}" in out
    assert "  eagle3 C=16: slower (predicted, " in out
    assert "update: C in [1] left to measure" in out and "measuring them as" in out
    assert "update: measured wall time " in out
    assert pd.read_csv(new / "update.csv")["source"].tolist() == ["to measure", "predicted", "predicted"]
    assert "Update: a new head decided from its acceptance" in (new / "report.md").read_text()


def test_another_configuration_is_refused_in_one_line(tmp_path, capsys):
    code = main(["update", str(update_config(tmp_path, steps=5)), "--from", str(RUN), "--variant", "eagle3",
                 "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: update: no variant of prediction-heads-cpu has")

"""benchmarks/aa_engine.py without an engine: what it reads from a report (the verdict's words, the gates that
fired) on real reports in docs/examples, and the config it runs (its own port and variance history)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import aa_engine
from specbench.config import load_config

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"


def test_the_verdict_is_read_without_its_definitions() -> None:
    report = (EXAMPLES / "demo-cpu-probe" / "report.md").read_text()
    words = aa_engine.verdict_text(report)
    assert "| ngram | adopt | adopt | adopt |" in words and "baseline wins at concurrency 4, 8" in words
    assert "How to read this" not in words and "Primary family" not in words  # the folded definitions
    assert aa_engine.verdict_text("# no verdict here\n") == ""


def test_fired_gates_are_the_bold_names_of_the_gates_section() -> None:
    assert aa_engine.fired_gates((EXAMPLES / "update-heads-cpu" / "run" / "report.md").read_text()) == {
        "client_lagging"}
    assert aa_engine.fired_gates((EXAMPLES / "demo-cpu-probe" / "report.md").read_text()) == set()


def test_the_config_runs_on_its_own_port_and_history(tmp_path: Path) -> None:
    shipped = load_config(REPO / "configs" / "aa-cpu.yaml")
    cfg = aa_engine.aa_config(shipped, 1, 40123, tmp_path / "h")
    assert (cfg.engine.port, cfg.sweep.repeats, cfg.verdict.history_dir) == (40123, 1, str(tmp_path / "h"))
    assert [(v.name, v.drafter) for v in cfg.variants] == [("a1", "autoregressive"), ("a2", "autoregressive")]
    assert aa_engine.aa_config(shipped, None, 40123, tmp_path / "h").sweep.repeats == shipped.sweep.repeats

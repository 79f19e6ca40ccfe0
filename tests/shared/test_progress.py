"""Progress outside a terminal (a CI log, `make demo > log`): plain lines, never a live bar, which a file
receives truncated ("━━━ 4… 0:0…", issue 30 item 14)."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

from specbench.shared.progress import PlainBar, PlainReporter, make_reporter, progress_bar


def test_a_head_build_bar_outside_a_terminal_is_plain_lines(capsys) -> None:
    with progress_bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn()) as bar:
        assert isinstance(bar, PlainBar)  # pytest's captured stdout is not a terminal
        task = bar.add_task("eagle3: training", total=20)
        for _ in range(20):
            bar.advance(task, 1)
        bar.update(task, advance=0, description="eagle3: training loss 1.234")
    out = capsys.readouterr().out
    assert "━" not in out and "…" not in out
    lines = out.splitlines()
    assert lines[0].endswith("eagle3: training: started (0/20)")
    assert lines[-1].endswith("eagle3: training: 20/20 (100%)")
    assert len(lines) == 12  # started, then every 10%


def test_the_run_reporter_outside_a_terminal_is_plain() -> None:
    assert isinstance(make_reporter(), PlainReporter)

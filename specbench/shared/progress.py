"""Progress output: a rich live display on a terminal, plain timestamped lines otherwise (CI logs)."""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class Reporter(Protocol):
    def start(self, total_requests: int) -> None: ...
    def phase(self, variant: str, text: str) -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def log(self, message: str) -> None: ...
    def close(self) -> None: ...


class PlainReporter:
    """One line per phase change; request progress every 10% so CI logs stay short."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.total = 0
        self.done = 0
        self._last_pct = -1
        self._last_phase = ""
        self._last_phase_t = 0.0
        self.t0 = time.monotonic()

    def _print(self, msg: str) -> None:
        if self.stream is None:
            return
        try:
            print(f"[{time.monotonic() - self.t0:7.1f}s] {msg}", file=self.stream, flush=True)
        except (OSError, ValueError):  # the terminal has gone (SIGHUP): progress is not worth a failed run
            self.stream = None

    def start(self, total_requests: int) -> None:
        self.total = total_requests

    def phase(self, variant: str, text: str) -> None:
        line = f"{variant}: {text}"
        if line == self._last_phase:
            return
        # engine startup reports every second; a log needs a line every 15 s at most
        if text.startswith("startup") and self._last_phase.startswith(f"{variant}: startup") \
                and time.monotonic() - self._last_phase_t < 15:
            return
        self._last_phase, self._last_phase_t = line, time.monotonic()
        self._print(line)

    def advance(self, n: int = 1) -> None:
        self.done += n
        pct = int(100 * self.done / self.total) // 10 * 10 if self.total else 0
        if pct != self._last_pct:
            self._last_pct = pct
            self._print(f"requests {self.done}/{self.total} ({pct}%)")

    def log(self, message: str) -> None:
        self._print(message)

    def close(self) -> None:
        pass


class RichReporter:
    """Current variant and phase (startup with the engine's last log line, cell), requests done, ETA."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.progress = Progress(TextColumn("[bold]{task.fields[variant]}[/] {task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
                                 TimeRemainingColumn(), console=self.console, transient=False)
        self.task: TaskID | None = None

    def start(self, total_requests: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("", total=total_requests or None, variant="")

    def phase(self, variant: str, text: str) -> None:
        if self.task is not None:
            self.progress.update(self.task, description=text[:90], variant=variant)

    def advance(self, n: int = 1) -> None:
        if self.task is not None:
            self.progress.advance(self.task, n)

    def log(self, message: str) -> None:
        try:
            self.progress.console.print(message, markup=False, highlight=False)
        except (OSError, ValueError):  # the terminal has gone (SIGHUP)
            self.console.quiet = True

    def close(self) -> None:
        try:
            self.progress.stop()
        except (OSError, ValueError):
            self.console.quiet = True


def make_reporter(quiet: bool = False) -> Reporter:
    if quiet:
        return PlainReporter(stream=open("/dev/null", "w"))
    return RichReporter() if Console(stderr=True).is_terminal else PlainReporter()


class PlainBar:
    """rich.progress.Progress's add_task / advance / update for a log that is not a terminal: one plain
    line per task at every 10% (a live bar written to a file comes out truncated, e.g. "━━━ 4… 0:0…")."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.lines = PlainReporter(stream)
        self.tasks: dict[int, list[Any]] = {}  # id -> [description, total, done, last tenth printed]

    def __enter__(self) -> PlainBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def add_task(self, description: str, total: float | None = None, **_: object) -> int:
        self.tasks[len(self.tasks)] = [description, total or 0, 0, -1]
        self.lines.log(f"{description}: started" + (f" (0/{total:g})" if total else ""))
        return len(self.tasks) - 1

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def update(self, task: int, *, advance: float = 0, description: str | None = None, **_: object) -> None:
        t = self.tasks[task]
        if description is not None:
            t[0] = description
        t[2] += advance
        tenth = int(10 * t[2] / t[1]) if t[1] else 0
        if tenth != t[3]:
            t[3] = tenth
            self.lines.log(f"{t[0]}: {t[2]:g}/{t[1]:g} ({10 * tenth}%)")


def progress_bar(*columns: str | ProgressColumn) -> Progress | PlainBar:
    """A rich progress bar on a terminal, plain lines (PlainBar) otherwise; a context manager either way."""
    console = Console()
    return Progress(*columns, console=console, transient=False) if console.is_terminal else PlainBar(sys.stdout)

"""What the command prints to stderr, safely."""

from __future__ import annotations

import sys


def say(text: str) -> None:
    """Print to stderr; a terminal that has gone (SIGHUP) must not turn the exit code into a traceback."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        import os

        sys.stderr = open(os.devnull, "w")  # or the interpreter's own flush at exit fails (exit code 120)

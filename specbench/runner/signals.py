"""The signals that stop a run: SIGINT (Ctrl-C), SIGTERM (kill, a scheduler) and SIGHUP (a closed terminal).

Each cancels the run's main task, so the engines are stopped on the way out and run.json says
"interrupted". They are installed explicitly on the run's event loop, whatever disposition specbench
inherited: a shell starts background jobs with SIGINT ignored (`cmd &` in a script), and Python then
installs no KeyboardInterrupt handler and asyncio none of its own, so without this a Ctrl-C or `kill -INT`
would be ignored. One exception: a SIGHUP inherited as ignored is left ignored, since that is what
`nohup specbench run ...` asks for (keep running when the terminal closes).

On leaving, the handlers that were there before are put back, so a caller in the same process (a test,
a notebook) finds its own signal dispositions unchanged.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stop_on_signals(task: asyncio.Task[object]) -> Iterator[list[signal.Signals]]:
    """Within the block, a stop signal cancels `task`; yields the list of signals received (in order)."""
    loop = asyncio.get_running_loop()
    received: list[signal.Signals] = []
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}

    def on_signal(sig: signal.Signals) -> None:
        received.append(sig)
        task.cancel()

    installed = []
    for sig in STOP_SIGNALS:
        if sig == signal.SIGHUP and before[sig] == signal.SIG_IGN:
            continue  # nohup: the user asked to survive the terminal
        loop.add_signal_handler(sig, on_signal, sig)
        installed.append(sig)
    try:
        yield received
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)  # asyncio resets to SIG_DFL / default_int_handler ...
            previous = before[sig]
            if previous is not None:  # ... so put back what was there (None: set outside Python, unknown)
                signal.signal(sig, previous)


def describe(received: list[signal.Signals]) -> str:
    """'SIGTERM' for the first stop signal received ('' when none was)."""
    return received[0].name if received else ""

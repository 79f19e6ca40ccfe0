"""The exception tree. Every error the user can cause is a SpecbenchError with a one-line message.

The CLI prints `error: <message>` and exits 2 for UsageError (bad config, bad CLI call, refused
preflight) and 1 for the rest; nothing the user can cause prints a traceback.
"""

from __future__ import annotations


class SpecbenchError(Exception):
    """Base class: its message is complete, one line, and says what is wrong and where."""

    exit_code = 1


class UsageError(SpecbenchError):
    """The input (config file, CLI call, paths) is wrong; nothing was launched."""

    exit_code = 2


class ConfigError(UsageError):
    """A config field is invalid. `where` is the dotted field path, e.g. `variants[1].params.num_tokens`."""

    def __init__(self, where: str, problem: str, source: str | None = None):
        self.where = where
        self.problem = problem
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__(f"{prefix}{where}: {problem}" if where else f"{prefix}{problem}")


class PreflightError(UsageError):
    """A check before launch refused the run (busy GPU, taken port, missing model, bad flags)."""


class EngineStartError(SpecbenchError):
    """The engine process exited or timed out before it could generate."""


class ForeignListenerError(EngineStartError):
    """Another process listens on the engine's port: its answers would be measured as this engine's."""


class EngineDiedError(SpecbenchError):
    """The engine process went away in the middle of a sweep."""


class ClientWorkerError(SpecbenchError):
    """A client worker process (client.processes > 1) died or did not start: the window is not complete."""


class ScrapeError(SpecbenchError):
    """The engine's metrics endpoint did not answer, even after retries: the variant cannot be measured."""


class RunDirError(UsageError):
    """The run directory is in a state the requested operation must not touch."""


class StorageError(SpecbenchError):
    """Writing the run directory failed mid-run (a full disk, an I/O error): every engine was stopped, the
    records written before it are kept, and the message says how to resume."""


class Interrupted(SpecbenchError):
    """SIGINT/SIGTERM/SIGHUP: every engine was stopped and what was measured is kept."""

    exit_code = 130

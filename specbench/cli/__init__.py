"""The `specbench` command: parse, validate, call the library. Everything here is callable from Python."""

from __future__ import annotations

from specbench.cli.console import say
from specbench.cli.parser import build_parser
from specbench.shared.errors import ConfigError, SpecbenchError

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except SpecbenchError as exc:
        msg = str(exc)
        config = getattr(args, "config", None)
        if isinstance(exc, ConfigError) and exc.source is None and isinstance(config, str):
            msg = f"{config}: {msg}"  # a field checked after loading (a drafter's params): still name the file
        first, _, rest = msg.partition("\n")
        say(f"error: {first}")
        if rest and exc.exit_code != 2:  # engine failures carry the log tail on the following lines
            say(rest)
        return exc.exit_code
    except KeyboardInterrupt:
        say("error: interrupted")
        return 130
    except OSError as exc:  # a filesystem fault outside a run's own handling (e.g. `report` on a read-only dir)
        where = f"{exc.filename}: " if exc.filename else ""
        say(f"error: {where}{exc.strerror or exc}")
        return 1

"""A fake `vllm serve MODEL ...` (`python -m vllm.entrypoints.cli.main serve`, how specbench launches vLLM
>= 0.8): the stand-in of ../openai/api_server.py behind vLLM's command line entry point."""

from __future__ import annotations

import sys

from vllm.entrypoints.openai.api_server import main as serve  # the fake, on the same path as this module


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] != ["serve"]:
        sys.exit(f"fake vllm: only `serve` is faked, not {args[:1]}")
    model = args[1:2] if len(args) > 1 and not args[1].startswith("-") else []
    serve([*(["--model", *model] if model else []), *args[1 + len(model):]])


if __name__ == "__main__":
    main()

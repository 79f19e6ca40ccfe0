"""A fake `python -m vllm.entrypoints.openai.api_server`: reads the flags specbench passes (model, served name,
host, port, --speculative-config) and serves the stand-in in vLLM's format (/metrics with spec_decode counters).

Environment knobs (set per variant through `variants[].env`):
  STANDIN_ACCEPT_RATE   acceptance probability when a speculative config is given (default 0.6)
  STANDIN_MS_PER_TOKEN  milliseconds per target step (default 1)
  STANDIN_ARGS          extra stand-in flags, e.g. "--no-spec-metrics" or "--metrics-reset-after 3"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[5]))  # the repository root, for tests.standin

from tests.standin.server import Options, parser, run  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="vllm.entrypoints.openai.api_server")
    p.add_argument("--model", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--speculative-config")
    args, _unknown = p.parse_known_args(argv)
    spec = json.loads(args.speculative_config) if args.speculative_config else None
    flags = ["--port", str(args.port), "--host", args.host, "--format", "vllm",
             "--served-model-name", args.served_model_name or args.model,
             "--ms-per-token", os.environ.get("STANDIN_MS_PER_TOKEN", "1")]
    if spec:
        flags += ["--accept-rate", os.environ.get("STANDIN_ACCEPT_RATE", "0.6"),
                  "--drafts-per-step", str(spec.get("num_speculative_tokens") or 3)]
    opts = Options(**vars(parser().parse_args(flags + shlex.split(os.environ.get("STANDIN_ARGS", "")))))
    try:
        asyncio.run(run(opts))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

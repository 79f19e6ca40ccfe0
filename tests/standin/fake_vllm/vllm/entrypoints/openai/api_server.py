"""A fake `python -m vllm.entrypoints.openai.api_server`: parses the flags specbench passes, refuses
`--per-request-spec-decode-metrics` without `--speculative-config` as vLLM 0.32 does (a ValueError at
startup, exit code 1), then serves the stand-in in vLLM's format, speculating when a config is given.

Environment knobs (set per variant through `variants[].env`):
  STANDIN_ACCEPT_RATE   acceptance probability when speculating (default 0.7)
  STANDIN_MS_PER_TOKEN  milliseconds per target step (default 2)
  STANDIN_ARGS          more stand-in flags (shell words), e.g. "--spec-metrics-skew 1"; with --accept-table
                        a speculative config's num_speculative_tokens_per_batch_size is served as vLLM does
  STANDIN_LEDGER, STANDIN_VARY_ACCEPTANCE  defaults of --ledger and --vary-acceptance (tests/standin/server.py)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[6]))  # the repository root, for tests.standin

from tests.standin.server import Options, log, parser, run  # noqa: E402

REFUSED = ("Value error, --per-request-spec-decode-metrics requires speculative decoding to be enabled "
           "(via --speculative-config).")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="vllm.entrypoints.openai.api_server")
    p.add_argument("--model", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--max-num-seqs", type=int)
    p.add_argument("--speculative-config")
    p.add_argument("--per-request-spec-decode-metrics", choices=("none", "summary", "detailed"), default="none")
    args, unknown = p.parse_known_args(argv)
    log(f"fake vllm 0.32.0: model={args.model} speculative_config={args.speculative_config} "
        f"per_request_spec_decode_metrics={args.per_request_spec_decode_metrics}"
        + (f" (unparsed: {' '.join(unknown)})" if unknown else ""))
    spec = json.loads(args.speculative_config) if args.speculative_config else None
    if args.per_request_spec_decode_metrics != "none" and spec is None:
        print(REFUSED, file=sys.stderr, flush=True)
        sys.exit(1)
    extra = vars(parser().parse_args(["--port", "0", *shlex.split(os.environ.get("STANDIN_ARGS", ""))]))
    extra.update(port=args.port, host=args.host, format="vllm", served_name=args.served_model_name or args.model,
                 ms_per_token=float(os.environ.get("STANDIN_MS_PER_TOKEN", "2")),
                 accept_rate=float(os.environ.get("STANDIN_ACCEPT_RATE", "0.7")) if spec else None,
                 drafts_per_step=int(spec.get("num_speculative_tokens", 3)) if spec else 3,
                 per_request_spec_decode_metrics=args.per_request_spec_decode_metrics)
    if spec is None:
        extra["accept_table"] = None  # plain decoding: no drafts, whatever STANDIN_ARGS says
    elif spec.get("num_speculative_tokens_per_batch_size"):
        extra["per_batch_size"] = json.dumps(spec["num_speculative_tokens_per_batch_size"])
    try:
        asyncio.run(run(Options(**extra)))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

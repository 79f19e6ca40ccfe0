"""A fake `python -m vllm.entrypoints.openai.api_server`: parses the flags specbench passes to vLLM, then
serves the stand-in in vLLM's format (spec_decode counters on /metrics). A `--speculative-config` turns
speculation on with `num_speculative_tokens` drafts per step. Used with PYTHONPATH=tests/standin/fake_vllm
so that specbench's real vLLM engine code (launch argv, readiness, /metrics counters) runs end to end.

Environment knobs (set in `engine.env` or `variants[].env`):
  STANDIN_ACCEPT_RATE     P(a draft token is accepted) when speculating (default 0.7)
  STANDIN_MS_PER_TOKEN    milliseconds per target step (default 2)
  STANDIN_VARY_ACCEPTANCE non-empty: repeats of one prompt accept differently
  STANDIN_LEDGER          folder for the ground-truth ledger (see tests/standin/server.py)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[6]))  # the repository root, for tests.standin

from tests.standin.server import Options, log, run  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="vllm.entrypoints.openai.api_server")
    p.add_argument("--model", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-num-seqs", type=int)
    p.add_argument("--speculative-config", type=json.loads)
    args, unknown = p.parse_known_args(argv)
    spec = args.speculative_config or {}
    log(f"fake vllm: model={args.model} max_num_seqs={args.max_num_seqs} speculative_config={spec or None}"
        + (f" (unparsed: {' '.join(unknown)})" if unknown else ""))
    opts = Options(port=args.port, host=args.host, format="vllm", served_name=args.served_model_name or args.model,
                   ms_per_token=float(os.environ.get("STANDIN_MS_PER_TOKEN", "2")),
                   accept_rate=float(os.environ.get("STANDIN_ACCEPT_RATE", "0.7")) if spec else None,
                   drafts_per_step=int(spec.get("num_speculative_tokens", 3)),
                   ledger=os.environ.get("STANDIN_LEDGER"),
                   vary_acceptance=bool(os.environ.get("STANDIN_VARY_ACCEPTANCE")))
    try:
        asyncio.run(run(opts))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

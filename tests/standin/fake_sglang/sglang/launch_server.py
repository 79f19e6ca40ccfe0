"""A fake `python -m sglang.launch_server`: parses the real flags specbench passes, behaves like SGLang where
tests look (argparse rejects `--cuda-graph-max-bs` as ambiguous on the >=0.5.21 line; topk or draft tokens
without steps is a bare AssertionError), then serves the stand-in in SGLang's format.

Environment knobs (set per variant through `variants[].env`):
  STANDIN_SGLANG_VERSION  0.5.23 (default) or 0.5.9: flag line and wire-format names
  STANDIN_FAIL=version    die at startup with a library-version error (compressed-tensors too old, exit 1)
  STANDIN_STARTUP_DELAY   seconds before /health_generate turns 200 (default 0.2)
  STANDIN_ACCEPT_RATE     acceptance probability when a speculative algorithm is set (default 0.7)
  STANDIN_MS_PER_TOKEN    milliseconds per target step (default 2)
  STANDIN_VARY_ACCEPTANCE non-empty: repeats of one prompt accept differently
  STANDIN_LEDGER          folder for the ground-truth ledger (see tests/standin/server.py)

With `--nnodes N` (N > 1) the ranks meet at `--dist-init-addr` first (see `rendezvous`): rank 0 serves
once every rank has joined, the others wait, and every rank exits when another goes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository root, for tests.standin

from tests.standin.server import Options, log, run  # noqa: E402

VERSION_ERROR = [
    "Traceback (most recent call last):",
    '  File "sglang/srt/layers/quantization/compressed_tensors/compressed_tensors.py", line 58, in <module>',
    "AttributeError: type object 'CompressionFormat' has no attribute 'nvfp4_pack_quantized'",
    "ImportError: compressed-tensors 0.8.1 is installed but this model needs compressed-tensors>=0.15",
]


def build_parser(old: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sglang.launch_server")
    p.add_argument("--model-path", "--model", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tp-size", "--tp", type=int, default=1)
    p.add_argument("--speculative-algorithm")
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model")
    p.add_argument("--speculative-num-steps", type=int)
    p.add_argument("--speculative-eagle-topk", type=int)
    p.add_argument("--speculative-num-draft-tokens", type=int)
    p.add_argument("--speculative-dflash-block-size", type=int)
    p.add_argument("--max-running-requests", type=int)
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--attention-backend")
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--dist-init-addr")
    if old:
        p.add_argument("--cuda-graph-max-bs", type=int)
    else:  # two flags sharing the old name as a prefix: argparse calls `--cuda-graph-max-bs` ambiguous
        p.add_argument("--cuda-graph-max-bs-decode", type=int)
        p.add_argument("--cuda-graph-max-bs-prefill", type=int)
    return p


def rendezvous(nnodes: int, rank: int, addr: str) -> None:
    """Multi-node SGLang in miniature: rank 0 listens on --dist-init-addr until every other rank has joined,
    then serves; the other ranks join and stay until rank 0 goes. Any rank that loses a peer exits, as a
    collective that fails takes every rank down."""
    import socket
    import threading

    host, _, port = addr.rpartition(":")
    if rank == 0:
        server = socket.create_server((host, int(port)))
        server.settimeout(60)
        peers = [server.accept()[0] for _ in range(nnodes - 1)]
        log(f"fake sglang rank 0: {nnodes - 1} rank(s) joined at {addr}")
        for peer in peers:
            threading.Thread(target=_exit_when_closed, args=(peer, "a rank left"), daemon=True).start()
        return
    deadline = time.monotonic() + 60
    while True:
        try:
            conn = socket.create_connection((host, int(port)), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                log(f"fake sglang rank {rank}: nobody at {addr}")
                sys.exit(1)
            time.sleep(0.2)
    log(f"fake sglang rank {rank}: joined {addr}")
    _exit_when_closed(conn, "rank 0 left")


def _exit_when_closed(conn, why: str) -> None:  # type: ignore[no-untyped-def]
    conn.settimeout(None)
    while conn.recv(1):
        pass
    log(f"fake sglang: {why}: exiting")
    os._exit(1)


def main(argv: list[str] | None = None) -> None:
    version = os.environ.get("STANDIN_SGLANG_VERSION", "0.5.23")
    old = version.startswith("0.5.9")
    args, unknown = build_parser(old).parse_known_args(argv)
    log(f"fake sglang {version}: server_args model_path={args.model_path} tp={args.tp_size} "
        f"speculative_algorithm={args.speculative_algorithm} max_running_requests={args.max_running_requests}"
        + (f" (unparsed: {' '.join(unknown)})" if unknown else ""))
    if os.environ.get("STANDIN_FAIL") == "version":
        time.sleep(0.1)
        for line in VERSION_ERROR:
            print(line, file=sys.stderr, flush=True)
        sys.exit(1)
    algo = args.speculative_algorithm
    if algo in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE") and args.speculative_num_steps is None:
        assert args.speculative_eagle_topk is None and args.speculative_num_draft_tokens is None
    drafts = 3
    if args.speculative_num_draft_tokens:
        drafts = max(1, args.speculative_num_draft_tokens - 1)
    elif args.speculative_num_steps:
        drafts = args.speculative_num_steps
    opts = Options(port=args.port, host=args.host, format="sglang-0.5.9" if old else "sglang",
                   served_name=args.served_model_name or args.model_path,
                   startup_delay=float(os.environ.get("STANDIN_STARTUP_DELAY", "0.2")),
                   ms_per_token=float(os.environ.get("STANDIN_MS_PER_TOKEN", "2")),
                   accept_rate=float(os.environ.get("STANDIN_ACCEPT_RATE", "0.7")) if algo else None,
                   drafts_per_step=drafts, enable_metrics=args.enable_metrics,
                   ledger=os.environ.get("STANDIN_LEDGER"),
                   vary_acceptance=bool(os.environ.get("STANDIN_VARY_ACCEPTANCE")))
    if args.nnodes > 1:
        rendezvous(args.nnodes, args.node_rank, args.dist_init_addr or "")  # returns on rank 0 only
    import asyncio

    try:
        asyncio.run(run(opts))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

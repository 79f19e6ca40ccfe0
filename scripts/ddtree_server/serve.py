"""`python scripts/ddtree_server/serve.py --target DIR [--draft DIR] --tree-budget N --port P`: a reference
DDTree server (OpenAI-compatible, greedy only, one request at a time). Not a production server: README.md."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the dd_* modules next to this file

DTYPES = ("float32", "bfloat16", "float16")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Reference DDTree server (greedy, one request at a time)")
    ap.add_argument("--target", required=True, help="Hugging Face causal LM folder")
    ap.add_argument("--draft", default="", help="speculators DFlash head folder (empty: plain greedy decoding)")
    ap.add_argument("--tree-budget", type=int, default=64, help="draft tree nodes per verify step (0: none)")
    ap.add_argument("--served-model-name", default=None)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    ap.add_argument("--dtype", choices=DTYPES, default="float32")
    ap.add_argument("--max-model-len", type=int, default=2048)
    ap.add_argument("--aux-offset", type=int, default=0,
                    help="hidden_states index = layer id + this (0: speculators/vLLM; 1: layer outputs)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    a = ap.parse_args(argv)
    if a.tree_budget < 0:
        ap.error("--tree-budget must be >= 0")
    if a.tree_budget > 0 and not a.draft:
        ap.error("--tree-budget > 0 needs --draft (a DFlash head folder)")
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    import torch
    import uvicorn
    from dd_app import ServerState, create_app
    from dd_draft import load_head
    from dd_generate import Generator
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if a.threads:
        torch.set_num_threads(a.threads)
    for what, p in (("--target", a.target), ("--draft", a.draft)):
        if p and not Path(p).is_dir():
            print(f"ddtree_server: {what} {p}: no such folder", file=sys.stderr)
            return 2
    tokenizer = AutoTokenizer.from_pretrained(a.target)
    target = AutoModelForCausalLM.from_pretrained(a.target, dtype=getattr(torch, a.dtype),
                                                  attn_implementation="sdpa").to(a.device).eval()
    head = load_head(a.draft, target, a.aux_offset) if a.draft and a.tree_budget > 0 else None
    eos = target.generation_config.eos_token_id if target.generation_config is not None else None
    eos_ids = frozenset([eos] if isinstance(eos, int) else (eos or []))
    if tokenizer.eos_token_id is not None:
        eos_ids |= {tokenizer.eos_token_id}
    st = ServerState(Generator(target, head, a.tree_budget), tokenizer, a.served_model_name or a.target,
                     frozenset(eos_ids), a.max_model_len)
    print(f"ddtree_server: pid {os.getpid()}, target {a.target} ({a.dtype}, {a.device}), draft "
          f"{a.draft or 'none'}, tree budget {st.generator.tree_budget}", flush=True)
    uvicorn.run(create_app(st), host=a.host, port=a.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

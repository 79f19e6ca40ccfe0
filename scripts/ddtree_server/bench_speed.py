"""`python bench_speed.py --target DIR --draft DIR --prompts FILE.jsonl [--budgets 0 16 64] [--tokens 64]`:
DDTree's speed against the same server's plain decoding, in process, interleaved.

For every prompt (JSONL lines with "prompt", chat template applied) each budget generates in turn (0, 16,
64, then the next prompt), so a change in machine load hits every budget alike. Reported per budget: wall
tok/s, CPU tok/s (tokens per second of this process's CPU time, with one torch thread: what the machine's
other load cannot inflate), acceptance length (tokens per target forward, prefill included) and the speedups
against budget 0 (geometric mean over prompts). Every output is checked against budget 0's (greedy: equal).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--budgets", type=int, nargs="+", default=[0, 16, 64])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--limit", type=int, default=4)
    a = ap.parse_args()
    import torch
    from dd_draft import load_head
    from dd_generate import Generator, GenRequest
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(a.target)
    target = AutoModelForCausalLM.from_pretrained(a.target, dtype=torch.float32, attn_implementation="sdpa").eval()
    head = load_head(a.draft, target)
    gens = {b: Generator(target, head, b) for b in a.budgets}
    prompts = [json.loads(line)["prompt"] for line in Path(a.prompts).read_text().splitlines() if line.strip()]
    rows: dict[int, list[tuple[float, float, int, int]]] = {b: [] for b in a.budgets}
    mismatches = 0
    for text in prompts[: a.limit]:
        ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        outs = {}
        for b in a.budgets:
            w0, c0 = time.perf_counter(), time.process_time()
            steps = list(gens[b].run(GenRequest(ids, a.tokens)))
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            outs[b] = [t for s in steps for t in s.tokens]
            rows[b].append((wall, cpu, len(outs[b]), len(steps)))
        mismatches += sum(outs[b] != outs[a.budgets[0]] for b in a.budgets)
    base = rows[a.budgets[0]]

    def gmean(xs: list[float]) -> float:
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    print(f"{len(base)} prompts x {a.tokens} tokens, float32, 1 torch thread; outputs differing from budget "
          f"{a.budgets[0]}: {mismatches}")
    print("budget | wall tok/s | CPU tok/s | acceptance length | wall speedup | CPU speedup")
    for b in a.budgets:
        r = rows[b]
        n = sum(x[2] for x in r)
        print(f"{b} | {n / sum(x[0] for x in r):.2f} | {n / sum(x[1] for x in r):.2f} | "
              f"{n / sum(x[3] for x in r):.2f} | {gmean([q[0] / x[0] for x, q in zip(r, base)]):.2f}x | "
              f"{gmean([q[1] / x[1] for x, q in zip(r, base)]):.2f}x")
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

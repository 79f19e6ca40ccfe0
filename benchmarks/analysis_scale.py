"""Analysis at campaign scale: `specbench report` on a synthetic run of N requests of 2,048 output tokens.

    python -m benchmarks.analysis_scale --requests N [--output-len 2048] [--dir DIR] [--keep]

The run is written in the real formats through specbench's own writers (benchmarks/synthetic_run.py: the
runner's RecordSink appends and fsyncs requests.jsonl and windows.jsonl and writes each completed window's
columnar file). Then `specbench report` runs in a child process, timed by the wall clock, and its peak RSS is
read from the kernel (getrusage of the waited-for child). The last line reads exactly

    analysis: <N> requests in <S> s, peak RSS <M> MB

Goal on a 2-core machine: N = 100,000 in <= 60 s and <= 2,000 MB (docs/architecture.md has the table).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .synthetic_run import Synthetic, write

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.analysis_scale")
    p.add_argument("--requests", type=int, required=True, help="requests in the synthetic run")
    p.add_argument("--output-len", type=int, default=2048, help="output tokens per request")
    p.add_argument("--dir", help="where to write the run (default: a temporary folder, removed afterwards)")
    p.add_argument("--keep", action="store_true", help="keep the run directory")
    a = p.parse_args(argv)
    root = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="specbench-scale-"))
    run = root / f"synthetic-{a.requests}"
    if run.exists():
        shutil.rmtree(run)
    t0 = time.monotonic()
    write(run, Synthetic(n=a.requests, output_len=a.output_len))
    size = (run / "requests.jsonl").stat().st_size / 1e6
    print(f"wrote {run} in {time.monotonic() - t0:.0f} s (requests.jsonl {size:.0f} MB)", file=sys.stderr)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    t1 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "specbench.cli", "report", str(run)], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.monotonic() - t1
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return 1
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # kB on Linux
    if not (a.keep or a.dir):
        shutil.rmtree(root)
    print(f"analysis: {a.requests} requests in {elapsed:.1f} s, peak RSS {peak_mb:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

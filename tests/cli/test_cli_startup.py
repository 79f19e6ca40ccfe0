"""The CLI starts cheap: `specbench --help` imports no data-science stack, and the end-of-run summary reads
the derived cells, not every raw request record."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pandas as pd
from rich.console import Console

from specbench.report.terminal import print_summary
from tests.conftest import REPO

HEAVY = ("pandas", "numpy", "scipy", "matplotlib", "httpx", "pydantic")


def test_help_imports_nothing_heavy():
    code = ("import sys\nfrom specbench.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print('imported:', ','.join(m for m in {HEAVY!r} if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "usage: specbench" in p.stdout
    assert p.stdout.strip().splitlines()[-1] == "imported:", p.stdout.strip().splitlines()[-1]


def test_summary_reads_cells_not_request_records(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "x", "variants": {
        "base": {"status": "done"}, "ngram": {"status": "failed", "reason": "engine exited with code 1"}}}))
    pd.DataFrame([
        {"variant": "base", "point_id": "code|in-|out8|c1|t0", "concurrency": 1, "speedup": 1.0,
         "acceptance_length": float("nan"), "output_throughput_tok_s": 100.0, "warnings": ""},
        {"variant": "ngram", "point_id": "code|in-|out8|c1|t0", "concurrency": 1, "speedup": 1.25,
         "acceptance_length": 2.0, "output_throughput_tok_s": 125.0, "warnings": "few_repeats"},
    ]).to_csv(tmp_path / "cells.csv", index=False)
    # a raw file that cannot be parsed (a bad line in the middle): reading it would raise
    (tmp_path / "requests.jsonl").write_text('{"not": "a record"}\n' * 3)
    out = io.StringIO()
    print_summary(tmp_path, Console(file=out, width=200))
    text = out.getvalue()
    assert "ngram: failed engine exited with code 1" in text
    assert "1.25" in text and "125.0" in text

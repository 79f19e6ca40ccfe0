"""A run measured on several nodes at once: each variant's records in files of its own, merged by the head.

Nodes share the run directory (a shared file system), but appends from several hosts to one file are not
safe there, so a worker appends only to its variant's part files,

    variants/<name>/requests.<run_id>.jsonl, variants/<name>/windows.<run_id>.jsonl

and records which node(s) served each launch in variants/<name>/nodes.json. The head merges the part files
into the run's requests.jsonl and windows.jsonl when a variant's step ends (and before a resume), so
everything downstream (analysis, report, --reuse, compare) reads one run directory of the usual form.
The merge appends only what the run files lack (by request and window identity): run twice, after a crash
mid-merge, it adds nothing twice. Part files are kept: they are raw measurements too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specbench.records.rundir import JsonlAppender, RunDir, read_jsonl, write_json
from specbench.runner.session import RecordSink
from specbench.shared.schema import RequestRecord, WindowRecord


def part_files(rd: RunDir, variant: str, run_id: str) -> tuple[Path, Path]:
    vdir = rd.variant_dir(variant)
    return vdir / f"requests.{run_id}.jsonl", vdir / f"windows.{run_id}.jsonl"


def open_part_sink(rd: RunDir, variant: str, run_id: str) -> RecordSink:
    requests, windows = part_files(rd, variant, run_id)
    requests.parent.mkdir(parents=True, exist_ok=True)
    return RecordSink(JsonlAppender(requests), JsonlAppender(windows), run_id)


def _request_key(r: RequestRecord) -> tuple[Any, ...]:
    return r.variant, r.window_id, r.index, r.warmup, r.t_send


def _window_key(w: WindowRecord) -> tuple[Any, ...]:
    return w.window_id, w.t_start


def merge_parts(rd: RunDir, variant: str, run_id: str, sink: RecordSink) -> int:
    """Append the variant's part records that the run files lack, through the head's sink; returns how many
    records were added. Requests go first: a window counts once its WindowRecord is in windows.jsonl."""
    req_path, win_path = part_files(rd, variant, run_id)
    have_req = {_request_key(r) for r in rd.request_records(superseded=True)}
    have_win = {_window_key(w) for w in rd.window_records()}
    added = 0
    for r in read_jsonl(req_path, RequestRecord):
        if _request_key(r) not in have_req:
            sink.request(r)
            added += 1
    for w in read_jsonl(win_path, WindowRecord):
        if _window_key(w) not in have_win:
            sink.window(w)
            added += 1
    return added


# -- which node served what ------------------------------------------------------------------------------
def _placements_file(rd: RunDir, variant: str) -> Path:
    return rd.variant_dir(variant) / "nodes.json"


def record_placement(rd: RunDir, variant: str, launch: int, fingerprints: dict[str, dict[str, Any]]) -> None:
    """Note that `launch` of `variant` ran on these nodes (rank 0 first), with their fingerprints."""
    path = _placements_file(rd, variant)
    entries = json.loads(path.read_text()) if path.exists() else []
    entries.append({"launch": launch, "nodes": list(fingerprints), "fingerprints": fingerprints})
    write_json(path, entries)


def placements(rd: RunDir, variants: list[str]) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """(nodes, variant_nodes) for environment.json: every node that served a launch of a variant, with its
    fingerprint, and each variant's nodes (the first launch's rank 0 first)."""
    nodes: dict[str, dict[str, Any]] = {}
    served: dict[str, list[str]] = {}
    for v in variants:
        path = _placements_file(rd, v)
        for entry in json.loads(path.read_text()) if path.exists() else []:
            for name in entry["nodes"]:
                nodes[name] = entry["fingerprints"][name]
                if name not in served.setdefault(v, []):
                    served[v].append(name)
    return nodes, served

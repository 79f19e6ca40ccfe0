"""The decision report: `report.md` and a self-contained `report.html` for one run directory.

    render(run_dir) -> [report.md, report.html]

The report is built once as a `Document` (a list of plain blocks: headings, paragraphs, lists, tables,
images; see `document.py`-style types below) and handed to one renderer per format (`markdown.py`,
`html.py`). Renderers own all escaping: the blocks hold raw text, whatever its origin (variant names,
warnings, config values, log lines). The verdict logic is in `verdict.py`; the sections in `sections.py`.

Only derived files are read (cells.csv, break_even.csv, run.json, environment.json, fairness.json,
config.yaml), so re-rendering an old run is cheap and never parses requests.jsonl.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..rundir import RunDir, atomic_write
from .document import Document
from .load import RunData, load_report_data

Renderer = Callable[[Document], str]


def renderers() -> dict[str, Renderer]:
    """File name -> renderer. One small module per format."""
    from . import html, markdown

    return {"report.md": markdown.render, "report.html": html.render}


def build(data: RunData, *, plots: bool = True) -> Document:
    """The report as a format-neutral document (verdict first, then plots, tables, audits)."""
    from .sections import build_document

    return build_document(data, plots=plots)


def render(run_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """Write report.md and report.html into `run_dir` atomically; return their paths."""
    data = load_report_data(run_dir)
    doc = build(data, plots=plots)
    out: list[Path] = []
    for name, fn in renderers().items():
        path = RunDir(data.path).path / name
        atomic_write(path, fn(doc))
        out.append(path)
    return out


__all__ = ["Document", "RunData", "build", "load_report_data", "render", "renderers"]

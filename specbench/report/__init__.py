"""The decision report: `report.md` and a self-contained `report.html` for one run directory.

    render(run_dir) -> [report.md, report.html]

The report is built once as a `Document` (document.py), a list of plain blocks, and handed to one renderer
per format (markdown.py, html.py), which own all escaping. The pieces:

    load.py      the run's derived files, typed (RunData, load_report_data, normalize_cells)
    fmt.py       numbers as text (fmt, fmt_interval, fmt_len, ...)
    opening.py   the first lines: one sentence per drafter (where to switch it on, how sure, the price to decide)
    verdict.py   adopt / never / inconclusive per drafter and category (drafter_verdict, curve_outcome)
    summary.py   sections on what the run concluded: context, verdict, gates, plots, intervals, variance
    tables.py    the measurement tables: speedup, break-even, acceptance, cells, losslessness
    why.py       why a drafter pays or not: acceptance, step cost and residual (decomposition.csv)
    audits.py    sections on what it ran on: fairness, hardware, warnings, status, environment
    plots.py     the figures as PNG bytes
    surface.py   the forced-acceptance note and the speedups predicted from a surface (prediction.csv)
    update_section.py  `specbench update`'s words per level, predicted or measured (update.csv)
    slo.py       the open-loop report: verdict per SLO, capacity and per-rate tables (plots: slo_plots.py)
"""

from __future__ import annotations

from pathlib import Path

from specbench.records.rundir import atomic_write
from specbench.report.audits import (
    environment_section,
    fairness_section,
    hardware_section,
    status_section,
    warnings_section,
)
from specbench.report.concurrency import concurrency_note, concurrency_table
from specbench.report.derived import RunData, load_report_data, normalize_break_even, normalize_cells
from specbench.report.document import (
    Block,
    Bullets,
    Code,
    Document,
    Heading,
    Image,
    Inline,
    Paragraph,
    Renderer,
    Strong,
    Table,
    Tone,
)
from specbench.report.fmt import UNDEFINED, fmt, fmt_interval, fmt_len, num
from specbench.report.openloop_section import is_open_loop, open_loop_sections
from specbench.report.summary import (
    context,
    drift_section,
    gates_section,
    intervals_section,
    opening,
    plot_section,
    variance_section,
    verdict_section,
)
from specbench.report.surface_section import break_even_al_section, forced_section, prediction_section
from specbench.report.tables import (
    acceptance_distribution,
    acceptance_table,
    break_even_table,
    cell_table,
    lossless_section,
    speedup_tables,
)
from specbench.report.update_section import update_section
from specbench.report.verdict import Outcome, category_outcomes, combine, curve_outcome, drafter_verdict, level_call
from specbench.report.why import why_section


def build_document(data: RunData, *, plots: bool = True) -> Document:
    """One sentence per drafter, the verdict, then plots, tables, audits, status and environment."""
    name = str(data.meta.get("name") or data.path.name)
    run_id = data.meta.get("run_id")
    title = f"specbench report: {name}" + (f" ({run_id})" if run_id else "")
    if is_open_loop(data):  # capacity under SLOs instead of speedup vs concurrency
        blocks: list[Block] = open_loop_sections(data, plots=plots)
        for section in (cell_table, fairness_section, hardware_section, warnings_section, status_section,
                        environment_section):
            blocks += section(data)
        return Document(title=title, blocks=blocks)
    blocks = opening(data) + [context(data)]
    blocks += forced_section(data) + verdict_section(data) + concurrency_note(data) + gates_section(data)
    if plots:
        blocks += plot_section(data)
    blocks += speedup_tables(data) + concurrency_table(data) + why_section(data, plots=plots)
    for section in (update_section, break_even_al_section, prediction_section, intervals_section, variance_section,
                    drift_section, break_even_table, acceptance_table,
                    acceptance_distribution, cell_table, fairness_section, hardware_section, lossless_section,
                    warnings_section, status_section, environment_section):
        blocks += section(data)
    return Document(title=title, blocks=blocks)


def renderers() -> dict[str, Renderer]:
    """File name -> renderer: one small module per format."""
    from specbench.report import html, markdown

    return {"report.md": markdown.render, "report.html": html.render}


def render(run_dir: str | Path, *, plots: bool = True) -> list[Path]:
    """Write report.md and report.html into `run_dir` (atomically); return their paths."""
    data = load_report_data(run_dir)
    doc = build_document(data, plots=plots)
    out = []
    for name, fn in renderers().items():
        path = data.path / name
        atomic_write(path, fn(doc))
        out.append(path)
    return out


__all__ = ["UNDEFINED", "Block", "Bullets", "Code", "Document", "Heading", "Image", "Inline", "Outcome", "Paragraph",
           "Renderer", "RunData", "Strong", "Table", "Tone", "build_document", "category_outcomes", "combine",
           "curve_outcome", "drafter_verdict", "fmt", "fmt_interval", "fmt_len", "level_call", "load_report_data",
           "normalize_break_even", "normalize_cells", "num", "render", "renderers"]

"""What concurrency each level ran (docs/metrics.md, "Effective concurrency"): the verdict's note on the levels
that did not reach their C, and the table of effective concurrency per variant and level. RunData -> blocks."""

from __future__ import annotations

import pandas as pd

from specbench.metrics.warnings import EFFECTIVE_CONCURRENCY_SHARE
from specbench.report.derived import RunData
from specbench.report.document import Block, Bullets, Heading, Inline, Paragraph, Strong, Table
from specbench.report.fmt import fmt, fmt_len


def _closed(data: RunData) -> pd.DataFrame:
    """The closed-loop cells that have an effective concurrency (none in runs analysed before issue 49)."""
    c = data.cells
    return c[c["rate"].isna() & c["effective_concurrency"].notna()] if len(c) else c


def below_levels(data: RunData) -> list[list[Inline]]:
    """Per variant, the levels where some cell ran under 0.95 C (client in flight, or the server's running count
    while requests waited: the cells carrying `below_concurrency`)."""
    c = _closed(data)
    if not len(c):
        return []
    low = c[c["warnings"].str.contains("below_concurrency", regex=False)]
    out: list[list[Inline]] = []
    for variant, g in low.groupby("variant", sort=True):
        levels = ", ".join(f"C={fmt_len(k)} ({fmt(v['effective_concurrency'].min(), 1)} in flight"
                           + (f", server {fmt(v['server_running_mean'].min(), 1)})" if v["server_running_mean"].notna()
                              .any() else ")") for k, v in g.groupby("concurrency"))
        out.append([Strong(str(variant)), f" did not reach its C at {levels}"])
    return out


def concurrency_note(data: RunData) -> list[Block]:
    """The verdict's words on levels below their C (none when every level reached it)."""
    items = below_levels(data)
    if not items:
        return []
    return [Bullets(items, "warn"),
            Paragraph([f"At those levels a cell ran under {EFFECTIVE_CONCURRENCY_SHARE:g} C requests at once over its "
                       "measured interval: its speedup is a lower concurrency's; the cause and remedy are in the "
                       "cells' below_concurrency warnings."], "warn")]


def concurrency_table(data: RunData) -> list[Block]:
    """Effective concurrency per variant and level: the client's (mean and lowest cell), the server's running
    mean, and the requests inside the measured intervals of all measured."""
    c = _closed(data)
    if not len(c):
        return []
    rows = []
    for (variant, level), g in c.groupby(["variant", "concurrency"], sort=True):
        server = g["server_running_mean"].dropna()
        rows.append([str(variant), fmt_len(level), fmt(g["effective_concurrency"].mean(), 2),
                     fmt(g["effective_concurrency"].min(), 2), fmt(server.mean(), 2) if len(server) else "",
                     f"{int(g['steady_requests'].sum())}/{int(g['n_requests'].sum())}"])
    return [Heading("Effective concurrency"),
            Paragraph(["Requests in flight over each window's measured interval (first completion to last send; "
                       "docs/metrics.md, \"Effective concurrency\"), averaged over a level's cells (and the lowest "
                       "cell), next to the server's own running count; steady/all: the requests whose latency "
                       "counts, of all measured (the rest ramped up or drained, kept in the records)."], "note"),
            Table(["variant", "c", "in flight", "lowest cell", "server running", "steady/all"], rows,
                  numeric=frozenset({1, 2, 3, 4}))]

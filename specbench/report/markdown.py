"""Document -> Markdown that reads well in a terminal and renders as a pull-request comment.

Text from the run (variant names, warnings, config values) is escaped so it can neither start markup nor
inject HTML: backslash-escapes for `\\ ` * < >` and, inside tables, `|`. Plots live in report.html;
here each one is a one-line pointer.
"""

from __future__ import annotations

import re

from specbench.report.document import (
    Block,
    Bullets,
    Code,
    Details,
    Document,
    Heading,
    Image,
    Inline,
    Paragraph,
    Strong,
    Table,
)

_SPECIAL = re.compile(r"([\\`*<>])")
_TONE_MARK = {"bad": "⚠ ", "warn": "⚠ ", "good": "✓ ", "note": "", "verdict": "", "": ""}


def escape(text: str, *, in_table: bool = False) -> str:
    out = _SPECIAL.sub(r"\\\1", text.replace("\r", " ").replace("\n", " "))
    return out.replace("|", "\\|") if in_table else out


def code_span(text: str, *, in_table: bool = False) -> str:
    """A code span whose fence is longer than any run of backticks inside it."""
    text = text.replace("\n", " ")
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    span = f"{fence}{pad}{text}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span


def inline(parts: list[Inline], *, in_table: bool = False) -> str:
    out = []
    for p in parts:
        if isinstance(p, Strong):
            out.append(f"**{escape(p.text, in_table=in_table)}**")
        elif isinstance(p, Code):
            out.append(code_span(p.text, in_table=in_table))
        else:
            out.append(escape(p, in_table=in_table))
    return "".join(out)


def table(t: Table) -> str:
    def row(cells: list[str]) -> str:
        return "| " + " | ".join(escape(c, in_table=True) or " " for c in cells) + " |"

    align = ["---:" if i in t.numeric else "---" for i in range(len(t.columns))]
    lines = [row(t.columns), "| " + " | ".join(align) + " |"] + [row(r) for r in t.rows]
    body = "\n".join(lines)
    if t.collapsed:
        return f"<details><summary>{escape(t.caption or 'Table')}</summary>\n\n{body}\n\n</details>"
    return f"*{escape(t.caption)}*\n\n{body}" if t.caption else body


def block(b: Block) -> str:
    if isinstance(b, Heading):
        return f"{'#' * max(1, min(b.level, 6))} {escape(b.text)}"
    if isinstance(b, Paragraph):
        text = inline(b.parts)
        return f"*{text}*" if b.tone == "note" else _TONE_MARK[b.tone] + text
    if isinstance(b, Bullets):
        return "\n".join(f"- {_TONE_MARK[b.tone] if b.tone in ('bad', 'warn') else ''}{inline(i)}" for i in b.items)
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Image):
        return f"- plot: {escape(b.title)} (see report.html)"
    if isinstance(b, Details):
        inner = "\n\n".join(block(x) for x in b.blocks)
        return f"<details><summary>{escape(b.summary)}</summary>\n\n{inner}\n\n</details>"
    raise TypeError(f"unknown block {type(b).__name__}")


def render(doc: Document) -> str:
    parts = [f"# {escape(doc.title)}"]
    for b in doc.blocks:
        text = block(b)
        if isinstance(b, Image) and parts[-1].startswith("- plot: "):
            parts[-1] += "\n" + text  # consecutive plots: one list
        else:
            parts.append(text)
    return "\n\n".join(parts) + "\n"

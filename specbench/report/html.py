"""Document -> one self-contained HTML page: inline CSS, plots as base64 PNG, no scripts, no external assets.

Every piece of text goes through `html.escape` (quotes included), so a prompt, warning or variant name
holding `<script>` shows as text.
"""

from __future__ import annotations

import base64
from html import escape

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

CSS = """
body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;margin:2em auto;
 padding:0 1em;color:#1d2127}
h1{font-size:1.6em;border-bottom:2px solid #ccd;padding-bottom:.3em}h2{margin-top:2em;border-bottom:1px solid #dde}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:13px}
th,td{border:1px solid #d5d8de;padding:3px 8px;vertical-align:top}th{background:#f2f4f7;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}tr:nth-child(even) td{background:#fafbfc}
caption{text-align:left;font-style:italic;padding:2px 0}code{background:#f2f4f7;padding:0 3px;border-radius:3px}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #e3e5e8}figcaption{font-weight:600}
.verdict{background:#eef5ff;border-left:5px solid #2f6fd6;padding:.4em 1em}
.good{background:#eefaf0;border-left:5px solid #2e9d4a;padding:.4em 1em}
.bad{background:#fdf0ef;border-left:5px solid #d0433a;padding:.4em 1em}
.warn{background:#fff8e6;border-left:5px solid #d99a00;padding:.4em 1em}.note{color:#555;font-size:.92em}
details summary{cursor:pointer;font-weight:600}
"""


def inline(parts: list[Inline]) -> str:
    out = []
    for p in parts:
        if isinstance(p, Strong):
            out.append(f"<strong>{escape(p.text)}</strong>")
        elif isinstance(p, Code):
            out.append(f"<code>{escape(p.text)}</code>")
        else:
            out.append(escape(p))
    return "".join(out)


def _cls(tone: str) -> str:
    return f' class="{tone}"' if tone else ""


def table(t: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    body = "".join("<tr>" + "".join(f"<td{' class=n' if i in t.numeric else ''}>{escape(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>\n" for r in t.rows)
    caption = f"<caption>{escape(t.caption)}</caption>" if t.caption and not t.collapsed else ""
    html = f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>"
    if t.collapsed:
        return f"<details><summary>{escape(t.caption or 'Table')}</summary>{html}</details>"
    return html


def block(b: Block) -> str:
    if isinstance(b, Heading):
        lv = max(1, min(b.level, 6))
        return f"<h{lv}>{escape(b.text)}</h{lv}>"
    if isinstance(b, Paragraph):
        return f"<p{_cls(b.tone)}>{inline(b.parts)}</p>"
    if isinstance(b, Bullets):
        items = "".join(f"<li>{inline(i)}</li>" for i in b.items)
        return f"<ul{_cls(b.tone)}>{items}</ul>"
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Image):
        data = base64.b64encode(b.png).decode("ascii")
        return (f'<figure><figcaption>{escape(b.title)}</figcaption>'
                f'<img src="data:image/png;base64,{data}" alt="{escape(b.alt)}"></figure>')
    if isinstance(b, Details):
        inner = "\n".join(block(x) for x in b.blocks)
        return f"<details><summary>{escape(b.summary)}</summary>\n{inner}\n</details>"
    raise TypeError(f"unknown block {type(b).__name__}")


def render(doc: Document) -> str:
    body = "\n".join(block(b) for b in doc.blocks)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{escape(doc.title)}</title><style>{CSS}</style></head>\n"
            f"<body><h1>{escape(doc.title)}</h1>\n{body}\n</body></html>\n")

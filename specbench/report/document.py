"""The document every renderer receives: a title and a list of plain blocks.

Blocks hold raw text whatever its origin (variant names, warnings, config values, log lines): the renderers
(`markdown.py`, `html.py`) own all escaping.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Strong:
    text: str


@dataclass(frozen=True)
class Code:
    text: str


Inline = str | Strong | Code
Tone = Literal["", "verdict", "good", "bad", "warn", "note"]


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    parts: list[Inline]
    tone: Tone = ""


@dataclass
class Bullets:
    items: list[list[Inline]]
    tone: Tone = ""


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""
    collapsed: bool = False  # long tables: folded (<details>) in both formats
    numeric: frozenset[int] = frozenset()  # right-aligned column indices


@dataclass
class Image:
    title: str
    png: bytes
    alt: str


@dataclass
class Details:
    """Blocks folded under a one-line summary (<details> in both formats): what a reader opens when needed."""

    summary: str
    blocks: list[Heading | Paragraph | Bullets | Table | Image]


Block = Heading | Paragraph | Bullets | Table | Image | Details


@dataclass
class Document:
    title: str
    blocks: list[Block] = field(default_factory=list)


Renderer = Callable[[Document], str]

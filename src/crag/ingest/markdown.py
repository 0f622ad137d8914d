"""Markdown's headings and tables (markdown-it-py, CommonMark with GFM tables), and the title line of plain text.

The text of a Markdown document stays as written, except for its structure:

- a heading (``#`` to ``######``, or a setext heading underlined with ``=`` or ``-``) leaves
  the text and becomes the section of what follows it (:mod:`crag.ingest.sections`);
- a pipe table becomes one line per row, each cell beside its column's header
  (:mod:`crag.ingest.tables`).

Only headings and tables at the top level count: a ``#`` inside a code block, a quote or a
list item is text. Headings and cells are read as plain text (``**bold**`` → ``bold``).

>>> outline = Outline()
>>> md = "# Catalogue\\n\\n## Shipments\\n\\n| Product | Q3 2023 shipments |\\n|---|---|\\n| Yunque S5 | 8,640 |\\n"
>>> [(p.section, p.text.strip()) for p in markdown_pieces(md, outline) if p.text.strip()]
[('Catalogue > Shipments', 'Yunque S5 | Q3 2023 shipments: 8,640')]
>>> text_title("Wang Lei (engineer)\\nWang Lei (born 1984) is an engineer.")
('Wang Lei (engineer)', 'Wang Lei (born 1984) is an engineer.')
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import Any

from crag.ingest.sections import Outline, Piece
from crag.ingest.tables import Cell, expand, table_rows
from crag.text import EN_STOP

__all__ = ["markdown_pieces", "markdown_title", "text_title"]

_TITLE_CHARS = 80  # a plain-text title line is at most this long (40 for Chinese)
_NOT_TITLE_END = tuple(".。!?！？;；:：,，、…-")
_SENTENCE_INSIDE = ("。", "！", "？", "；", ". ", "! ", "? ")


@lru_cache(maxsize=1)
def _blocks() -> Any:
    """A parser of block structure only: inline parsing is what costs (10x), and only headings
    and cells need it (:func:`_plain`)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table").disable("inline")


@lru_cache(maxsize=1)
def _inline() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def _plain(source: str) -> str:
    """Inline Markdown as the text it shows: emphasis, code and links unwrapped, images by their alt text."""
    out: list[str] = []
    for token in _inline().parseInline(source):
        for child in token.children or []:
            if child.type in ("text", "code_inline"):
                out.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                out.append(" ")
            elif child.type == "image":
                out.append(child.content)
    return " ".join("".join(out).split())


def markdown_title(text: str) -> str:
    """The text of the first top-level ``#`` (or ``=``-underlined) heading; "" without one."""
    tokens = _blocks().parse(text)
    for n, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.tag == "h1":
            return _plain(tokens[n + 1].content)
    return ""


def markdown_pieces(text: str, outline: Outline) -> Iterator[Piece]:
    """``text`` as pieces, each in its section: headings tell ``outline``, tables become rows.

    The outline carries on from one call to the next, so a document read in blocks keeps its
    sections across them. ``done`` is the fraction of ``text``'s lines read.
    """
    tokens = _blocks().parse(text)
    lines = text.split("\n")
    total = max(1, len(lines))
    pos, n = 0, 0
    while n < len(tokens):
        token = tokens[n]
        if token.level == 0 and token.map and token.type in ("heading_open", "table_open"):
            start, end = token.map
            if start > pos:
                yield Piece("\n".join(lines[pos:start]) + "\n", start / total, outline.section)
            if token.type == "heading_open":
                outline.heading(int(token.tag[1]), _plain(tokens[n + 1].content))
            else:
                close = next(k for k in range(n, len(tokens)) if tokens[k].type == "table_close")
                rows = _table(tokens[n:close])
                if rows:
                    yield Piece("\n\n" + "\n\n".join(rows) + "\n\n", end / total, outline.section)
                n = close
            pos = end
        n += 1
    if pos < len(lines):
        yield Piece("\n".join(lines[pos:]), 1.0, outline.section)


def _table(tokens: Sequence[Any]) -> list[str]:
    """A GFM table's tokens as row lines; its first row is the header (GFM tables always have one)."""
    rows: list[list[Cell]] = []
    for n, token in enumerate(tokens):
        if token.type == "tr_open":
            rows.append([])
        elif token.type in ("th_open", "td_open"):
            rows[-1].append(Cell(_plain(tokens[n + 1].content), header=token.type == "th_open"))
    grid = expand(rows)
    if grid is None:
        return [" | ".join(c.text for c in row if c.text) for row in rows]
    return table_rows(grid, header_rows=1 if any(s.text for s in grid[0]) else 0)


def text_title(text: str) -> tuple[str, str]:
    """``(title, rest)`` of plain text whose first line reads as a title, else ``("", text)``.

    A title line is short, ends without a full stop (or comma, colon...), holds no sentence
    end, and is followed by more text: after a blank line, or at once by a line that starts a
    sentence (not a lower-case continuation of a wrapped one).
    """
    body = text.lstrip()
    first, newline, rest = body.partition("\n")
    line = first.strip()
    if not newline or not rest.strip() or not line:
        return "", text
    limit = _TITLE_CHARS // 2 if any("\u3400" <= c <= "\u9fff" for c in line) else _TITLE_CHARS
    if len(line) > limit or line.endswith(_NOT_TITLE_END) or any(s in line for s in _SENTENCE_INSIDE):
        return "", text
    if line.startswith(("- ", "* ", "+ ", "#", ">", "|")):
        return "", text
    if not rest.lstrip(" \t").startswith(("\n", "\r")):  # no blank line: the next line must start afresh
        head = rest.lstrip()[:1]
        last = line.split()[-1].lower()
        if head.islower() or last in EN_STOP or len(line) > limit * 3 // 4 or "，" in line or "、" in line:
            return "", text
    return line, rest

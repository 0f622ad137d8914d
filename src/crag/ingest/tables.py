"""Tables as rows that carry their headers: every cell stays next to its row's key and its column's name.

A table flattened into text leaves "8,640" in a chunk with no sign of what it measures, and a
small model then reads it as whatever the question asks ("battery capacity 8,640 mAh" from a
shipments table). So each body row becomes one line::

    Yunque S5 | Q1 2023 shipments: 7,200 | Q3 2023 shipments: 8,640
    云雀S5 | 2023年第三季度出货量: 8,640

the row's key (its header cells, else its first cell) first, then each other non-empty cell as
``column header: value``. Rows are separated by blank lines, so each row is a paragraph: one
sentence for :func:`crag.text.split_sentences` (which keeps a row whole, terminators in cells
included), and a place where the chunker may start a new chunk, never inside a row. A row
longer than ``ROW_CHARS`` continues on another line that repeats its key, so that a long table
spans several chunks of whole, self-describing rows.

Readers (Markdown, HTML, DOCX, PDF) turn their tables into :class:`Cell` rows;
:func:`expand` lays merged cells (``rowspan``/``colspan``) out on a grid, and
:func:`table_rows` writes the lines.

>>> head = [Cell(name, header=True) for name in ("Product", "Q1 2023 shipments", "Q3 2023 shipments")]
>>> body = [Cell("Yunque S5"), Cell("7,200"), Cell("8,640")]
>>> table_rows(expand([head, body]), header_rows=1)
['Yunque S5 | Q1 2023 shipments: 7,200 | Q3 2023 shipments: 8,640']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from crag.text import ROW_SEPARATOR, join_sentences

__all__ = ["MAX_COLUMNS", "ROW_CHARS", "Cell", "Slot", "expand", "guess_header_rows", "table_rows"]

# A row line is at most this long (unless one cell alone is longer): below a default chunk of
# 400 characters with room for the section line that heads it (crag.ingest.chunk.section_crumb).
ROW_CHARS = 280
MAX_COLUMNS = 256  # a wider grid (colspan="1000" on every row) is laid out as plain lines instead
_MAX_SPAN = 1000  # HTML's own limit on colspan; rowspan is bounded by the rows there are
_NUMBER = re.compile(r"[\s\d.,%+\-–—$¥€£()/:~]*\d[\s\d.,%+\-–—$¥€£()/:~]*")


@dataclass
class Cell:
    """One cell as a reader found it: its text, its spans, and whether it is a header cell (``<th>``)."""

    text: str
    rowspan: int = 1
    colspan: int = 1
    header: bool = False


@dataclass(frozen=True)
class Slot:
    """One place of the grid: the cell that covers it (``origin``, the same for every place a
    merged cell spans), its text and whether it is a header cell."""

    origin: int
    text: str
    header: bool = False


def expand(rows: Sequence[Sequence[Cell]]) -> list[list[Slot]] | None:
    """The grid of ``rows`` with merged cells repeated over every place they span.

    All rows come out equally long (empty slots pad short ones). ``None`` when the grid would
    be wider than ``MAX_COLUMNS``: such a table is better written as plain lines.
    """
    grid: list[dict[int, Slot]] = []
    origin = 0
    for r, row in enumerate(rows):
        while len(grid) <= r:
            grid.append({})
        col = 0
        for cell in row:
            while col in grid[r]:  # places taken by a rowspan from above
                col += 1
            span_c = max(1, min(cell.colspan, _MAX_SPAN))
            span_r = max(1, min(cell.rowspan, len(rows) - r))
            if col + span_c > MAX_COLUMNS:
                return None
            slot = Slot(origin, " ".join(cell.text.split()), cell.header)
            origin += 1
            for dr in range(span_r):
                while len(grid) <= r + dr:
                    grid.append({})
                for dc in range(span_c):
                    grid[r + dr][col + dc] = slot
            col += span_c
    width = max((max(g) + 1 for g in grid if g), default=0)
    out: list[list[Slot]] = []
    for g in grid:
        line = []
        for c in range(width):
            if c not in g:
                origin += 1
                g[c] = Slot(origin, "")
            line.append(g[c])
        out.append(line)
    return out


def guess_header_rows(grid: Sequence[Sequence[Slot]], *, likely: bool = False) -> int:
    """1 when the first row of a table that marks no header reads as one, else 0.

    It does when the table has a body, the first row's cells hold words, not figures, and
    either the table has three or more columns or the reader saw a sign of a header
    (``likely``: bold text, a repeated header row). A two-column table without such a sign is
    more often a list of names and values ("Battery | 5200 mAh") than a header over them.
    """
    if len(grid) < 2 or not grid[0]:
        return 0
    texts = [s.text for s in _distinct(grid[0])]
    if sum(1 for t in texts if t) < 2 or any(t and _NUMBER.fullmatch(t) for t in texts):
        return 0
    return 1 if likely or len(grid[0]) >= 3 else 0


def table_rows(grid: Sequence[Sequence[Slot]], *, header_rows: int, key_cols: int = 1) -> list[str]:
    """One line per body row (see the module docstring); a table of headers alone gives their line.

    ``header_rows`` leading rows name the columns (a column's name joins what each of them
    says above it: "2023 Q1"); ``key_cols`` leading columns are each row's key.
    """
    if not grid:
        return []
    width = len(grid[0])
    header_rows = min(header_rows, len(grid))
    heads = [_column_name(grid[:header_rows], c) for c in range(width)]
    lines: list[str] = []
    for row in grid[header_rows:]:
        lines += _row_lines(row, heads, key_cols)
    if not lines and any(heads):
        lines.append(ROW_SEPARATOR.join(h for h in dict.fromkeys(heads) if h))
    return lines


def _column_name(header: Sequence[Sequence[Slot]], col: int) -> str:
    names: list[str] = []
    for row in header:
        text = row[col].text
        if text and text not in names:
            names.append(text)
    return join_sentences(names)  # "2023 Q1", "2023年第一季度"


def _distinct(row: Sequence[Slot]) -> list[Slot]:
    """The row's slots with a merged cell once (at its first place)."""
    out: list[Slot] = []
    for slot in row:
        if not out or out[-1].origin != slot.origin:
            out.append(slot)
    return out


def _row_lines(row: Sequence[Slot], heads: Sequence[str], key_cols: int) -> list[str]:
    keys: list[str] = []
    items: list[str] = []
    col = 0
    while col < len(row):
        slot, start = row[col], col
        while col < len(row) and row[col].origin == slot.origin:  # the places a merged cell spans
            col += 1
        cols = range(start, col)
        if not slot.text:
            continue
        if cols[0] < key_cols and slot.text not in keys:
            keys.append(slot.text)
            continue
        label = " / ".join(dict.fromkeys(heads[c] for c in cols if heads[c]))
        items.append(f"{label}: {slot.text}" if label and label != slot.text else slot.text)
    key = ROW_SEPARATOR.join(keys)
    if not items:
        if key and len(heads) == 1 and heads[0] and heads[0] != key:  # a one-column table
            return [f"{heads[0]}: {key}"]
        return [key] if key else []
    lines: list[str] = []
    line = key
    for item in items:
        joined = f"{line}{ROW_SEPARATOR}{item}" if line else item
        if len(joined) > ROW_CHARS and line and line != key:
            lines.append(line)
            line = f"{key}{ROW_SEPARATOR}{item}" if key else item
        else:
            line = joined
    lines.append(line)
    return lines

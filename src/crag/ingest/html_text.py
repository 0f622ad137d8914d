"""Text of an HTML page: visible text by block, headings as sections, tables as rows with their headers.

The page is parsed whole with BeautifulSoup (lxml when installed); boilerplate tags (scripts,
styles, navigation, footers...) and comments are dropped, and each block element becomes a
paragraph. Then:

- ``<h1>``..``<h6>`` leave the text and become the section of what follows
  (:mod:`crag.ingest.sections`);
- a ``<table>`` (one that holds no other table) becomes one line per row, each cell beside its
  column header (:mod:`crag.ingest.tables`): the ``<thead>`` rows or the leading rows of
  ``<th>`` cells name the columns (else the first row, when it reads as a header), leading
  ``<th>`` cells of a body row are its key, ``rowspan``/``colspan`` repeat a cell over the
  places it covers, and a ``<caption>`` is the rows' last section step.

:func:`read_html` yields the text as pieces from the cleaned tree, so a large page is chunked
while its text is still being walked (:mod:`crag.ingest.stream`), with the chunks of a whole
read.

>>> doc = read_html("<title>Catalogue</title><h2>Shipments</h2><table><tr><th>Product<th>Q3 2023"
...                 "<tr><td>Yunque S5<td>8,640</table>")
>>> [(p.section, p.text.strip()) for p in doc.pieces if p.text.strip()]
[('Shipments', 'Yunque S5 | Q3 2023: 8,640')]
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from typing import Any

from bs4.element import NavigableString

from crag.ingest.sections import Extracted, Outline, Piece
from crag.ingest.tables import Cell, expand, guess_header_rows, table_rows

__all__ = ["html_soup", "read_html"]

_DROP_TAGS = ("script", "style", "nav", "footer", "noscript", "template", "head", "svg")
_BLOCK_TAGS = (
    "p", "div", "section", "article", "main", "header", "aside", "blockquote", "pre", "ul", "ol",
    "li", "dl", "dt", "dd", "table", "tr", "figure", "figcaption",
)  # fmt: skip
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_ROW_PARTS = ("thead", "tbody", "tfoot")


def read_html(markup: str) -> Extracted:
    """Title (``<title>``, else the first ``<h1>``) and the page's text as :class:`Piece` s."""
    soup, title = html_soup(markup)
    return Extracted(title, _pieces(soup, Outline(title)))


def html_soup(markup: str) -> tuple[Any, str]:
    """The cleaned tree (headings and tables replaced by marker strings) and the page's title."""
    from bs4 import BeautifulSoup, FeatureNotFound
    from bs4.element import PreformattedString

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. MarkupResemblesLocatorWarning on tiny files
        try:
            soup = BeautifulSoup(markup, "lxml")
        except FeatureNotFound:
            soup = BeautifulSoup(markup, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(_DROP_TAGS):
        tag.decompose()
    # Source line breaks inside a paragraph are just spaces; blocks then add real breaks.
    for node in soup.find_all(string=True):
        if isinstance(node, PreformattedString):
            # A comment, <!DOCTYPE>, CDATA or processing instruction is not visible text (and a
            # hidden comment is a classic place for instructions planted for an assistant).
            node.extract()
        elif isinstance(node, NavigableString) and not node.find_parent("pre"):
            node.replace_with(re.sub(r"\s+", " ", str(node)))
    if not title:
        h1 = soup.find("h1")
        title = h1.get_text(" ", strip=True) if h1 else ""
    for table in soup.find_all("table"):
        if table.find("table") is None:  # a layout table around others stays blocks of text
            table.replace_with(_table_marker(table))
    for tag in soup.find_all(_HEADINGS):
        heading = _Heading(tag.get_text(" ", strip=True))
        heading.level = int(tag.name[1])
        tag.replace_with(heading)
        heading.insert_before("\n\n")  # the text on either side of it is not one paragraph
        heading.insert_after("\n\n")
    for tag in soup.find_all(_BLOCK_TAGS):
        tag.insert_before("\n\n")
        tag.insert_after("\n\n")
    for tag in soup.find_all(["br", "td", "th"]):
        tag.insert_after("\n" if tag.name == "br" else " ")
    return soup, title


def _pieces(soup: Any, outline: Outline) -> Iterator[Piece]:
    total = max(1, sum(len(s) for s in soup.descendants if isinstance(s, NavigableString)))  # builds no text
    done, section = 0, ""
    for node in soup.descendants:
        if not isinstance(node, NavigableString):
            continue
        done += len(node)
        if isinstance(node, _Heading):
            outline.heading(node.level, str(node))
        elif isinstance(node, _Table):
            section = outline.captioned(node.caption)
            yield Piece(f"\n\n{node}\n\n", min(1.0, done / total), section)
        elif type(node) is NavigableString:  # not the ruby annotations bs4 keeps apart
            section = outline.section
            yield Piece(str(node), min(1.0, done / total), section)
    yield Piece("", 1.0, section)  # the end, in the last text's section (a heading may close the page)


class _Heading(NavigableString):
    """A heading, in the tree in place of its element: it tells the outline, it is not text."""

    level = 1


class _Table(NavigableString):
    """A table's row lines, in the tree in place of its element, with its caption."""

    caption = ""


def _table_marker(table: Any) -> Any:
    caption = table.find("caption")
    node = _Table("\n\n".join(_rows(table)))
    node.caption = caption.get_text(" ", strip=True) if caption else ""
    return node


def _rows(table: Any) -> list[str]:
    """A table's row lines (:mod:`crag.ingest.tables`)."""
    trs = [tr for tr in table.find_all("tr") if tr.find_parent("table") is table]
    rows = [[_cell(td) for td in tr.find_all(["td", "th"], recursive=False)] for tr in trs]
    grid = expand(rows)
    if grid is None:  # wider than any table a reader means
        return [" | ".join(c.text for c in row if c.text) for row in rows]
    in_head = sum(1 for tr in trs if tr.parent is not None and tr.parent.name == "thead")
    all_th = 0
    for row in rows:
        if not row or not all(c.header for c in row):
            break
        all_th += 1
    header_rows = max(in_head, all_th) or guess_header_rows(grid)
    body = [r for r in rows[header_rows:] if r]
    key_cols = 1
    if body and all(r[0].header for r in body):
        key_cols = next((k for k, c in enumerate(body[0]) if not c.header), len(body[0]))
        key_cols = max(1, min(key_cols, len(grid[0]) - 1))
    return table_rows(grid, header_rows=header_rows, key_cols=key_cols)


def _cell(tag: Any) -> Cell:
    return Cell(
        tag.get_text(" ", strip=True),
        rowspan=_span(tag.get("rowspan")),
        colspan=_span(tag.get("colspan")),
        header=tag.name == "th",
    )


def _span(value: Any) -> int:
    match = re.match(r"\s*(\d{1,4})", str(value or "1"))
    return max(1, int(match.group(1))) if match else 1

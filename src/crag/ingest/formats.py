"""Text of PDF and DOCX documents, read piece by piece (HTML: :mod:`crag.ingest.html_text`).

Each reader returns an :class:`~crag.ingest.sections.Extracted`: the document's title and an
iterator of :class:`~crag.ingest.sections.Piece` (raw text, fraction of the document read so
far, section). The pieces of one section concatenated are exactly the text a whole read
extracts for it (before control characters are stripped and whitespace normalised).
``crag.ingest.load.load_file`` joins the pieces; ``crag.ingest.stream`` chunks them as they
come, so a large document is committed while it is still being read.

- **PDF**: one page at a time from a ``pypdf.PdfReader`` over the open file (a reader built
  from a path would copy the whole file into memory first), with a fresh reader every
  ``PAGES_PER_READER`` pages so that what pypdf caches stays bounded. Page texts are stripped
  and joined by blank lines; pages without text are left out. A page that draws ruled lines is
  read again by pdfplumber for its tables (:mod:`crag.ingest.pdf_tables`), which become rows
  with their headers.
- **DOCX**: paragraphs and tables in document order. A paragraph in a heading style
  ("Heading 1".., or with an outline level) is a section, not text; a table is one line per
  row, each cell beside its column header (:mod:`crag.ingest.tables`). python-docx parses the
  whole XML when the file opens; what is bounded is the text built from it.

Errors are ``UnsupportedFileError`` with a one-line message naming the file, raised when the
file opens or, for a page that fails, when that page is read.

>>> from pathlib import Path
>>> doc = read_pdf(Path("report.pdf"))  # doctest: +SKIP
>>> doc.title, "".join(piece for piece, _ in doc.pieces)[:40]  # doctest: +SKIP
"""

from __future__ import annotations

import gc
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from crag.errors import UnsupportedFileError
from crag.ingest.files import open_regular
from crag.ingest.limits import DEFAULT_LIMITS, InputLimits, check_zip, pdf_limit_error, pdf_limits
from crag.ingest.pdf_tables import PdfTables
from crag.ingest.sections import Extracted, Outline, Piece
from crag.ingest.tables import MAX_COLUMNS, Slot, guess_header_rows, table_rows

if TYPE_CHECKING:
    import pypdf

__all__ = ["PAGES_PER_READER", "Extracted", "read_docx", "read_pdf"]

# pypdf keeps every object it has parsed (about the size of the pages' content) for the life of
# its reader; a fresh reader every so many pages bounds that by the pages, not the file. Opening
# one costs time in proportion to the file's page count (~0.2 s for 3,000 pages), hence not often.
PAGES_PER_READER = 1000

_HEADING_STYLE = re.compile(r"(?:heading|标题)\s*([1-9])", re.IGNORECASE)


def read_pdf(path: Path, limits: InputLimits = DEFAULT_LIMITS) -> Extracted:
    """Metadata title and page texts (joined by blank lines) of a PDF, read page by page.

    The file stays open until ``pieces`` is exhausted or closed. No stream decodes beyond
    ``limits.max_unpacked_bytes`` (:func:`crag.ingest.limits.pdf_limits`).
    """
    fh = open_regular(path)  # a FIFO or a device is refused before the first read
    try:
        with warnings.catch_warnings(), pdf_limits(limits):
            warnings.simplefilter("ignore")  # pypdf warns on sloppy but readable files
            reader = _pdf_reader(path, fh)
            title = (reader.metadata.title if reader.metadata else None) or ""
            count = len(reader.pages)
    except UnsupportedFileError:
        fh.close()
        raise
    except Exception as exc:  # pypdf raises many types (PdfReadError, KeyError, ValueError, ...)
        fh.close()
        raise _pdf_failure(path, exc, limits) from None
    return Extracted(str(title), _pdf_pages(path, fh, reader, count, limits))


def _pdf_reader(path: Path, fh: BinaryIO) -> pypdf.PdfReader:
    """A reader over ``fh`` from its start, decrypted with the empty password when needed."""
    import pypdf

    fh.seek(0)
    reader = pypdf.PdfReader(fh)
    if reader.is_encrypted and not reader.decrypt(""):  # empty user password opens many
        raise UnsupportedFileError(f"{path}: PDF is password-protected; save an unencrypted copy")
    return reader


def _pdf_pages(path: Path, fh: BinaryIO, reader: pypdf.PdfReader, count: int, limits: InputLimits) -> Iterator[Piece]:
    with fh, PdfTables(path, limits) as tables:
        first = True
        for n in range(count):
            try:
                with warnings.catch_warnings(), pdf_limits(limits):
                    warnings.simplefilter("ignore")
                    if n and n % PAGES_PER_READER == 0:
                        # pypdf's objects point back at their reader: only the cycle collector
                        # frees the old one's, so it runs now rather than some time later.
                        del reader
                        gc.collect()
                        reader = _pdf_reader(path, fh)
                    page = reader.pages[n]
                    text = (page.extract_text() or "").strip()
            except UnsupportedFileError:
                raise
            except Exception as exc:  # a broken page far into the file fails like a broken file
                raise _pdf_failure(path, exc, limits) from None
            text = tables.page_text(n, page, text)
            yield Piece(("" if first or not text else "\n\n") + text, (n + 1) / count)
            first = first and not text


def _pdf_failure(path: Path, exc: Exception, limits: InputLimits) -> UnsupportedFileError:
    bomb = pdf_limit_error(path, exc, limits)
    if bomb is not None:
        return bomb
    if "crypt" in str(exc).lower() or "password" in str(exc).lower():  # e.g. AES needs cryptography
        return UnsupportedFileError(f"{path}: PDF is encrypted; save an unencrypted copy")
    why = type(exc).__name__
    return UnsupportedFileError(f"{path}: corrupt or unreadable PDF ({why}); re-export it")


def read_docx(path: Path, limits: InputLimits = DEFAULT_LIMITS) -> Extracted:
    """Title, and paragraphs and tables in document order (blank lines between), headings as sections.

    The title is the core-properties title, else the first paragraph in the "Title" style, else
    the first top-level heading. A file that would unpack beyond ``limits`` is refused before
    python-docx parses it (:func:`crag.ingest.limits.check_zip`).
    """
    import docx

    with open_regular(path) as fh:
        check_zip(path, fh, limits)
        fh.seek(0)
        try:
            document = docx.Document(fh)
            levels = _HeadingLevels(document)
            title = document.core_properties.title or levels.title(document)
        except Exception as exc:  # python-docx surfaces zip, XML and package errors alike
            raise _docx_failure(path, exc) from None
    return Extracted(title, _docx_blocks(path, document, levels, Outline(title)))


class _HeadingLevels:
    """A paragraph's heading level from its style (looked up once per style) or its own outline level."""

    def __init__(self, document: Any) -> None:
        self._styles = document.styles.element
        self._levels: dict[str, int] = {}

    def of(self, paragraph: Any) -> int:
        """1.. for a heading (0 for the "Title" style), -1 for body text."""
        from docx.oxml.ns import qn

        props = paragraph._p.pPr  # a find, not an XPath: this runs once per paragraph
        own = props.find(qn("w:outlineLvl")) if props is not None else None
        if own is not None:
            return _outline_level(own.get(qn("w:val"), ""))
        style = paragraph._p.style
        if style is None:
            return -1
        if style not in self._levels:
            self._levels[style] = self._style_level(style)
        return self._levels[style]

    def _style_level(self, style_id: str) -> int:
        element = self._styles.get_by_id(style_id)
        if element is None:
            return -1
        name = element.name_val or style_id
        if name.lower() == "title":
            return 0
        match = _HEADING_STYLE.fullmatch(name.strip())
        if match:
            return int(match.group(1))
        outline = element.xpath("./w:pPr/w:outlineLvl/@w:val")
        return _outline_level(outline[0]) if outline else -1

    def title(self, document: Any) -> str:
        """The first "Title" paragraph's text, else the first level-1 heading's ("" for neither)."""
        first_heading = ""
        for paragraph in document.paragraphs:
            level = self.of(paragraph)
            if level == 0 and paragraph.text.strip():
                return str(paragraph.text.strip())
            if level == 1 and not first_heading:
                first_heading = paragraph.text.strip()
        return first_heading


def _outline_level(value: str) -> int:
    """Word's outline level (0-based; 9 is body text) as a heading level from 1."""
    try:
        level = int(value)
    except ValueError:
        return -1
    return level + 1 if 0 <= level < 9 else -1


def _docx_blocks(path: Path, document: Any, levels: _HeadingLevels, outline: Outline) -> Iterator[Piece]:
    from docx.table import Table

    total = max(1, len(document.element.body))  # body elements: paragraphs, tables, section
    first, seen, section = True, 0, ""
    try:
        for item in document.iter_inner_content():
            seen += 1
            done = min(1.0, seen / total)
            if isinstance(item, Table):
                texts = ["\n\n".join(_docx_table(item))]
            else:
                level = levels.of(item)
                if level >= 0:
                    outline.heading(max(1, level), item.text)
                    continue
                texts = [item.text]
            for text in texts:
                if text.strip():
                    section = outline.section
                    yield Piece(("" if first else "\n\n") + text, done, section)
                    first = False
    except Exception as exc:
        raise _docx_failure(path, exc) from None
    yield Piece("", 1.0, section)  # the end, in the last text's section (the body ends with no text)


def _docx_table(table: Any) -> list[str]:
    """A Word table's row lines: its repeated header rows (or a first row that reads as one) name the columns."""
    grid: list[list[Slot]] = []
    # A merged cell is the same <w:tc> at every place it covers. The elements are the keys, which
    # keeps their lxml proxies alive: a proxy let go may come back as another object.
    cells: dict[Any, Slot] = {}
    header_rows, bold_first = 0, False
    for r, row in enumerate(table.rows):
        slots = [Slot(-1 - r * MAX_COLUMNS - c, "") for c in range(getattr(row, "grid_cols_before", 0))]
        for cell in row.cells:
            if cell._tc not in cells:
                cells[cell._tc] = Slot(len(cells), " ".join(cell.text.split()))
            slots.append(cells[cell._tc])
        grid.append(slots)
        if header_rows == r and row._tr.xpath("./w:trPr/w:tblHeader[not(@w:val='0' or @w:val='false')]"):
            header_rows += 1
        if r == 0:
            runs = [run for cell in row.cells for p in cell.paragraphs for run in p.runs if run.text.strip()]
            bold_first = bool(runs) and all(run.bold for run in runs)
    width = max((len(g) for g in grid), default=0)
    if width > MAX_COLUMNS:
        return [" | ".join(dict.fromkeys(s.text for s in g if s.text)) for g in grid]
    for r, g in enumerate(grid):
        g += [Slot(-1 - r * MAX_COLUMNS - c, "") for c in range(len(g), width)]
    header_rows = header_rows or guess_header_rows(grid, likely=bold_first)
    return table_rows(grid, header_rows=header_rows)


def _docx_failure(path: Path, exc: Exception) -> UnsupportedFileError:
    why = type(exc).__name__
    return UnsupportedFileError(f"{path}: corrupt or unreadable DOCX ({why}); re-save it")

"""Text of PDF, DOCX and HTML documents, read piece by piece.

Each reader returns an :class:`Extracted`: the document's title and an iterator of
``(piece, done)``, where the pieces concatenated are exactly the text a whole read extracts
(before control characters are stripped and whitespace normalised) and ``done`` is the
fraction of the document read so far (0 to 1, for progress). ``crag.ingest.load.load_file``
joins the pieces; ``crag.ingest.stream`` chunks them as they come, so a large document is
committed while it is still being read.

- **PDF**: one page at a time from a ``pypdf.PdfReader`` over the open file (a reader built
  from a path would copy the whole file into memory first), with a fresh reader every
  ``PAGES_PER_READER`` pages so that what pypdf caches stays bounded. Page texts are stripped
  and joined by blank lines; pages without text are left out.
- **DOCX**: paragraphs and table rows in document order. python-docx parses the whole XML when
  the file opens; what is bounded is the text built from it.
- **HTML**: the strings of the cleaned BeautifulSoup tree, in order. The tree stays whole: the
  text (and so today's chunk ids) is what bs4 makes of the markup after dropping boilerplate
  tags and marking blocks, and an incremental parser would have to re-create that behaviour
  event by event. What is not built is the text: no whole string, no whole copy.

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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from crag.errors import UnsupportedFileError
from crag.ingest.files import open_regular
from crag.ingest.limits import DEFAULT_LIMITS, InputLimits, check_zip, pdf_limit_error, pdf_limits

if TYPE_CHECKING:
    import pypdf

__all__ = ["PAGES_PER_READER", "Extracted", "read_docx", "read_html", "read_pdf"]

# pypdf keeps every object it has parsed (about the size of the pages' content) for the life of
# its reader; a fresh reader every so many pages bounds that by the pages, not the file. Opening
# one costs time in proportion to the file's page count (~0.2 s for 3,000 pages), hence not often.
PAGES_PER_READER = 1000

_DROP_TAGS = ("script", "style", "nav", "footer", "noscript", "template", "head", "svg")
_BLOCK_TAGS = (
    "p", "div", "section", "article", "main", "header", "aside", "blockquote", "pre", "ul", "ol",
    "li", "dl", "dt", "dd", "table", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "figure", "figcaption",
)  # fmt: skip


@dataclass
class Extracted:
    """A document's title and its text as ``(piece, fraction read)`` pairs, in order."""

    title: str
    pieces: Iterator[tuple[str, float]]


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


def _pdf_pages(
    path: Path, fh: BinaryIO, reader: pypdf.PdfReader, count: int, limits: InputLimits
) -> Iterator[tuple[str, float]]:
    with fh:
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
                    text = (reader.pages[n].extract_text() or "").strip()
            except UnsupportedFileError:
                raise
            except Exception as exc:  # a broken page far into the file fails like a broken file
                raise _pdf_failure(path, exc, limits) from None
            yield ("" if first or not text else "\n\n") + text, (n + 1) / count
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
    """Core-properties title, and paragraphs and table rows in document order (blank lines between).

    A file that would unpack beyond ``limits`` is refused before python-docx parses it
    (:func:`crag.ingest.limits.check_zip`).
    """
    import docx

    with open_regular(path) as fh:
        check_zip(path, fh, limits)
        fh.seek(0)
        try:
            document = docx.Document(fh)
            title = document.core_properties.title or ""
        except Exception as exc:  # python-docx surfaces zip, XML and package errors alike
            raise _docx_failure(path, exc) from None
    return Extracted(title, _docx_blocks(path, document))


def _docx_blocks(path: Path, document: Any) -> Iterator[tuple[str, float]]:
    from docx.table import Table

    total = max(1, len(document.element.body))  # body elements: paragraphs, tables, section
    first, seen = True, 0
    try:
        for item in document.iter_inner_content():
            seen += 1
            done = min(1.0, seen / total)
            rows = [_row_text(row) for row in item.rows] if isinstance(item, Table) else [item.text]
            for text in rows:
                if text.strip():
                    yield ("" if first else "\n\n") + text, done
                    first = False
    except Exception as exc:
        raise _docx_failure(path, exc) from None


def _row_text(row: Any) -> str:
    cells: list[str] = []
    for cell in row.cells:  # merged cells repeat; keep each text once per row
        if cell.text.strip() and cell.text.strip() not in cells:
            cells.append(cell.text.strip())
    return " | ".join(cells)


def _docx_failure(path: Path, exc: Exception) -> UnsupportedFileError:
    why = type(exc).__name__
    return UnsupportedFileError(f"{path}: corrupt or unreadable DOCX ({why}); re-save it")


def read_html(markup: str) -> Extracted:
    """Title (``<title>``, else the first ``<h1>``) and visible text with one paragraph per block.

    Boilerplate tags (scripts, styles, navigation, footers, ...) are dropped.
    """
    soup, title = html_soup(markup)
    total = max(1, sum(len(s) for s in soup.strings))  # a pass that builds no text, for progress
    return Extracted(title, _html_strings(soup, total))


def _html_strings(soup: Any, total: int) -> Iterator[tuple[str, float]]:
    done = 0
    for s in soup.strings:
        done += len(s)
        yield str(s), min(1.0, done / total)


def html_soup(markup: str) -> tuple[Any, str]:
    """The cleaned tree whose ``get_text()`` is the page's text, and the page's title."""
    from bs4 import BeautifulSoup, FeatureNotFound
    from bs4.element import NavigableString, PreformattedString

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
    for tag in soup.find_all(_BLOCK_TAGS):
        tag.insert_before("\n\n")
        tag.insert_after("\n\n")
    for tag in soup.find_all(["br", "td", "th"]):
        tag.insert_after("\n" if tag.name == "br" else " ")
    if not title:
        h1 = soup.find("h1")
        title = h1.get_text(" ", strip=True) if h1 else ""
    return soup, title

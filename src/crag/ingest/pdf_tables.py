"""Tables of PDF pages, found by pdfplumber and written as rows with their headers.

pypdf reads a PDF's text (page by page, within the decoding limits of
:func:`crag.ingest.limits.pdf_limits`), but a table comes out of it as loose figures. A page
whose content stream draws ruled lines (rectangles and line segments, as table borders are
drawn) is read again with pdfplumber: its tables become one line per row, each cell beside its
column header (:mod:`crag.ingest.tables`), and the page's other text is pdfplumber's, from the
bands above, beside and below the tables, in reading order.

pdfplumber (pdfminer.six) decodes what it reads without pypdf's limits, so it is handed a page
only when pypdf has already decoded that page's content within them, the content is small
(``MAX_CONTENT_BYTES``: a page of tables is tens of KB, a page of millions of glyphs would
cost GBs of layout objects) and the page's embedded fonts decode within the limits too. A
page pdfplumber cannot read keeps pypdf's text.

>>> from pathlib import Path
>>> with PdfTables(Path("report.pdf"), DEFAULT_LIMITS) as tables:      # doctest: +SKIP
...     text = tables.page_text(0, pypdf_page, pypdf_text)
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, cast

from crag.ingest.files import open_regular
from crag.ingest.limits import DEFAULT_LIMITS, InputLimits, pdf_limits
from crag.ingest.tables import Slot, guess_header_rows, table_rows

__all__ = ["MAX_CONTENT_BYTES", "PdfTables"]

MAX_CONTENT_BYTES = 1 << 20
_RULES = re.compile(rb"\s(?:re|l)\s")  # path operators: a rectangle, a line segment
_MIN_RULES = 4  # a ruled table draws at least its four borders
_PAGES_PER_OPEN = 100  # pdfminer keeps the objects it parsed: open it afresh after so many pages
_FONT_FILES = ("/FontFile", "/FontFile2", "/FontFile3")


class PdfTables:
    """Reads the tables of some pages of one PDF; opens pdfplumber at the first page that may hold one."""

    def __init__(self, path: Path, limits: InputLimits = DEFAULT_LIMITS) -> None:
        self.path, self.limits = path, limits
        self._fh: BinaryIO | None = None
        self._pdf: Any = None
        self._opened_pages = 0
        self._checked_fonts: set[int] = set()

    def __enter__(self) -> PdfTables:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._pdf is not None:
            self._pdf.close()
        if self._fh is not None:
            self._fh.close()
        self._pdf = self._fh = None

    def page_text(self, n: int, page: Any, text: str) -> str:
        """Page ``n``'s text with its tables as rows; ``text`` (pypdf's) when it has none or cannot be read."""
        if not self._may_hold_table(page):
            return text
        try:
            import pdfplumber  # noqa: F401  (a core dependency; a missing one keeps pypdf's text)
        except ImportError:
            return text
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return self._read(n) or text
        except Exception:  # pdfminer raises many types on odd pages; pypdf's text stands
            return text

    def _may_hold_table(self, page: Any) -> bool:
        try:
            with warnings.catch_warnings(), pdf_limits(self.limits):
                warnings.simplefilter("ignore")
                content = page.get_contents()
                data = content.get_data() if content is not None else b""
                if not 0 < len(data) <= MAX_CONTENT_BYTES or len(_RULES.findall(data)) < _MIN_RULES:
                    return False
                self._check_fonts(page)
        except Exception:  # a limit reached or a broken resource: no second reader for this page
            return False
        return True

    def _check_fonts(self, page: Any) -> None:
        """Decode the page's embedded font programs within the limits (pdfminer would decode them
        without); raises when one decodes beyond them."""
        resources = page.get("/Resources")
        fonts = resources.get_object().get("/Font") if resources is not None else None
        if fonts is None:
            return
        for ref in fonts.get_object().values():
            font = ref.get_object()
            descendants = font.get("/DescendantFonts")
            for f in [font, *(d.get_object() for d in (descendants.get_object() if descendants else []))]:
                descriptor = f.get("/FontDescriptor")
                if descriptor is None:
                    continue
                for key in _FONT_FILES:
                    stream = descriptor.get_object().get(key)
                    number = getattr(stream, "idnum", None)
                    if stream is None or number in self._checked_fonts:
                        continue
                    stream.get_object().get_data()
                    if number is not None:
                        self._checked_fonts.add(number)

    def _read(self, n: int) -> str:
        import pdfplumber

        if self._pdf is None or self._opened_pages >= _PAGES_PER_OPEN:
            self.close()
            self._fh = open_regular(self.path)
            self._pdf = pdfplumber.open(cast(Any, self._fh))  # a buffered binary file, as it accepts
            self._opened_pages = 0
        self._opened_pages += 1
        page = self._pdf.pages[n]
        try:
            tables = sorted(page.find_tables(), key=lambda t: t.bbox[1])
            if not tables:
                return ""
            return _page_with_tables(page, tables)
        finally:
            page.close()


def _page_with_tables(page: Any, tables: list[Any]) -> str:
    """The page's text in reading order: the text above each table, beside it, then its rows."""
    x0, top, x1, bottom = page.bbox
    rest = page
    for table in tables:
        rest = rest.outside_bbox(table.bbox, strict=False)

    def band(upper: float, lower: float) -> str:
        if lower - upper < 1:
            return ""
        return str(rest.crop((x0, upper, x1, lower), strict=False).extract_text() or "")

    parts: list[str] = []
    y = top
    for table in tables:
        _, t_top, _, t_bottom = table.bbox
        parts.append(band(y, max(y, t_top)))
        parts.append(band(max(y, t_top), max(y, t_bottom)))
        parts.append("\n\n".join(_rows(table.extract())))
        y = max(y, t_bottom)
    parts.append(band(y, bottom))
    return "\n\n".join(p.strip() for p in parts if p.strip())


def _rows(cells: list[list[str | None]]) -> list[str]:
    """pdfplumber's cell texts as row lines: a missing cell (``None``) is the one to its left, merged."""
    grid: list[list[Slot]] = []
    origin = 0
    for row in cells:
        slots: list[Slot] = []
        for text in row:
            if text is None and slots:
                slots.append(slots[-1])
                continue
            slots.append(Slot(origin, " ".join((text or "").split())))
            origin += 1
        grid.append(slots)
    width = max((len(r) for r in grid), default=0)
    for line in grid:
        while len(line) < width:
            line.append(Slot(origin, ""))
            origin += 1
    return table_rows(grid, header_rows=guess_header_rows(grid))

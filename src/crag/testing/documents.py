"""Seeded PDF, DOCX and HTML documents of any length (tests and benchmarks).

The PDF writer needs no extra dependency (Helvetica text, one line per sentence, a correct
xref table) and writes page by page, so a document of thousands of pages never sits in
memory. PDF text is English only (Helvetica's Latin-1 encoding); DOCX and HTML mix Chinese
and English like :mod:`crag.testing.corpus`. :func:`write_table_pdf` draws a ruled table, in
Chinese too (Adobe's STSong-Light, which every PDF reader knows by name).

>>> import tempfile, pathlib, pypdf
>>> path = write_pdf(pathlib.Path(tempfile.mkdtemp()) / "a.pdf", english_pages(3, seed=1), title="A")
>>> len(pypdf.PdfReader(path).pages)
3
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from html import escape
from pathlib import Path

from crag.testing.corpus import _en_sentence, _zh_sentence

__all__ = ["english_pages", "mixed_paragraphs", "write_docx", "write_html", "write_pdf", "write_table_pdf"]


def english_pages(count: int, *, seed: int = 0, lines: tuple[int, int] = (15, 35)) -> Iterator[str]:
    """``count`` pages of English sentences, one or two sentences a line."""
    rng = random.Random(seed)
    for _ in range(count):
        n = rng.randint(*lines)
        yield "\n".join(" ".join(_en_sentence(rng) for _ in range(rng.randint(1, 2))) for _ in range(n))


def mixed_paragraphs(count: int, *, seed: int = 0) -> Iterator[str]:
    """``count`` paragraphs of mixed Chinese and English sentences."""
    rng = random.Random(seed)
    for _ in range(count):
        n = rng.randint(1, 6)
        yield " ".join(_zh_sentence(rng) if rng.random() < 0.5 else _en_sentence(rng) for _ in range(n))


def write_pdf(path: Path, pages: Iterable[str], title: str = "") -> Path:
    """Write a valid PDF with one page per text (lines split at ``\\n``); return ``path``."""
    offsets: dict[int, int] = {}
    kids: list[int] = []
    with path.open("wb") as fh:

        def put(num: int, body: bytes) -> None:
            offsets[num] = fh.tell()
            fh.write(b"%d 0 obj\n%s\nendobj\n" % (num, body))

        fh.write(b"%PDF-1.4\n")
        put(1, b"<< /Type /Catalog /Pages 2 0 R >>")
        put(3, b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
        num = 3
        for text in pages:
            lines = [ln.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for ln in text.split("\n")]
            shown = " ".join(f"({ln}) Tj T*" for ln in lines)
            ops = f"BT /F1 10 Tf 40 760 Td 12 TL {shown} ET".encode("latin-1")
            put(num + 1, b"<< /Length %d >>\nstream\n%s\nendstream" % (len(ops), ops))
            put(
                num + 2,
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                b"/Resources << /Font << /F1 3 0 R >> >> >>" % (num + 1),
            )
            kids.append(num + 2)
            num += 2
        put(2, b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids)))
        info = 0
        if title:
            num += 1
            info = num
            put(info, b"<< /Title (%s) >>" % title.encode("latin-1"))
        xref = fh.tell()
        fh.write(b"xref\n0 %d\n0000000000 65535 f \n" % (num + 1))
        fh.write(b"".join(b"%010d 00000 n \n" % offsets[n] for n in range(1, num + 1)))
        trailer = b"<< /Size %d /Root 1 0 R" % (num + 1) + (b" /Info %d 0 R >>" % info if info else b" >>")
        fh.write(b"trailer\n" + trailer + b"\nstartxref\n%d\n%%%%EOF\n" % xref)
    return path


def write_docx(
    path: Path, paragraphs: Iterable[str], *, title: str = "", table_every: int = 0, heading_every: int = 0
) -> Path:
    """Write a DOCX of ``paragraphs``, with a small table (a header row and two rows, the second
    with a cell merged over two columns) after every ``table_every``-th one and a heading
    ("Heading 2", every fourth one "Heading 3") before every ``heading_every``-th one."""
    import docx

    document = docx.Document()
    document.core_properties.title = title
    for n, text in enumerate(paragraphs, start=1):
        if heading_every and n % heading_every == 0:
            document.add_heading(f"Part {n // heading_every} 第{n // heading_every}部分", level=3 if n % 4 == 0 else 2)
        document.add_paragraph(text)
        if table_every and n % table_every == 0:
            table = document.add_table(rows=3, cols=3)
            rows = [
                ["Item", "Value", "备注"],
                [f"row {n}", f"{n * 7} 号", "Fine. 很好。"],
                [f"row {n + 1}", "merged", ""],
            ]
            for r, row in enumerate(rows):
                for c, value in enumerate(row):
                    table.cell(r, c).text = value
            table.cell(2, 1).merge(table.cell(2, 2)).text = "merged"
    document.save(str(path))
    return path


def write_html(path: Path, paragraphs: Iterable[str], *, title: str = "") -> Path:
    """Write an HTML page of ``paragraphs`` with boilerplate, breaks, lists and tables between."""
    head = f"<title>{escape(title)}</title>" if title else ""
    parts = [f"<!DOCTYPE html>\n<html><head>{head}<style>p {{margin: 0}}</style></head><body>"]
    parts.append("<nav>Home | About</nav><h1>Report 报告</h1>")
    for n, text in enumerate(paragraphs):
        kind = n % 7
        if kind == 3:
            parts.append(f"<div>{escape(text)}<br>\n  second line {n}</div>")
        elif kind == 5:
            parts.append(f"<ul><li>{escape(text)}</li><li>item {n}</li></ul><script>var x = {n};</script>")
        elif kind == 6 and n % 3:
            parts.append(f"<table><tr><td>{escape(text)}</td><td>cell {n}</td></tr></table>")
        elif kind == 6:  # a table with a header, a caption, a row header and merged cells
            parts.append(
                f"<table><caption>Table {n}</caption><thead><tr><th>Name</th><th colspan=2>Figures 数字</th></tr>"
                f"<tr><th></th><th>Q1</th><th>Q3</th></tr></thead><tbody><tr><th rowspan=2>cell {n}</th>"
                f"<td>{n}</td><td>{n * 3}</td></tr><tr><td colspan=2>{escape(text)}</td></tr></tbody></table>"
            )
        elif n % 40 == 0:
            parts.append(f"<h{2 + n // 40 % 2}>Part {n // 40}</h{2 + n // 40 % 2}><p>{escape(text)}</p>")
        else:
            parts.append(f"<p>{escape(text)}\n   wrapped</p>")
    parts.append("<footer>Copyright</footer></body></html>\n")
    path.write_text("".join(parts), "utf-8")
    return path


def write_table_pdf(path: Path, before: str, rows: list[list[str]], after: str, *, font_file: bytes = b"") -> Path:
    """Write a one-page PDF: a line of text, a table of ``rows`` with ruled cell borders, a line of text.

    Text with Chinese characters is set in STSong-Light (UTF-16 codes, ``UniGB-UCS2-H``), the
    rest in Helvetica. ``font_file`` is embedded (Flate-compressed) as STSong's ``/FontFile2``.
    """
    content = _table_content(before, rows, after)
    path.write_bytes(_pdf_bytes(_table_objects(content, font_file)))
    return path


def _cjk(text: str) -> bool:
    return any("\u3400" <= c <= "\u9fff" for c in text)


def _show(x: float, y: float, text: str, size: float = 10) -> str:
    """The operators that set ``text`` at (x, y): STSong (F2) for Chinese, else Helvetica (F1)."""
    if _cjk(text):
        return f"BT /F2 {size:.1f} Tf {x:.1f} {y} Td <{text.encode('utf-16-be').hex()}> Tj ET"
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return f"BT /F1 {size:.1f} Tf {x:.1f} {y} Td ({escaped}) Tj ET"


def _table_content(before: str, rows: list[list[str]], after: str) -> bytes:
    """The page's content stream: the line before, the ruled table, the line after."""
    width = 530 / max(1, max(len(r) for r in rows))
    # A font size at which every cell's text fits inside its borders (Helvetica ~0.55 em a letter).
    longest = max(sum(1.0 if _cjk(c) else 0.6 for c in t) for row in rows for t in row) or 1.0
    size = min(10.0, (width - 8) / longest)
    ops = [_show(40, 720, before)]
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            x, y = 40 + width * c, 650 - 20 * (r + 1)
            ops += [f"{x:.1f} {y} {width:.1f} 20 re S", _show(x + 4, y + 6, cell, size)]
    ops.append(_show(40, 650 - 20 * len(rows) - 40, after))
    return "\n".join(ops).encode("latin-1")


def _table_objects(content: bytes, font_file: bytes) -> list[bytes]:
    """The PDF's objects, numbered from 1: catalog, pages, the two fonts, the page, STSong's
    CID font and descriptor, the content stream and the (possibly empty) embedded font file."""
    import zlib

    packed = zlib.compress(font_file)
    descriptor = b"<< /Type /FontDescriptor /FontName /STSong-Light /Flags 6 /FontBBox [0 -200 1000 900] "
    descriptor += b"/ItalicAngle 0 /Ascent 880 /Descent -120 /CapHeight 880 /StemV 80"
    descriptor += b" /FontFile2 9 0 R >>" if font_file else b" >>"
    return [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Font /Subtype /Type0 /BaseFont /STSong-Light /Encoding /UniGB-UCS2-H /DescendantFonts [6 0 R] >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 7 0 R "
        b"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> >>",
        b"<< /Type /Font /Subtype /CIDFontType0 /BaseFont /STSong-Light "
        b"/CIDSystemInfo << /Registry (Adobe) /Ordering (GB1) /Supplement 4 >> /FontDescriptor 8 0 R >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
        descriptor,
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(packed), packed),
    ]


def _pdf_bytes(objects: list[bytes]) -> bytes:
    """A PDF file of ``objects`` (object 1 the catalog), with its xref table and trailer."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for num, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (num, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)

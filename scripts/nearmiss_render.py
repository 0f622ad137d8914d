"""Documents of the near-miss set as data, written out as Markdown, HTML, DOCX or PDF, and cut into passages.

A document is a title and a list of blocks: a heading (``H``), a paragraph (``P``) or a
table (``T``). The same blocks give the file a user would have (``.md`` with pipe tables,
``.html`` with ``<table>``, ``.docx`` with Word tables, a one-page ``.pdf`` with ruled cells)
and the passages the evaluator pairs are made of (one per section; a table is its own passage,
its header repeated on each piece of at most ``ROWS_PER_PASSAGE`` rows). Used by
``scripts/build_nearmiss.py``.
"""

from __future__ import annotations

import html
import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

ROWS_PER_PASSAGE = 4
# Zip entries get this date, so a rebuilt .docx is byte-identical (python-docx stamps "now").
_ZIP_DATE = (2024, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class H:
    """A section heading (level 2 under the document title)."""

    text: str


@dataclass(frozen=True)
class P:
    """A paragraph."""

    text: str


@dataclass(frozen=True)
class T:
    """A table: a header row, body rows and an optional caption shown above it."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""


Block = H | P | T


@dataclass
class Doc:
    """One file of the set: where it goes (relative to ``data/nearmiss``), its language and company."""

    path: str
    title: str
    lang: str
    company: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def format(self) -> str:
        return Path(self.path).suffix.lstrip(".")


def table(header: str, rows: list[str], caption: str = "") -> T:
    """A table from ``"a | b | c"`` lines (the way a person types one)."""
    split = [tuple(c.strip() for c in line.split("|")) for line in rows]
    head = tuple(c.strip() for c in header.split("|"))
    for r in split:
        if len(r) != len(head):
            raise ValueError(f"row {r} has {len(r)} cells, header {head} has {len(head)}")
    return T(head, tuple(split), caption)


# -- files ---------------------------------------------------------------------------------------
def write(doc: Doc, root: Path) -> Path:
    path = root / doc.path
    path.parent.mkdir(parents=True, exist_ok=True)
    if doc.format == "md":
        path.write_text(to_markdown(doc), "utf-8")
    elif doc.format == "html":
        path.write_text(to_html(doc), "utf-8")
    elif doc.format == "docx":
        path.write_bytes(to_docx(doc))
    elif doc.format == "pdf":
        path.write_bytes(to_pdf(doc))
    else:
        raise ValueError(f"no writer for {doc.path}")
    return path


def to_markdown(doc: Doc) -> str:
    out = [f"# {doc.title}", ""]
    for b in doc.blocks:
        if isinstance(b, H):
            out += [f"## {b.text}", ""]
        elif isinstance(b, P):
            out += [b.text, ""]
        else:
            if b.caption:
                out += [b.caption, ""]
            out.append("| " + " | ".join(b.header) + " |")
            out.append("|" + "|".join("---" for _ in b.header) + "|")
            out += ["| " + " | ".join(r) + " |" for r in b.rows]
            out.append("")
    return "\n".join(out)


def to_html(doc: Doc) -> str:
    e = html.escape
    lang = "zh-CN" if doc.lang == "zh" else "en"
    out = [
        "<!DOCTYPE html>",
        f'<html lang="{lang}">',
        '<head><meta charset="utf-8">',
        f"<title>{e(doc.title)}</title></head>",
        "<body>",
        f"<h1>{e(doc.title)}</h1>",
    ]
    for b in doc.blocks:
        if isinstance(b, H):
            out.append(f"<h2>{e(b.text)}</h2>")
        elif isinstance(b, P):
            out.append(f"<p>{e(b.text)}</p>")
        else:
            out.append("<table>")
            if b.caption:
                out.append(f"  <caption>{e(b.caption)}</caption>")
            out.append("  <thead><tr>" + "".join(f"<th>{e(c)}</th>" for c in b.header) + "</tr></thead>")
            out.append("  <tbody>")
            out += ["    <tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in b.rows]
            out.append("  </tbody>")
            out.append("</table>")
    out += ["</body>", "</html>", ""]
    return "\n".join(out)


def to_docx(doc: Doc) -> bytes:
    import datetime

    import docx

    d = docx.Document()
    props = d.core_properties
    props.title = doc.title
    props.author = doc.company
    props.created = props.modified = datetime.datetime(2024, 1, 1)
    props.last_modified_by = doc.company
    props.revision = 1
    d.add_heading(doc.title, level=1)
    for b in doc.blocks:
        if isinstance(b, H):
            d.add_heading(b.text, level=2)
        elif isinstance(b, P):
            d.add_paragraph(b.text)
        else:
            if b.caption:
                d.add_paragraph(b.caption)
            t = d.add_table(rows=1 + len(b.rows), cols=len(b.header))
            t.style = "Table Grid"
            for j, c in enumerate(b.header):
                t.cell(0, j).text = c
            for i, r in enumerate(b.rows, 1):
                for j, c in enumerate(r):
                    t.cell(i, j).text = c
    buf = io.BytesIO()
    d.save(buf)
    return _fixed_zip(buf.getvalue())


def _fixed_zip(data: bytes) -> bytes:
    """The same archive with every entry dated ``_ZIP_DATE``: reproducible bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=_ZIP_DATE)
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = 0o644 << 16
            dst.writestr(fixed, src.read(info.filename))
    return out.getvalue()


def to_pdf(doc: Doc) -> bytes:
    """A one-page PDF drawn by hand: Helvetica text, a table as text in ruled cells.

    Latin-1 text only (the standard fonts have no CJK glyphs). Nothing but positions says which
    words form a row, as in most PDFs a user has.
    """
    ops: list[str] = []
    y = 842 - 64

    def text(x: float, size: float, line: str, bold: bool = False) -> None:
        line.encode("latin-1")  # fails loudly on characters Helvetica lacks
        safe = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops.append(f"BT /{'F2' if bold else 'F1'} {size} Tf {x:.1f} {y:.1f} Td ({safe}) Tj ET")

    def wrapped(words: str, size: float, width: int = 96) -> None:
        nonlocal y
        line = ""
        for w in words.split():
            if len(line) + len(w) + 1 > width:
                text(56, size, line)
                y -= size * 1.4
                line = ""
            line = f"{line} {w}".strip()
        text(56, size, line)
        y -= size * 1.4 + 6

    text(56, 16, doc.title, bold=True)
    y -= 30
    for b in doc.blocks:
        if isinstance(b, H):
            y -= 4
            text(56, 12, b.text, bold=True)
            y -= 20
        elif isinstance(b, P):
            wrapped(b.text, 10)
        else:
            widths = [max(len(r[j]) for r in (b.header, *b.rows)) * 5.2 + 12 for j in range(len(b.header))]
            for i, row in enumerate((b.header, *b.rows)):
                x = 56.0
                for j, cell in enumerate(row):
                    ops.append(f"{x:.1f} {y - 5:.1f} {widths[j]:.1f} 18 re S")
                    text(x + 5, 9, cell, bold=i == 0)
                    x += widths[j]
                y -= 18
            y -= 14
    if y < 56:
        raise ValueError(f"{doc.path} does not fit on one page")
    stream = "\n".join(ops).encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R /F2 6 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
        b"<< /Title (" + doc.title.encode("latin-1") + b") /Author (" + doc.company.encode("latin-1") + b") >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\n" % (len(objects) + 1, len(objects))
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


# -- passages ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Passage:
    """A piece of a document as the evaluator pairs hold it: one section, or a few rows of a table."""

    doc: str
    lang: str
    company: str
    text: str
    table: bool = False


def table_text(header: tuple[str, ...], rows: tuple[tuple[str, ...], ...], caption: str = "") -> str:
    lines = [caption] if caption else []
    lines.append(" | ".join(header))
    lines += [" | ".join(r) for r in rows]
    return "\n".join(lines)


def passages(doc: Doc) -> list[Passage]:
    """Sections (heading + paragraphs) and table pieces, in document order.

    The first section carries the document title, so a passage names what it is about the way
    a chunk with its title does.
    """
    out: list[Passage] = []
    current: list[str] = [doc.title]  # a heading, then the paragraphs under it

    def flush() -> None:
        if len(current) > 1:  # a heading without text is no passage
            out.append(Passage(doc.path, doc.lang, doc.company, "\n".join(current)))

    for b in doc.blocks:
        if isinstance(b, H):
            flush()
            current = [b.text]
        elif isinstance(b, P):
            current.append(b.text)
        else:
            flush()
            current = [b.caption or doc.title]
            for i in range(0, len(b.rows), ROWS_PER_PASSAGE):
                chunk = b.rows[i : i + ROWS_PER_PASSAGE]
                out.append(Passage(doc.path, doc.lang, doc.company, table_text(b.header, chunk, current[0]), True))
    flush()
    return out

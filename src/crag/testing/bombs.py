"""Hostile documents for tests and benchmarks: files that expand far beyond their size.

- :func:`docx_bomb`: a valid ``.docx`` whose ``word/document.xml`` inflates to ``inflate_mb``
  megabytes (the 324 KB / 111 MB file of issue 33 is ``docx_bomb(path, 111)``);
  ``paragraph_chars`` small gives an element bomb instead (many tiny paragraphs).
- :func:`html_tag_bomb`: an HTML file with ``tags`` elements in a few megabytes.
- :func:`pdf_stream_bomb`: a one-page PDF whose content stream inflates to ``inflate_mb``.

The documents are written as streams (never held whole), so making a 111 MB bomb costs
about a second and little memory.

### Usage example
>>> path = docx_bomb(tmp_path / "bomb.docx", inflate_mb=111)   # doctest: +SKIP
>>> path.stat().st_size < 1_000_000                            # doctest: +SKIP
True
"""

from __future__ import annotations

import io
import random
import zipfile
import zlib
from pathlib import Path

__all__ = ["docx_bomb", "html_tag_bomb", "pdf_stream_bomb"]

_WORDS = ("alpha", "beta", "gamma", "delta", "kappa", "omega", "sigma", "theta", "北京", "上海")


def docx_bomb(path: Path, inflate_mb: float, *, paragraph_chars: int = 2000, seed: int = 33) -> Path:
    """A ``.docx`` that python-docx opens, whose document part inflates to ``inflate_mb`` MB."""
    import docx

    blank = io.BytesIO()
    document = docx.Document()
    document.add_paragraph("seed")
    document.save(blank)
    source = zipfile.ZipFile(io.BytesIO(blank.getvalue()))
    xml = source.read("word/document.xml").decode("utf-8")
    head, tail = xml.split("<w:body>")[0] + "<w:body>", "</w:body></w:document>"
    rng = random.Random(seed)
    words = " ".join(rng.choice(_WORDS) for _ in range(max(1, paragraph_chars // 6)))
    paragraph = f"<w:p><w:r><w:t>{words}</w:t></w:r></w:p>".encode()
    target = int(inflate_mb * 1_000_000)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for item in source.infolist():
            if item.filename != "word/document.xml":
                out.writestr(item, source.read(item.filename))
        with out.open("word/document.xml", "w", force_zip64=True) as part:
            part.write(head.encode())
            written = 0
            while written < target:
                part.write(paragraph)
                written += len(paragraph)
            part.write(tail.encode())
    return path


def html_tag_bomb(path: Path, tags: int) -> Path:
    """An HTML page of ``tags`` tiny elements (about 10 bytes each)."""
    with path.open("w", encoding="utf-8") as f:
        f.write("<html><head><title>bomb</title></head><body>")
        for n in range(tags):
            f.write(f"<b>{_WORDS[n % len(_WORDS)]}</b>")
        f.write("</body></html>")
    return path


def pdf_stream_bomb(path: Path, inflate_mb: float) -> Path:
    """A valid one-page PDF whose Flate-compressed content stream inflates to ``inflate_mb`` MB."""
    line = b"BT /F1 12 Tf 72 720 Td (bomb) Tj ET\n"
    raw = line * (int(inflate_mb * 1_000_000) // len(line) + 1)
    stream = zlib.compress(raw, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for num, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (num, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path

"""Read a file as a stream of chunks, so a large file never sits in memory whole.

``scan`` hashes a file in blocks and checks on the way whether it is clean UTF-8 text;
``file_chunks`` then yields the file's chunks in order, each with the byte offset reached.
Plain-text and Markdown files that are clean UTF-8 are decoded block by block
(``BLOCK_BYTES``), cut at the last paragraph break (else line break, sentence end or space)
so that chunking a block gives the chunks the whole text would. Plain text in another
encoding (GB18030, UTF-16, Big5, …) streams the same way when the encoding chosen from its
first block (:func:`crag.ingest.load.text_encoding`) decodes the whole file. JSONL files that
are clean UTF-8 are read line by line (memory bounded by the longest line). PDF, DOCX and
HTML files are read piece by piece (:mod:`crag.ingest.formats`: PDF page by page, DOCX
paragraph by paragraph, HTML string by string from its parsed tree) and cut into blocks where
chunking starts afresh (:mod:`crag.ingest.blocks`), so their chunks are exactly those of a
whole read. Text whose encoding is unclear is read whole by :func:`crag.ingest.load.load_file`.
Files below ``STREAM_MIN_BYTES`` are always read whole, so small files chunk exactly as they
always did.

>>> from pathlib import Path
>>> from crag.ingest.stream import scan, file_chunks
>>> info = scan(Path("big.txt"))                               # doctest: +SKIP
>>> for chunk, offset in file_chunks(Path("big.txt"), info, size=400, overlap=60):  # doctest: +SKIP
...     print(chunk.id, offset, "of", info.size)
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from crag.errors import UnsupportedFileError
from crag.ingest.chunk import chunk_id, chunk_section, normalize_whitespace, strip_controls
from crag.ingest.files import open_regular
from crag.ingest.formats import read_docx, read_pdf
from crag.ingest.limits import DEFAULT_LIMITS, InputLimits, check_markup
from crag.ingest.load import (
    SourceDoc,
    html_markup,
    jsonl_docs,
    load_file,
    no_valid_jsonl,
    read_markdown,
    text_encoding,
)
from crag.ingest.markdown import markdown_pieces, text_title
from crag.ingest.sections import Extracted, Outline, Piece, section_blocks, section_texts
from crag.metadata import fingerprint
from crag.types import Chunk

__all__ = ["BLOCK_BYTES", "STREAM_MIN_BYTES", "FileScan", "file_chunks", "scan"]

BLOCK_BYTES = 1 << 20  # read and chunk 1 MiB of a large text file at a time
STREAM_MIN_BYTES = 1 << 20  # smaller files are read whole (exactly the chunks of load_file)
_TEXT_SUFFIXES = {".txt", ".md", ".markdown"}
_FORMAT_SUFFIXES = {".pdf", ".docx", ".html", ".htm"}  # read piece by piece (crag.ingest.formats)
_STREAM_SUFFIXES = _TEXT_SUFFIXES | {".jsonl"}
_MARKDOWN = {".md", ".markdown"}
# Cut points for a block, best first: a paragraph break, a line break, a sentence end, a space.
_CUTS = (re.compile(r"\n[^\S\n]*\n"), re.compile(r"\n"), re.compile(r"[。！？!?；;.]"), re.compile(r"\s"))
_CUT_FLOOR = 0.5  # a cut must leave at least half the block, or the next cut kind is tried


@dataclass(frozen=True)
class FileScan:
    """What one pass over a file's bytes found: its hash, its size, and whether it streams."""

    sha256: str
    size: int
    utf8: bool  # decodes as UTF-8 (BOM allowed) and holds no NUL byte
    encoding: str = ""  # a large text file's codec when it streams in another one ("" otherwise)


def scan(path: Path, block: int = BLOCK_BYTES) -> FileScan:
    """Hash ``path`` block by block, checking on the way that it is clean UTF-8 text.

    A large text file whose first block is not UTF-8 is checked, in the same pass, against
    the encoding that block reads as (:func:`~crag.ingest.load.text_encoding`): when every
    byte decodes, it streams in that encoding.
    """
    digest = hashlib.sha256()
    utf8, other = _Decodes("utf-8-sig"), None
    size = 0
    with open_regular(path) as fh:  # a FIFO or /dev/zero is refused before the first read
        large_text = path.suffix.lower() in _TEXT_SUFFIXES and os.fstat(fh.fileno()).st_size >= STREAM_MIN_BYTES
        while data := fh.read(block):
            digest.update(data)
            utf8.feed(data)
            if size == 0 and large_text and not utf8.ok:
                other = _Decodes.of_first_block(path, data)
            if other is not None:
                other.feed(data)
            size += len(data)
    utf8.feed(b"", final=True)  # a multi-byte character cut off at the end
    if other is not None:
        other.feed(b"", final=True)
    encoding = other.codec if other is not None and other.ok else ""
    return FileScan(digest.hexdigest(), size, utf8.ok, encoding)


class _Decodes:
    """Whether a file's blocks, fed in order, decode in ``codec`` (and hold no NUL byte,
    except in UTF-16/32, where NUL bytes belong)."""

    def __init__(self, codec: str) -> None:
        self.codec, self.ok = codec, True
        self._decoder = codecs.getincrementaldecoder(codec)()
        self._nul_ok = codecs.lookup(codec).name.startswith(("utf-16", "utf-32"))

    @classmethod
    def of_first_block(cls, path: Path, data: bytes) -> _Decodes | None:
        """A check for the encoding ``data`` reads as, or None when that is unclear."""
        try:
            return cls(text_encoding(path, data))
        except (UnsupportedFileError, LookupError):
            return None

    def feed(self, data: bytes, *, final: bool = False) -> None:
        if not self.ok:
            return
        try:
            self._decoder.decode(data, final=final)
        except UnicodeDecodeError:
            self.ok = False
        self.ok = self.ok and (self._nul_ok or b"\x00" not in data)


def file_chunks(
    path: Path,
    info: FileScan,
    *,
    size: int,
    overlap: int,
    warnings: list[str] | None = None,
    metadata: Mapping[str, str] | None = None,
    limits: InputLimits = DEFAULT_LIMITS,
) -> Iterator[tuple[Chunk, int]]:
    """Chunks of ``path`` in file order, each with the byte offset read so far (for progress).

    ``metadata`` (``crag ingest --meta``) is given to every document of the file; a
    document's own fields (front matter, JSONL) win where both name a key.

    The same passage twice in one file is yielded once (ids are content hashes). Raises
    ``UnsupportedFileError`` for a file that cannot be read: before yielding anything, except
    for a large PDF or DOCX that fails part-way (a broken page far in), whose chunks up to there
    have been yielded, as a whole read would have raised for the file. Loader warnings (bad
    JSONL lines) are appended to ``warnings``. A document that would expand beyond ``limits``
    (a decompression bomb) raises before it is parsed.
    """
    seen: set[int] = set()  # 64 bits of each chunk id (a small int, not a 32-char string)
    warnings = warnings if warnings is not None else []
    if info.size >= STREAM_MIN_BYTES and path.suffix.lower() in _FORMAT_SUFFIXES:
        docs = _document_blocks(path, info.size, size=size, overlap=overlap, limits=limits)
    elif not _streams(path, info):
        docs = _whole(path, info.size, warnings, limits)
    elif path.suffix.lower() == ".jsonl":
        docs = _jsonl_lines(path, warnings)
    else:
        docs = _text_blocks(path, "utf-8-sig" if info.utf8 else info.encoding)
    for doc, start, end in docs:
        pieces = chunk_section(doc.text, doc.section, size=size, overlap=overlap)
        meta = {**(metadata or {}), **doc.metadata}
        if doc.section:  # the headings above the text are the chunk's own: they win over --meta
            meta["section"] = doc.section
        tag = fingerprint(meta)
        for n, text in enumerate(pieces, start=1):
            cid = chunk_id(doc.source, text, tag)
            key = int(cid[:16], 16)
            if key in seen:
                continue
            seen.add(key)
            offset = start + (end - start) * n // len(pieces)
            yield Chunk(cid, text, doc.source, doc.title, doc.url, dict(meta)), offset


def _streams(path: Path, info: FileScan) -> bool:
    if info.size < STREAM_MIN_BYTES or path.suffix.lower() not in _STREAM_SUFFIXES:
        return False
    return info.utf8 or (bool(info.encoding) and path.suffix.lower() != ".jsonl")


def _whole(path: Path, size: int, warnings: list[str], limits: InputLimits) -> Iterator[tuple[SourceDoc, int, int]]:
    docs, warns = load_file(path, limits)
    warnings += warns
    # JSONL: progress moves document by document through the file's bytes.
    for n, doc in enumerate(docs):
        yield doc, size * n // len(docs), size * (n + 1) // len(docs)


def _document_blocks(
    path: Path, total: int, *, size: int, overlap: int, limits: InputLimits
) -> Iterator[tuple[SourceDoc, int, int]]:
    """A PDF, DOCX or HTML file's text in blocks that chunk exactly like the whole text, with
    each block's byte range (pages, paragraphs or characters read, scaled to the file's size)."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        doc = read_pdf(path, limits)
    elif suffix == ".docx":
        doc = read_docx(path, limits)
    else:
        doc = _html(path, limits)
    source = str(path.resolve())
    title = normalize_whitespace(strip_controls(doc.title)) or path.stem
    done, any_text = 0, False
    for section, text, fraction in section_blocks(doc.pieces, size=size, overlap=overlap, budget=BLOCK_BYTES):
        reached = max(done, min(total, int(total * fraction)))
        any_text = True
        yield SourceDoc(source=source, text=text, title=title, section=section), done, reached
        done = reached
    if not any_text:
        hint = "scanned pages need OCR first" if suffix == ".pdf" else "add text or remove the file"
        raise UnsupportedFileError(f"{path}: no extractable text; {hint}")


def _html(path: Path, limits: InputLimits) -> Extracted:
    """An HTML file's text as pieces; the markup is decoded as a whole read decodes it."""
    with open_regular(path) as fh:
        data = fh.read()
    if not data.strip():
        raise UnsupportedFileError(f"{path}: file is empty; add text or remove it")
    check_markup(path, data, limits)
    from crag.ingest.html_text import read_html  # bs4 is imported when a page is read, not with crag

    return read_html(html_markup(path, data))


def _jsonl_lines(path: Path, warnings: list[str]) -> Iterator[tuple[SourceDoc, int, int]]:
    """The documents of a UTF-8 JSONL file, one line at a time, with each line's byte range."""
    span = [0, 0]  # byte range of the line last handed to the parser

    def lines(fh: BinaryIO) -> Iterator[str]:
        for n, raw in enumerate(fh):
            span[:] = [span[1], span[1] + len(raw)]
            text = raw.decode("utf-8")
            yield text.removeprefix("\ufeff") if n == 0 else text

    source = str(path.resolve())
    any_doc = False
    with open_regular(path) as fh:
        for doc in jsonl_docs(path, source, lines(fh), warnings):
            any_doc = True
            yield doc, span[0], span[1]
    if not any_doc:
        raise no_valid_jsonl(path, warnings)


def _text_blocks(path: Path, codec: str) -> Iterator[tuple[SourceDoc, int, int]]:
    """Paragraph-aligned blocks of a text file in ``codec`` as documents, with their byte range.

    The text is processed as ``load_file`` would (controls stripped, whitespace normalised,
    Markdown front matter and title taken from the first block), one block at a time.
    """
    source = str(path.resolve())
    markdown = path.suffix.lower() in _MARKDOWN
    head = _Head(title=path.stem)
    done, any_text = 0, False
    with open_regular(path) as fh:
        for n, (text, reached) in enumerate(_decoded_blocks(fh, codec)):
            if n == 0:
                text = head.read(text, markdown=markdown)
            pieces = markdown_pieces(text, head.outline) if markdown else iter([Piece(text, 1.0)])
            for section, part, start, end in _shared_out(list(section_texts(pieces)), done, reached):
                any_text = True
                doc = SourceDoc(
                    source=source, text=part, title=head.title, url=head.url, metadata=head.meta, section=section
                )
                yield doc, start, end
            done = reached
    if not any_text:
        raise UnsupportedFileError(f"{path}: no extractable text; add text or remove the file")


def _decoded_blocks(fh: BinaryIO, codec: str) -> Iterator[tuple[str, int]]:
    """The file's text in ``codec``, block by block (cut at good points), with the bytes handed on so far."""
    decoder = codecs.getincrementaldecoder(codec)()
    unit = _without_bom(codec)  # byte counts of pending text must not include a BOM
    pending, reached = "", 0
    while True:
        data = fh.read(BLOCK_BYTES)
        final = not data
        pending += decoder.decode(data, final=final).replace("\r\n", "\n")
        if not final and pending.endswith("\r"):  # "\r\n" may straddle two reads
            pending, carry = pending[:-1], "\r"
        else:
            carry = ""
        text, pending = (pending, "") if final else _cut(pending)
        pending += carry
        # Bytes of the text handed on so far: what was read minus what is still pending.
        reached = max(reached, fh.tell() - len(pending.encode(unit, "replace")))
        yield text, reached
        if final:
            return


@dataclass
class _Head:
    """What a text file's first block says of the whole file: its title, and for Markdown its
    front matter (url, metadata) and the outline its headings start."""

    title: str
    url: str = ""
    meta: dict[str, str] = field(default_factory=dict)
    outline: Outline = field(default_factory=Outline)

    def read(self, text: str, *, markdown: bool) -> str:
        """Take the title (and front matter) from the first block; the text that is left."""
        if markdown:
            text, heading, self.url, self.meta = read_markdown(text)
            self.title = normalize_whitespace(strip_controls(heading)) or self.title
            self.outline = Outline(heading)
        else:
            heading, text = text_title(text)
            self.title = normalize_whitespace(strip_controls(heading)) or self.title
        return text


def _shared_out(sections: list[tuple[str, str, float]], done: int, reached: int) -> Iterator[tuple[str, str, int, int]]:
    """``(section, text, start, end)``: the block's bytes ``done``..``reached`` shared out by text length."""
    length = sum(len(t) for _, t, _ in sections)
    so_far = 0
    for section, part, _ in sections:
        start = done + (reached - done) * so_far // length
        so_far += len(part)
        end = done + (reached - done) * so_far // length
        yield section, part, start, end


def _without_bom(codec: str) -> str:
    """The codec that encodes like ``codec`` but writes no byte-order mark."""
    name = codecs.lookup(codec).name
    if name == "utf-8-sig":
        return "utf-8"
    return "utf-16-le" if name.startswith("utf-16") else "utf-32-le" if name.startswith("utf-32") else codec


def _cut(text: str) -> tuple[str, str]:
    """Split ``text`` after its last good cut point: (complete part, rest carried over)."""
    floor = int(len(text) * _CUT_FLOOR)
    for pattern in _CUTS:
        ends = [m.end() for m in pattern.finditer(text, floor)]
        if ends:
            return text[: ends[-1]], text[ends[-1] :]
    return text, ""

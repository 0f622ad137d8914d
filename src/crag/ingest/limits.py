"""Bounds on what a document may expand to before it is parsed: decompression bombs are refused cheaply.

A 324 KB ``.docx`` can hold a ``document.xml`` that inflates to 111 MB, and python-docx
builds the whole tree (2.3 GB, two minutes); 19 MB of HTML with two million tags takes
BeautifulSoup past 2 GB. So before a parser sees a file:

- **DOCX** (a ZIP): the parts' declared sizes may add up to at most the file's own size
  plus ``max_unpacked_bytes`` (what the file *grows* by: embedded pictures barely grow, XML
  grows ten-fold or more), the archive holds at most ``MAX_ZIP_ENTRIES`` parts, and its XML
  parts, read as a stream (never held), open at most ``max_elements`` elements. Reading a part
  never yields more than its declared size (``zipfile`` stops there and checks the CRC), so
  the declared sizes are a real bound.
- **HTML**: at most ``max_unpacked_bytes`` of markup and ``max_elements`` tags.
- **PDF**: every stream pypdf decodes is capped at ``max_unpacked_bytes``
  (:func:`pdf_limits`); pages are read one at a time.

A file over a limit is skipped with a one-line reason naming the setting to raise.

>>> limits = InputLimits(max_unpacked_bytes=50_000_000, max_elements=500_000)
>>> check_markup(Path("page.html"), b"<p>hello</p>", limits)   # within the limits: returns
"""

from __future__ import annotations

import contextlib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from crag.errors import UnsupportedFileError

__all__ = ["DEFAULT_LIMITS", "MAX_ZIP_ENTRIES", "InputLimits", "check_markup", "check_zip", "pdf_limits"]

MAX_ZIP_ENTRIES = 10_000  # a Word document holds a few dozen parts; thousands of pictures at most
_READ = 1 << 20


@dataclass(frozen=True)
class InputLimits:
    """How far one input file may expand (settings ``[ingest]``, docs/configuration.md)."""

    max_unpacked_bytes: int = 50 * 1_000_000
    max_elements: int = 500_000


DEFAULT_LIMITS = InputLimits()


def check_zip(path: Path, fh: BinaryIO, limits: InputLimits) -> None:
    """Refuse a ZIP-based document (``.docx``) that would unpack beyond ``limits``; reads XML parts as a stream."""
    try:
        archive = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise UnsupportedFileError(f"{path}: corrupt or unreadable DOCX ({type(exc).__name__}); re-save it") from None
    with archive:
        entries = archive.infolist()
        if len(entries) > MAX_ZIP_ENTRIES:
            raise UnsupportedFileError(
                f"{path}: holds {len(entries):,} parts, more than {MAX_ZIP_ENTRIES:,}; not a document crag reads"
            )
        fh.seek(0, 2)
        growth = sum(e.file_size for e in entries) - fh.tell()
        if growth > limits.max_unpacked_bytes:
            raise _too_big(path, f"unpacks to {_mb(growth)} more than its size", limits)
        elements = 0
        for entry in entries:
            if entry.filename.lower().endswith((".xml", ".rels")):
                elements += _count_elements(path, archive, entry, limits.max_elements - elements)
        if elements > limits.max_elements:
            raise _too_many(path, elements, limits)


def check_markup(path: Path, data: bytes, limits: InputLimits) -> None:
    """Refuse HTML markup larger than ``max_unpacked_bytes`` or with more than ``max_elements`` tags."""
    if len(data) > limits.max_unpacked_bytes:
        raise _too_big(path, f"holds {_mb(len(data))} of markup", limits)
    tags = _start_tags(data)
    if tags > limits.max_elements:
        raise _too_many(path, tags, limits)


@contextlib.contextmanager
def pdf_limits(limits: InputLimits) -> Iterator[None]:
    """While open, pypdf decodes no stream beyond ``max_unpacked_bytes`` (pypdf >= 6.3 has the setting;
    older versions keep their own 75 MB caps)."""
    import pypdf

    apply = getattr(pypdf, "apply_configuration", None)
    if apply is None:
        yield
        return
    cap = limits.max_unpacked_bytes
    with apply(
        maximum_declared_stream_length=cap,
        array_based_stream_maximum_output_length=cap,
        lzw_maximum_output_length=cap,
        run_length_maximum_output_length=cap,
        zlib_maximum_output_length=cap,
    ):
        yield


def pdf_limit_error(path: Path, exc: Exception, limits: InputLimits) -> UnsupportedFileError | None:
    """The one-line refusal for pypdf's ``LimitReachedError``; ``None`` for any other error."""
    if type(exc).__name__ != "LimitReachedError":
        return None
    why = " ".join(str(exc).split()).rstrip(".")
    if "decompress" in why.lower() or "length" in why.lower():
        return _too_big(path, "has a stream that decodes beyond the limit", limits)
    return UnsupportedFileError(f"{path}: too costly to parse ({why}); refused as a possible PDF bomb")


def _count_elements(path: Path, archive: zipfile.ZipFile, entry: zipfile.ZipInfo, room: int) -> int:
    """Start tags in one part, read in blocks; stops counting once past ``room``."""
    count, carry = 0, b""
    try:
        with archive.open(entry) as part:
            while block := part.read(_READ):
                data = carry + block
                count += _start_tags(data[:-1])  # the last byte may begin a tag split across blocks
                carry = data[-1:]
                if count > room:
                    return count
    except (zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError) as exc:
        raise UnsupportedFileError(f"{path}: corrupt or unreadable DOCX ({type(exc).__name__}); re-save it") from None
    return count + _start_tags(carry)


def _start_tags(data: bytes) -> int:
    # Every element opens with "<" and closes with "</" (or "/>", counted once): C-speed counts.
    return data.count(b"<") - data.count(b"</")


def _mb(n: int) -> str:
    return f"{n / 1_000_000:,.0f} MB" if n >= 1_000_000 else f"{n:,} bytes"


def _too_big(path: Path, what: str, limits: InputLimits) -> UnsupportedFileError:
    return UnsupportedFileError(
        f"{path}: {what}; the limit is {_mb(limits.max_unpacked_bytes)} "
        "(ingest.max_unpacked_mb): refused as a possible decompression bomb, raise the limit if you trust it"
    )


def _too_many(path: Path, n: int, limits: InputLimits) -> UnsupportedFileError:
    return UnsupportedFileError(
        f"{path}: more than {limits.max_elements:,} elements (ingest.max_elements, counted {n:,}); "
        "refused as too costly to parse, raise the limit if you trust it"
    )

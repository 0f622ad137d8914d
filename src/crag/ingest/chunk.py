"""Sentence-aware chunking for Chinese and English text, plus content-hash chunk ids.

Chunks are built from whole sentences (``crag.text.split_sentences``) and keep the
original separators between them, so Chinese stays unspaced and English keeps its
spaces and line breaks. Each chunk is a slice of the (whitespace-normalised) input.

A document's section (the headings above a passage, :mod:`crag.ingest.sections`) heads each
of its chunks on a line of its own (:func:`chunk_section`): the passage keeps saying what it is
about however it is cut, and the heading is never the start of its first sentence.

>>> from crag.ingest.chunk import chunk_text, chunk_id
>>> chunk_text("One. Two. Three.", size=12, overlap=4)
['One. Two.', 'Two. Three.']
>>> len(chunk_id("a.txt", "One."))
32
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from crag.text import split_sentences

__all__ = [
    "chunk_id",
    "chunk_section",
    "chunk_spans",
    "chunk_text",
    "normalize_whitespace",
    "section_body_size",
    "section_crumb",
    "strip_controls",
]

_HSPACE = re.compile(r"[^\S\n]+")  # any whitespace except newline (incl. NBSP, ideographic space)
_SPACE_AROUND_NL = re.compile(r" *\n *")
_MANY_NL = re.compile(r"\n{3,}")
_PARA_BREAK = re.compile(r"\n\s*\n")
_ANY_SPACE = re.compile(r"\s+")
# Hard-split cut points for over-long sentences, best first: clause punctuation, then a space.
_CLAUSE_MARKS = "，、,;；:：)）"
# Unicode category Cc (C0, DEL, C1) except tab, newline and carriage return; a regex, since a
# per-character loop costs seconds on a 100 MB file.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]")
SECTION_JOIN = " > "  # between the headings of a section path: "Products > Yunque S5"


def strip_controls(text: str) -> str:
    r"""Form feeds (PDF page breaks) become paragraph breaks; other control characters go.

    >>> strip_controls("a\fb\x00c\x85d")
    'a\n\nbcd'
    """
    return _CONTROLS.sub("", text.replace("\f", "\n\n"))


def normalize_whitespace(text: str) -> str:
    """Collapse runs of spaces/tabs, trim lines, allow at most one blank line, strip the ends."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _HSPACE.sub(" ", text)
    text = _SPACE_AROUND_NL.sub("\n", text)
    return _MANY_NL.sub("\n\n", text).strip()


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence in ``text``; sentences are stripped substrings, found in order."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for sent in split_sentences(text):
        start = text.find(sent, pos)
        if start < 0:  # defensive: split_sentences only strips, so this should not happen
            continue
        spans.append((start, start + len(sent)))
        pos = start + len(sent)
    return spans


def _hard_split(text: str, start: int, end: int, size: int) -> list[tuple[int, int]]:
    """Cut one over-long sentence into pieces of at most ``size`` characters.

    A cut lands just after clause punctuation or at a space in the last 40% of the window when
    there is one, so words and clauses stay intact; otherwise it falls exactly at ``size``.
    """
    pieces: list[tuple[int, int]] = []
    pos = start
    while end - pos > size:
        window = text[pos : pos + size]
        floor = int(size * 0.6)
        cut = max(window.rfind(m, floor) + 1 for m in _CLAUSE_MARKS)
        if cut <= floor:
            space = window.rfind(" ", floor)
            cut = space if space > floor else size
        piece_end = pos + cut
        while piece_end > pos and text[piece_end - 1].isspace():
            piece_end -= 1
        pieces.append((pos, piece_end))
        pos += cut
        while pos < end and text[pos].isspace():
            pos += 1
    if pos < end:
        pieces.append((pos, end))
    return pieces


def chunk_text(text: str, *, size: int = 400, overlap: int = 60) -> list[str]:
    """Sentence-aware chunks of at most ``size`` characters (see module docstring).

    Whole sentences are packed until the next one would exceed ``size``. Trailing whole
    sentences of at most ``overlap`` characters are repeated at the start of the next chunk,
    except after a paragraph break (a natural cut needs no bridging context). A new paragraph
    starts a new chunk once the current one holds at least half of ``size``. A sentence longer
    than ``size`` is hard-split. Never returns empty chunks; the output is deterministic.
    """
    text = normalize_whitespace(text)
    return [c for c in (text[start:end] for start, end in chunk_spans(text, size=size, overlap=overlap)) if c.strip()]


def chunk_spans(text: str, *, size: int = 400, overlap: int = 60) -> list[tuple[int, int]]:
    """``(start, end)`` of each chunk :func:`chunk_text` makes, in ``text`` already normalised
    with :func:`normalize_whitespace`.

    Streaming readers use the positions to cut a text where chunking starts afresh (a chunk
    that begins after a paragraph break carries no overlap), so the chunks before the cut are
    exactly those of the whole text.
    """
    if size <= 0:
        raise ValueError(f"chunk size must be positive, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"chunk overlap must be in [0, size), got {overlap} with size {size}")
    units: list[tuple[int, int]] = []
    for start, end in _sentence_spans(text):
        units.extend(_hard_split(text, start, end, size) if end - start > size else [(start, end)])

    def span_len(first: int, last: int) -> int:
        return units[last][1] - units[first][0]

    spans: list[tuple[int, int]] = []
    current: list[int] = []  # indices into units, always contiguous
    for i in range(len(units)):
        if current:
            new_para = _PARA_BREAK.search(text, units[i - 1][1], units[i][0]) is not None
            too_long = span_len(current[0], i) > size
            if too_long or (new_para and span_len(current[0], current[-1]) >= size / 2):
                spans.append((units[current[0]][0], units[current[-1]][1]))
                carry = [] if new_para else _overlap_tail(current, units, overlap)
                while carry and span_len(carry[0], i) > size:
                    carry.pop(0)
                current = carry
        current.append(i)
    if current:
        spans.append((units[current[0]][0], units[current[-1]][1]))
    return spans


def _overlap_tail(current: list[int], units: list[tuple[int, int]], overlap: int) -> list[int]:
    """Trailing unit indices spanning at most ``overlap`` chars; never the whole chunk."""
    end = units[current[-1]][1]
    tail: list[int] = []
    for idx in reversed(current[1:]):
        if end - units[idx][0] > overlap:
            break
        tail.insert(0, idx)
    return tail


def section_crumb(section: str, size: int) -> str:
    """The line that heads each chunk of ``section``: its deepest headings within a quarter of ``size``.

    >>> section_crumb("Catalogue > Phones > Yunque S5 > Shipments", 100)
    'Yunque S5 > Shipments'
    """
    if not section or size < 40:
        return ""
    room = size // 4
    parts = section.split(SECTION_JOIN)
    crumb = parts[-1]
    for part in reversed(parts[:-1]):
        wider = f"{part}{SECTION_JOIN}{crumb}"
        if len(wider) > room:
            break
        crumb = wider
    return crumb if len(crumb) <= room else crumb[: room - 1].rstrip() + "…"


def section_body_size(section: str, size: int) -> int:
    """Characters left for a chunk's text under its section line (``size`` without a section)."""
    crumb = section_crumb(section, size)
    return size - len(crumb) - 2 if crumb else size


def chunk_section(text: str, section: str = "", *, size: int = 400, overlap: int = 60) -> list[str]:
    """Chunks of one section's ``text`` (:func:`chunk_text`), each headed by the section's line.

    Every chunk stays within ``size``: the text is cut to :func:`section_body_size`.

    >>> chunk_section("The battery holds 5200 mAh.", "Yunque S5 > Battery")
    ['Yunque S5 > Battery\\n\\nThe battery holds 5200 mAh.']
    """
    crumb = section_crumb(section, size)
    body = section_body_size(section, size)
    chunks = chunk_text(text, size=body, overlap=min(overlap, body - 1))
    return [f"{crumb}\n\n{c}" for c in chunks] if crumb else chunks


def chunk_id(source: str, text: str, meta: str = "") -> str:
    """Content-hash id: sha256 of ``source`` + NUL + normalised text, hex, first 32 chars.

    Text is NFC-normalised and whitespace-collapsed first, so re-ingesting the same file
    (even re-wrapped) yields the same ids and the store can upsert instead of duplicating.
    ``meta`` is the fingerprint of the chunk's metadata (:func:`crag.metadata.fingerprint`),
    "" for none: a chunk whose metadata changed is a new chunk, so every store gets the new
    metadata (a known id is never rewritten).
    """
    norm = _ANY_SPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()
    tail = f"\0{meta}" if meta else ""
    return hashlib.sha256(f"{source}\0{norm}{tail}".encode()).hexdigest()[:32]

"""A document's headings as sections: the text under a heading is chunked on its own, headed by it.

Readers (Markdown, HTML, DOCX) do not put a heading into the text, where it would be glued to
the first sentence after it ("# Wang Lei (engineer)" + "Wang Lei (born 1984) is…" read as one
sentence). They tell an :class:`Outline` about it instead, and each :class:`Piece` of text they
yield carries the section it sits in: the path of headings above it ("Products > Yunque S5"),
without the heading that is the document's own title. A table's caption adds a last step for
the table's rows.

Consecutive pieces of one section form one text. Chunking starts afresh at each section, each
chunk is headed by the section's line (:func:`crag.ingest.chunk.chunk_section`) and carries the
whole path as its ``section`` metadata. :func:`section_texts` gives the texts of a whole read;
:func:`section_blocks` the same texts in bounded blocks (:func:`crag.ingest.blocks.exact_blocks`),
which chunk exactly like them.

>>> outline = Outline(title="Wang Lei (engineer)")
>>> outline.heading(1, "Wang Lei (engineer)"); outline.section
''
>>> outline.heading(2, "Career"); outline.heading(3, "2010–2020"); outline.section
'Career > 2010–2020'
>>> outline.heading(2, "Family"); outline.section, outline.captioned("Children")
('Family', 'Family > Children')
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from crag.ingest.blocks import exact_blocks
from crag.ingest.chunk import SECTION_JOIN, normalize_whitespace, section_body_size, strip_controls

__all__ = ["MAX_SECTION_CHARS", "Extracted", "Outline", "Piece", "section_blocks", "section_texts"]

MAX_SECTION_CHARS = 500  # a section path kept in metadata; a longer one keeps its deepest headings


class Piece(NamedTuple):
    """Raw text read from a document, the fraction of it read so far, and the section it is in."""

    text: str
    done: float
    section: str = ""


@dataclass
class Extracted:
    """A document's title and its text as pieces, in order (:mod:`crag.ingest.formats`)."""

    title: str
    pieces: Iterator[Piece]


class Outline:
    """The headings met so far, and so the section of the text that follows them.

    A heading of level ``n`` ends every heading of level ``n`` or deeper. The first heading
    that reads like the document's ``title`` is the title, not a section: the text under it
    has none (it is known by the title already).
    """

    def __init__(self, title: str = "") -> None:
        self.title = " ".join(title.split())
        self._title_met = False
        self._path: list[tuple[int, str]] = []

    def heading(self, level: int, text: str) -> None:
        """A heading of ``level`` (1 for the top) reading ``text``."""
        text = " ".join(text.split())
        if not text:
            return
        if not self._title_met and text == self.title:
            self._title_met = True
            self._path = []
            return
        self._path = [(lv, t) for lv, t in self._path if lv < level] + [(level, text)]

    @property
    def section(self) -> str:
        return _capped(SECTION_JOIN.join(t for _, t in self._path))

    def captioned(self, caption: str) -> str:
        """The section of a table with ``caption``: the caption is its last step."""
        caption = " ".join(caption.split())
        if not caption:
            return self.section
        return _capped(SECTION_JOIN.join([t for _, t in self._path] + [caption]))


def _capped(path: str) -> str:
    if len(path) <= MAX_SECTION_CHARS:
        return path
    return "…" + path[len(path) - MAX_SECTION_CHARS + 1 :]


def section_texts(pieces: Iterable[Piece]) -> Iterator[tuple[str, str, float]]:
    """``(section, text, fraction read)`` for each run of pieces in one section, read whole.

    The text is cleaned as a whole read cleans it (controls stripped, whitespace normalised);
    a run with no visible text gives nothing.
    """
    for section, run in itertools.groupby(pieces, key=lambda p: p.section):
        parts = list(run)
        text = normalize_whitespace(strip_controls("".join(p.text for p in parts)))
        if text:
            yield section, text, parts[-1].done


def section_blocks(
    pieces: Iterable[Piece], *, size: int, overlap: int, budget: int
) -> Iterator[tuple[str, str, float]]:
    """``(section, block, fraction read)``: :func:`section_texts` cut into blocks of about ``budget``
    characters whose chunks (:func:`crag.ingest.chunk.chunk_section`) are exactly those of the
    whole texts."""
    for section, run in itertools.groupby(pieces, key=lambda p: p.section):
        body = section_body_size(section, size)
        raw = ((p.text, p.done) for p in run)
        for text, done in exact_blocks(raw, size=body, overlap=min(overlap, body - 1), budget=budget):
            yield section, text, done

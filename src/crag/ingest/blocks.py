"""Cut a document read piece by piece into blocks that chunk exactly like the whole text.

:func:`exact_blocks` gathers raw text pieces (a PDF's pages, a DOCX's paragraphs, an HTML
page's strings) until it holds ``budget`` characters, cleans them as a whole read would
(controls stripped, whitespace normalised), and cuts where the chunker starts afresh: before
a chunk that begins after a paragraph break. Such a chunk carries no overlap from the one
before, and every decision that ended the chunks before it was made on text the block holds,
so chunking the blocks one by one gives exactly the chunks (and chunk ids) of chunking the
whole text. The text after the cut is carried into the next block.

Only a text with no such point for ``_MAX_HOLD`` budgets (one paragraph of megabytes) is cut
without one; there, as at the block cuts of streamed plain text, the chunks at the cut may
differ from a whole read, but no text is lost or repeated.

>>> pieces = [("One. Two.", 0.5), ("\\n\\nThree.", 1.0)]
>>> list(exact_blocks(iter(pieces), size=400, overlap=60, budget=1 << 20))
[('One. Two.\\n\\nThree.', 1.0)]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from crag.ingest.chunk import chunk_spans, normalize_whitespace, strip_controls

__all__ = ["exact_blocks"]

_PARA_BREAK = re.compile(r"\n\s*\n")  # what the chunker counts as a paragraph break
_MAX_HOLD = 4  # budgets of text held while looking for a clean cut, before cutting anyway


def exact_blocks(
    pieces: Iterable[tuple[str, float]], *, size: int, overlap: int, budget: int
) -> Iterator[tuple[str, float]]:
    """Cleaned blocks of the concatenated ``pieces``, each with the fraction read when it was cut.

    ``pieces`` are ``(raw text, fraction read)``; ``size`` and ``overlap`` must be those the
    blocks are then chunked with. Memory holds about ``budget`` characters plus the carried
    text (usually under two chunks).
    """
    carry = ""  # cleaned text after the last cut, plus the raw whitespace that followed it
    parts: list[str] = []
    held, need, done = 0, budget, 0.0
    for piece, done in pieces:
        parts.append(strip_controls(piece))  # controls go piece by piece: the result is the same
        held += len(parts[-1])
        if held < need:
            continue
        raw = carry + "".join(parts)
        parts.clear()
        text = normalize_whitespace(raw)
        # The whitespace after the text must stay: the next piece may start mid-word.
        tail = raw[len(raw.rstrip()) :]
        cut = _fresh_start(text, chunk_spans(text, size=size, overlap=overlap))
        if cut:
            yield text[:cut], done
            carry = text[cut:] + tail
        elif len(text) >= _MAX_HOLD * budget:
            yield text, done
            carry = ""
        else:
            carry = text + tail
        held = len(carry)
        need = held + budget  # look again once another budget of text has come in
    text = normalize_whitespace(carry + "".join(parts))
    if text:
        yield text, done  # 1.0 at the end of a document, less at the end of one of its sections


def _fresh_start(text: str, spans: list[tuple[int, int]]) -> int:
    """Start of the last chunk that begins after a paragraph break with no overlap (0 if none).

    The chunk must be followed by another, so that its first sentence is complete in ``text``:
    the chunker's choice to end the chunk before it may depend on that sentence's length.
    """
    for k in range(len(spans) - 3, -1, -1):
        end, start = spans[k][1], spans[k + 1][0]
        if start > end and _PARA_BREAK.search(text, end, start):
            return start
    return 0

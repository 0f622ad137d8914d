"""Knowledge refinement: split documents into strips, grade the strips, keep the relevant.

This is the paper's decompose-then-recompose step: a retrieved chunk is cut into strips
of a sentence or a few, each strip is graded for the question, and the relevant ones are
kept in their original order with their provenance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crag.correct.bearers import namesakes_of
from crag.protocols import Evaluator
from crag.text import is_table_row, join_sentences, split_sentences
from crag.types import Passage, Query, Strip


@dataclass
class Doc:
    """A document to refine: internal chunk or external result, with its provenance."""

    id: str
    text: str
    source: str
    origin: str  # internal | web
    title: str = ""
    url: str = ""
    vector: object = None
    section: str = ""  # the headings above the text (an internal chunk's ``section`` metadata)


def make_strips(doc: Doc, sentences_per_strip: int) -> list[Strip]:
    r"""Group consecutive sentences into strips; very short sentences join their neighbour.

    A first line that repeats the title is a heading, not a sentence: web pages often open with
    their title ("Kyaw Swe (actor)\n\nKyaw Swe (1924 – 1982) was an actor."), and joined to the
    next sentence it hid whom that sentence defines. The strip keeps the title in ``title``. So
    is the line of headings that heads each chunk of a section (:mod:`crag.ingest.sections`).

    >>> page = Doc("1", "Kyaw Swe (actor)\n\nKyaw Swe was an actor.", "w", "web", "Kyaw Swe (actor)")
    >>> [s.text for s in make_strips(page, 2)]
    ['Kyaw Swe was an actor.']
    >>> staff = Doc("2", "Wang Lei (engineer)\n\nWang Lei (born 1984) is an engineer.", "s", "internal",
    ...             "Staff", section="Engineering > Wang Lei (engineer)")
    >>> [s.text for s in make_strips(staff, 2)]
    ['Wang Lei (born 1984) is an engineer.']
    """
    sents = split_sentences(doc.text)
    if len(sents) > 1 and doc.title and sents[0].strip() == doc.title.strip():
        sents = sents[1:]
    elif len(sents) > 1 and doc.section and _heads(sents[0], doc.section):
        sents = sents[1:]
    strips: list[Strip] = []
    buf: list[str] = []
    for s in sents:
        if is_table_row(s):  # a row says what its cells are: a strip of its own, joined to nothing
            if buf:
                strips.append(_strip(doc, buf))
                buf = []
            strips.append(_strip(doc, [s]))
            continue
        buf.append(s)
        if len(buf) >= sentences_per_strip and sum(len(x) for x in buf) >= 40:
            strips.append(_strip(doc, buf))
            buf = []
    if buf:
        if (
            strips and sum(len(x) for x in buf) < 40 and not is_table_row(strips[-1].text)
        ):  # a dangling fragment joins the last strip
            last = strips[-1]
            last.text = join_sentences([last.text, *buf])
        else:
            strips.append(_strip(doc, buf))
    return strips


def refine(
    query: Query,
    docs: Sequence[Doc],
    evaluator: Evaluator,
    *,
    sentences_per_strip: int = 2,
    keep: float = 0.4,
    max_strips: int = 8,
    min_strips: int = 3,
) -> tuple[list[Strip], list[Strip]]:
    """Return (kept strips in document order, every graded strip for the trace).

    Strips scoring ≥ ``keep`` are kept (at most ``max_strips``); when fewer than
    ``min_strips`` pass, the best-scoring ones fill up to ``min_strips`` so a strict
    threshold never leaves the generator with a single fragment. When the question singles
    out one bearer of a shared name ("the Welsh painter John Carter"), strips about the
    name's other bearers are graded at most τ_low (:func:`crag.correct.bearers.namesakes_of`).
    """
    strips = [s for d in docs for s in make_strips(d, sentences_per_strip)]
    if not strips:
        return [], []
    # A strip cut out of its document often lost its subject ("It is 2 m deep."):
    # grade it with the document title in front so the grader knows what it is about.
    ev = evaluator.grade(query, [Passage(str(i), _with_title(s)) for i, s in enumerate(strips)])
    for s, g in zip(strips, ev.grades, strict=True):
        s.score = g.score
    for i in namesakes_of(query, strips):  # about another bearer than the one the question names
        strips[i].score = min(strips[i].score, query.lower)
    ranked = sorted(range(len(strips)), key=lambda i: -strips[i].score)
    chosen = [i for i in ranked if strips[i].score >= keep][:max_strips]
    if len(chosen) < min_strips:
        chosen = ranked[: max(len(chosen), min(min_strips, max_strips))]
    kept = [strips[i] for i in sorted(chosen)]
    return kept, strips


def _heads(line: str, section: str) -> bool:
    """``line`` is the section line of a chunk of ``section`` (its deepest headings, maybe cut short with "…")."""
    return section.endswith(line) or (line.endswith("…") and line[:-1] in section)


def _with_title(s: Strip) -> str:
    return graded_text(s.text, s.title)


def graded_text(text: str, title: str = "") -> str:
    """The text a strip is graded as: its document title in front, unless already in it.

    Feedback pairs use the same form, so a retrained evaluator sees what it will grade.

    >>> graded_text("It is 2 m deep.", "Lake Lucerne")
    'Lake Lucerne: It is 2 m deep.'
    """
    if not title or title in text:
        return text
    sep = "：" if ord(title[-1]) > 0x2E80 else ": "
    return f"{title}{sep}{text}"


def _strip(doc: Doc, sents: list[str]) -> Strip:
    return Strip(join_sentences(sents), doc.source, doc.origin, doc.title, doc.url, doc.id)

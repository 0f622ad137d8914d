"""The sentence gate: a reply reaches the reader one checked sentence at a time.

The model streams inside the engine; a sentence is handed on (``on_text``) only once it is
complete and has passed the checks a finished answer gets:

* **its claims are in a source**: its new content words and every figure
  (:mod:`~crag.generate.grounding`), looked up in the sources it cites;
* **its citation holds it**: a marker whose source does not support the sentence is moved to
  the source that does (``repaired``); a sentence without one gets one (``inferred``);
  markers out of range are removed. A sentence about a person the question names is never
  held by a source about someone else (:mod:`~crag.generate.subjects`: "Christopher Butson
  is a professor [3]" where [3] is about Christopher R. Johnson; such a source holds a claim
  about the asked person only in its sentences that name them), and a sentence that puts
  another bearer of the surname in the asked person's place ("John Challis was…" asked about
  Thomas Challis) is dropped. Each citation carries the source sentence that supports it (a
  quote a reader can check);
* **it is not a refusal**: "the sources do not say…" is held back, because a re-ask or an
  escalation may still replace it; the caller decides when a refusal is final.

A sentence that fails is dropped, never shown, and so is everything after it: what follows
an invented sentence builds on it (small models answer, then explain in their own words).
Sentences that claim nothing ("According to
the sources,") wait for the next sentence that does. Whatever was handed on is exactly the
answer's text (:attr:`SentenceGate.text`): nothing shown is taken back.

A sentence is complete when the next one has begun (or the reply ended); the citation
markers a model writes after the full stop (``… house. [1]``) belong to the sentence before.

>>> from crag.types import Strip
>>> src = [Strip("The museum opened in 1901.", "a.txt", "internal"), Strip("It has a café.", "b.txt", "web")]
>>> shown = []
>>> gate = SentenceGate("When did the museum open?", src, on_text=shown.append)
>>> for piece in ["It opened", " in 1901 [2].", " It has a café.", " Tickets cost", " 12 euros [1]."]:
...     gate.feed(piece)
>>> gate.finish()
>>> shown, gate.text
(['It opened in 1901[1].', ' It has a café[2].'], 'It opened in 1901[1]. It has a café[2].')
>>> [(c.cites, c.how, c.quotes[0]) for c in gate.claims]
[([1], 'repaired', 'The museum opened in 1901.'), ([2], 'inferred', 'It has a café.')]
>>> gate.dropped
['Tickets cost 12 euros [1].']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from crag.generate.citations import CITE, cite_at_end, fence_markers, trail_lead_markers
from crag.generate.grounding import SourceTerms, is_closed, new_terms, supports
from crag.generate.refusal import is_refusal
from crag.generate.relation import ACROSS, Judge, RelationCheck, Verdict
from crag.generate.subjects import opens_with, question_names, said_of, stand_in
from crag.text import split_sentences
from crag.types import Claim, Strip

__all__ = ["SentenceGate"]

_CONTENT = re.compile(r"\w")
# A part that ends in an abbreviation ("the U.S.", "Dr.", "e.g.") has not ended its sentence.
_ABBREVIATION = re.compile(
    r"(?:\b[A-Z]\.|\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|No|vs|etc|e\.g|i\.e|Inc|Ltd|Co|Mt|Ft|Gen|Col|Lt|Prof|Rev|Jan|Feb|"
    r"Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.)$"
)
# Markers opening a part, and a marker still being written at the end ("[1" of "[1]").
_LEAD_MARKS = re.compile(r"^(?:\[\d{1,3}\]\s*)+|^\[\d{0,3}$")
_SPACES = re.compile(r"[ \t]{2,}")
_SPACE_BEFORE_STOP = re.compile(r"[ \t]+(?=[.,;:!?。，；：！？])")


class SentenceGate:
    """Checks a reply sentence by sentence and hands on only what passes (see the module docstring).

    Feed it the reply's pieces as the model writes them (:meth:`feed`), then call
    :meth:`finish`. :attr:`text` is the verified answer so far; :attr:`claims` its sentences
    with their citations; :attr:`refusals`, :attr:`dropped` and :attr:`pending` what was not
    handed on, and why.
    """

    def __init__(
        self,
        question: str,
        sources: Sequence[Strip],
        *,
        on_text: Callable[[str], None] | None = None,
        judge: Judge | None = None,
        judge_threshold: float = 0.5,
        relation: bool = True,
    ) -> None:
        self.question = question
        self.judge = judge  # P(a window states the answer) for claims no window holds in words
        self.relation = RelationCheck(question, threshold=judge_threshold) if relation else None
        self.unrelated: list[Verdict] = []  # why sentences were dropped for their relation
        self.judged: list[Verdict] = []  # every judge call, held or not (the trace shows them)
        self.sources = list(sources)
        self.on_text = on_text
        self.texts = [s.text for s in self.sources]
        self.closed = is_closed(question)
        self.names = question_names(question)
        self.raw = ""  # the reply as the model wrote it
        self.text = ""  # what has been handed on: the answer so far
        self.claims: list[Claim] = []
        self.refusals: list[str] = []  # sentences that decline: held, the caller decides
        self.dropped: list[str] = []  # sentences no source supports: never shown
        self.unsupported: list[str] = []  # their words no source has
        self.pending: list[tuple[str, str]] = []  # claimless sentences (with their lead) awaiting a claim
        self._judged = 0  # units of the reply already judged
        self._terms: dict[tuple[str, ...], SourceTerms] = {}
        self._sentences: dict[str, list[tuple[str, SourceTerms]]] = {}
        # For the sentence being judged: what each source about someone else says of the person
        # it opens with (only its sentences that name them; "" when none do).
        self._said: dict[int, str] = {}

    # -- feeding ---------------------------------------------------------------------------
    def feed(self, piece: str) -> None:
        """Take the next piece of the reply; judge every sentence it completes."""
        self.raw += piece
        units = _units(self.raw)
        for unit, lead in units[self._judged : len(units) - 1]:
            self._judge(unit, lead)
        self._judged = max(self._judged, len(units) - 1)

    def finish(self) -> None:
        """The reply has ended: judge its last sentence."""
        units = _units(self.raw)
        for unit, lead in units[self._judged :]:
            self._judge(unit, lead)
        self._judged = len(units)

    # -- the outcome -----------------------------------------------------------------------
    @property
    def answered(self) -> bool:
        return bool(self.claims)

    def verdict(self) -> str:
        """``answer``, or why the reply is none: ``empty``, ``declined``, ``restates the question``,
        ``not in the sources``."""
        if self.claims:
            return "answer"
        if not _CONTENT.search(CITE.sub("", self.raw)):
            return "empty"
        if self.refusals:
            return "declined"
        if self.pending and not self.dropped:
            return "restates the question"
        return "not in the sources"

    def declined_text(self) -> str:
        """The model's own refusal, when its words claim nothing the sources lack ("" otherwise)."""
        said = " ".join(self.refusals)
        every = self._every()
        return said if said and supports(new_terms(said, self.question), every) else ""

    # -- judging one sentence --------------------------------------------------------------
    def _judge(self, unit: str, lead: str) -> None:
        sentence = trail_lead_markers(fence_markers(unit)).strip()
        if not _CONTENT.search(CITE.sub("", sentence)):
            return  # markers with nothing before them: nothing to show
        if self.dropped:  # after an invented sentence, nothing is shown
            self.dropped.append(sentence)
            return
        if is_refusal(sentence, self.texts):
            self.refusals.append(sentence)
            return
        if stand_in(sentence, self.names, self.sources) is not None:
            self.dropped.append(sentence)  # about another bearer of the surname, not the one asked
            return
        terms = new_terms(sentence, self.question)
        if not terms and not self.closed:
            self.pending.append((sentence, lead))  # says nothing yet: shown with the next claim
            return
        self._said = self._said_of(sentence)
        foreign = {i for i, said in self._said.items() if not said}
        marks = [m for m in dict.fromkeys(int(n) for n in CITE.findall(sentence)) if 1 <= m <= len(self.texts)]
        settled = self._cite(terms, [m for m in marks if m - 1 not in foreign], foreign, marks)
        if settled is None:
            self.dropped.append(sentence)
            every = self._every()
            self.unsupported += [t for t in terms if not every.has(t) and t not in self.unsupported]
            return
        cites, how = settled
        held = self._relation(sentence, cites, foreign)
        if held is None:
            self.dropped.append(sentence)
            return
        if held != cites:
            cites, how = held, ("repaired" if marks else "inferred")
        if how != "kept" or len(CITE.findall(sentence)) != len(cites):
            sentence = _recite(sentence, cites)
        for waiting, waiting_lead in self.pending:
            self._release(waiting, waiting_lead, None)
        self.pending.clear()
        quotes = [self._quote(n - 1, terms, sentence) for n in cites]
        self._release(sentence, lead, Claim(sentence, 0, 0, cites, quotes, how if cites else "none"))

    def _relation(self, sentence: str, cites: list[int], foreign: set[int]) -> list[int] | None:
        """The citations that state the sentence's relation (:mod:`~crag.generate.relation`),
        or None: the sources talk about the same thing without stating what it claims.

        The cited sources are read first, then the others (a citation moves to the one that
        states it); the judge is asked once, over the best window of the first cited source,
        only when no source states the claim in its words."""
        if self.relation is None:
            return cites
        bare = CITE.sub(" ", sentence)
        own = [i + 1 for i in range(len(self.sources)) if i not in foreign]
        order = list(dict.fromkeys([*cites, *own]))
        if not order:
            return None
        answers = not self.claims and self.judge is not None  # the first claim answers the question
        across = None  # the first source whose two sentences side by side hold the claim: the judge reads it
        for n in order:
            lexical = self.relation.lexical(bare, self._source(n - 1), answers=answers)
            if lexical.held:
                return [n] if n not in cites else cites
            if across is None and lexical.missing == [ACROSS]:
                across = n
        first = across or order[0]
        verdict = self.relation.settle(bare, self._source(first - 1), judge=self.judge, answers=answers)
        if verdict.probability is not None:
            self.judged.append(verdict)
        if verdict.held:
            return [first]
        self.unrelated.append(verdict)
        return None

    def _source(self, i: int) -> Strip:
        """Source ``i`` as far as it speaks of the sentence's person (see :meth:`_said_of`)."""
        said = self._said.get(i)
        return self.sources[i] if said is None else Strip(said, self.sources[i].source, self.sources[i].origin,
                                                          self.sources[i].title)  # fmt: skip

    def _said_of(self, sentence: str) -> dict[int, str]:
        """Sources (0-based) about another person than the one the sentence opens with, and what
        each says of that person: a page about Terry O'Flaherty that names her mother Bridie
        holds a claim about Bridie only in the sentence that names her."""
        name = opens_with(sentence, self.names)
        if name is None:
            return {}
        said = {i: said_of(name, s) for i, s in enumerate(self.sources)}
        return {i: text for i, text in said.items() if text is not None}

    def _cite(
        self, terms: list[str], marks: list[int], foreign: set[int], written: list[int]
    ) -> tuple[list[int], str] | None:
        """The sources that hold ``terms`` and how the markers were settled; None when none do.
        ``foreign`` sources cannot hold the sentence; ``written`` are the markers as the model wrote them."""
        if not terms:  # a yes/no answer's own words: nothing to look up, keep what the model cited
            return marks, "kept" if marks == written else "repaired"
        own = [i for i in range(len(self.texts)) if i not in foreign]
        if self._borrowed(terms, own):
            return None
        if marks:
            useful = [m for m in marks if any(self._union((m - 1,)).has(t) for t in terms)]
            cited = self._union(tuple(m - 1 for m in useful))
            if useful and supports(terms, cited):
                # Cited sources that hold only part of the claim give way to one that holds all of it:
                # that is the citation a reader should check (a route list names the stops, the
                # route's summary its ends).
                partial = not all(cited.has(t) for t in terms)
                whole = next((i for i in own if partial and self._share(terms, i) == 1), None)
                if whole is not None:
                    return [whole + 1], "repaired"
                return useful, "kept" if useful == written else "repaired"
        how = "repaired" if written else "inferred"
        ranked = sorted(own, key=lambda i: (-self._share(terms, i), -self.sources[i].score, i))
        for i in ranked:
            if supports(terms, self._union((i,))):
                return [i + 1], how
        pair = tuple(sorted(ranked[:2]))
        if len(pair) == 2 and supports(terms, self._union(pair)):
            return [pair[0] + 1, pair[1] + 1], how
        return None

    def _borrowed(self, terms: list[str], own: list[int]) -> bool:
        """Whether the sentence has words that only sources about someone else have: that
        person's facts ("Mami Matsui is a Japanese idol, singer and actress" where "idol" and
        "singer" are on Mami Matsuyama's page, and Mami Matsui's says "voice actress"). Two
        words at least: one can be the model's own inference ("an American politician" from
        "a New Hampshire politician", where only Dan Burton's page says "American")."""
        if not self._said:
            return False
        mine = self._union(tuple(own))
        theirs = self._terms_of(tuple(self.texts[i] for i in sorted(self._said)))
        return sum(not mine.has(t) and theirs.has(t) for t in terms) >= 2

    def _share(self, terms: list[str], i: int) -> float:
        found = self._union((i,))
        return sum(found.has(t) for t in terms) / len(terms)

    def _every(self) -> SourceTerms:
        """Every source whole."""
        return self._terms_of(tuple(self.texts))

    def _union(self, indices: tuple[int, ...]) -> SourceTerms:
        """The sources ``indices``, each as far as it holds a claim about the sentence's person."""
        return self._terms_of(tuple(self._said.get(i, self.texts[i]) for i in indices))

    def _terms_of(self, texts: tuple[str, ...]) -> SourceTerms:
        if texts not in self._terms:
            self._terms[texts] = SourceTerms(" ".join(texts))
        return self._terms[texts]

    def _quote(self, i: int, terms: list[str], sentence: str) -> str:
        """The sentence of source ``i`` that holds most of ``terms`` (the first one on a tie)."""
        text = self._said.get(i, self.texts[i])
        if text not in self._sentences:
            self._sentences[text] = [(s, SourceTerms(s)) for s in split_sentences(text)]
        candidates = self._sentences[text]
        if not candidates:
            return ""
        if not terms:
            terms = new_terms(sentence, "")
        best = max(candidates, key=lambda c: sum(c[1].has(t) for t in terms))
        return best[0]

    def _release(self, sentence: str, lead: str, claim: Claim | None) -> None:
        if not self.text:
            sep = ""
        elif "\n" in lead:
            sep = lead  # keep the reply's line breaks (a list stays a list)
        else:
            sep = "" if ord(self.text[-1]) > 0x2E80 or ord(sentence[0]) > 0x2E80 else " "
        piece = sep + sentence
        if claim is not None:
            claim.start = len(self.text) + len(sep)
            claim.end = claim.start + len(sentence)
            self.claims.append(claim)
        self.text += piece
        if self.on_text is not None:
            self.on_text(piece)


def _units(reply: str) -> list[tuple[str, str]]:
    """The reply's sentences, each with the markers that follow it, and the whitespace before it.

    >>> _units("It opened in 1901. [1] It has a café.")
    [('It opened in 1901. [1]', ''), ('It has a café.', ' ')]
    >>> _units("It opened in 1901. [1")  # the marker is still being written
    [('It opened in 1901. [1', '')]
    >>> _units("He joined the U.S. Army in 1950 [2]. He left.")
    [('He joined the U.S. Army in 1950 [2].', ''), ('He left.', ' ')]
    """
    units: list[tuple[str, str]] = []
    at = start = 0
    for part in split_sentences(reply):
        where = max(reply.find(part, at), at)  # parts are stripped slices of the reply, in order
        marks = _LEAD_MARKS.match(part) if units else None
        if units and not marks and _ABBREVIATION.search(units[-1][0]):  # "the U.S." + "Army …": one sentence
            units[-1] = (reply[start : where + len(part)], units[-1][1])
            at = where + len(part)
            continue
        if marks:  # markers (or the start of one) after a full stop close the sentence before
            at = where + len(part[: marks.end()].rstrip())
            units[-1] = (reply[start:at], units[-1][1])
            where, part = where + marks.end(), part[marks.end() :]
            if not part:
                continue
        units.append((reply[where : where + len(part)], reply[at:where] if units else ""))
        start = where
        at = where + len(part)
    return units


def _recite(sentence: str, cites: Sequence[int]) -> str:
    """``sentence`` with its markers replaced by ``cites``, at its end."""
    bare = _SPACE_BEFORE_STOP.sub("", _SPACES.sub(" ", CITE.sub("", sentence))).strip()
    return cite_at_end(bare, "".join(f"[{n}]" for n in cites)) if cites else bare

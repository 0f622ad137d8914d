"""An answer for each person of a shared name, each from its own sources, every sentence checked.

When the context describes several people under the name the question asks about
(:mod:`crag.correct.bearers`), one answer about one of them is a guess. The answer instead:

1. **names them**, best supported first, in one sentence the engine writes from the sources
   (each description is copied from its bearer's defining sentence, with its citation):
   "Two people named John Carter appear in the sources: a Welsh painter (1884–1951) [1] and a
   Scottish civil engineer [2]." / "资料中有两位名叫约翰·卡特的人：威尔士画家[1]；苏格兰土木工程师[2]。"
   It is shown at once, before any model call;
2. **answers for each**: one model call per bearer over that bearer's sources only, so a small
   model cannot mix two people; each sentence passes the
   :class:`~crag.generate.gate.SentenceGate` (against the bearer's own sources) and is shown
   under the bearer's label, its markers renumbered to the whole context. A sentence that says
   nothing the list has not said ("Richard Harris is a composer [2].") is left out.

>>> from crag.testing.fakes import ScriptedLLM
>>> from crag.types import Bearer, Strip
>>> ctx = [Strip("John Carter (1884–1951) was a Welsh painter. He lived in Cardiff.", "a", "web"),
...        Strip("John Carter (born 1902) was a Scottish engineer.", "b", "web")]
>>> people = [Bearer("John Carter", "painter", "a Welsh painter", "1884–1951", [1]),
...           Bearer("John Carter", "engineer", "a Scottish engineer", "", [2])]
>>> llm = ScriptedLLM(["He lived in Cardiff [1].", "John Carter was a Scottish engineer [1]."])
>>> g = answer_bearers("Who was John Carter?", ctx, people, llm, lang="en")
>>> print(g.text)
Two people named John Carter appear in the sources: a Welsh painter (1884–1951) [1] and a Scottish engineer [2].
- A Welsh painter (1884–1951): He lived in Cardiff [1].
>>> [(c.cites, c.how) for c in g.claims], len(g.completions)
([([1, 2], 'kept'), ([1], 'kept')], 2)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from crag.generate.answer import Generation, claim_citations, generate
from crag.generate.citations import CITE
from crag.generate.grounding import new_terms
from crag.protocols import LLM
from crag.types import Bearer, Claim, Strip

__all__ = ["answer_bearers", "header"]

_COUNT = {
    "en": {2: "Two", 3: "Three", 4: "Four"},
    "zh": {2: "两", 3: "三", 4: "四"},
}


def header(name: str, bearers: Sequence[Bearer], cites: Sequence[int], lang: str) -> str:
    """The sentence that names every bearer, with the source each is described in.

    >>> people = [Bearer("李明", "画家"), Bearer("李明", "足球运动员", "中国足球运动员")]
    >>> header("李明", people, [1, 2], "zh")
    '资料中有两位名叫李明的人：画家[1]；中国足球运动员[2]。'
    """
    labels = [b.label(lang) for b in bearers]
    if lang == "zh":
        count = _COUNT["zh"].get(len(bearers), str(len(bearers)))
        listed = "；".join(f"{label}[{n}]" for label, n in zip(labels, cites, strict=True))
        return f"资料中有{count}位名叫{name}的人：{listed}。"
    count = _COUNT["en"].get(len(bearers), str(len(bearers)))
    items = [f"{_article(label)} [{n}]" for label, n in zip(labels, cites, strict=True)]
    listed = ", ".join(items[:-1]) + f" and {items[-1]}"
    return f"{count} people named {name} appear in the sources: {listed}."


def answer_bearers(
    question: str,
    sources: Sequence[Strip],
    bearers: Sequence[Bearer],
    llm: LLM,
    *,
    lang: str,
    max_tokens: int = 384,
    temperature: float = 0.0,
    answer_each: bool = True,
    on_token: Callable[[str], None] | None = None,
    on_piece: Callable[[str], None] | None = None,
) -> Generation:
    """The list of ``bearers`` (source numbers are positions in ``sources``), then each one's answer.

    One model call per bearer (no re-ask); none when not ``answer_each`` (the question asks who
    they are, and the list says it). ``on_token`` gets each verified piece as it is shown, the
    list first. The Generation's ``sources`` are ``sources``, its ``bearers`` the list.
    """
    sources = list(sources)
    answer = _Composer(on_token)
    said = _name_them(answer, bearers, sources, lang)
    calls = []
    for bearer in bearers if answer_each else []:
        own = [sources[n - 1] for n in bearer.cites]
        part = _Part(answer, bearer, question + " " + said, lang)
        g = generate(
            question,
            own,
            llm,
            lang=lang,
            max_tokens=max_tokens,
            temperature=temperature,
            max_sources=len(own),
            on_token=part.take,
            on_piece=on_piece,
        )
        calls += g.completions
        part.settle(g.claims)
    return Generation(
        answer.text,
        claim_citations(answer.claims, sources),
        sources,
        citations_inferred=any(c.how in ("inferred", "repaired") for c in answer.claims),
        completions=calls,
        claims=answer.claims,
        bearers=list(bearers),
    )


def _name_them(answer: _Composer, bearers: Sequence[Bearer], sources: list[Strip], lang: str) -> str:
    """Show the sentence that names every bearer, citing each one's defining source; return it."""
    lead = [_defining_source(b, sources) for b in bearers]
    said = header(bearers[0].name, bearers, lead, lang)
    quotes = [b.quote or sources[n - 1].text for b, n in zip(bearers, lead, strict=True)]
    answer.add(said, Claim(said, 0, 0, list(dict.fromkeys(lead)), _unique(lead, quotes), "kept"))
    return said


@dataclass
class _Composer:
    """The answer as shown so far, and the claims of its sentences (offsets in ``text``)."""

    on_token: Callable[[str], None] | None
    text: str = ""
    claims: list[Claim] = field(default_factory=list)

    def add(self, piece: str, claim: Claim | None = None, *, lead: str = "") -> None:
        if claim is not None:
            claim.start = len(self.text) + len(lead)
            claim.end = claim.start + len(claim.text)
            self.claims.append(claim)
        self.text += lead + piece
        if self.on_token is not None:
            self.on_token(lead + piece)


class _Part:
    """One bearer's answer: its verified sentences, renumbered, under its label."""

    def __init__(self, answer: _Composer, bearer: Bearer, known: str, lang: str) -> None:
        self.answer, self.bearer, self.known, self.lang = answer, bearer, known, lang
        self.shown: dict[str, Claim] = {}  # each sentence shown, by its text as the gate wrote it
        colon = "：" if lang == "zh" else ": "
        label = bearer.label(lang)
        self.lead = f"\n- {label[:1].upper()}{label[1:]}{colon}"

    def take(self, piece: str) -> None:
        """A piece the gate passed: shown when it adds to what the answer says."""
        sentence = piece.strip()
        if not new_terms(sentence, self.known):
            return
        text = _renumber(sentence, self.bearer.cites)
        claim = Claim(text, 0, 0)
        sep = "" if self.lang == "zh" else " "
        self.answer.add(text, claim, lead=self.lead if not self.shown else sep)
        self.shown[sentence] = claim
        self.known += " " + sentence

    def settle(self, claims: Sequence[Claim]) -> None:
        """Give the shown sentences the gate's citations and quotes, renumbered."""
        for gated in claims:
            shown = self.shown.get(gated.text)
            if shown is not None:
                shown.cites = [self.bearer.cites[n - 1] for n in gated.cites]
                shown.quotes, shown.how = list(gated.quotes), gated.how


def _renumber(sentence: str, cites: Sequence[int]) -> str:
    """``[k]`` (the k-th of the bearer's own sources) as ``[n]``, its number in the whole context."""
    return CITE.sub(lambda m: f"[{cites[int(m.group(1)) - 1]}]" if int(m.group(1)) <= len(cites) else "", sentence)


def _defining_source(bearer: Bearer, sources: Sequence[Strip]) -> int:
    """The bearer's source that holds its defining sentence (else its best: the first)."""
    return next((n for n in bearer.cites if bearer.quote and bearer.quote in sources[n - 1].text), bearer.cites[0])


def _unique(cites: Sequence[int], quotes: Sequence[str]) -> list[str]:
    seen: dict[int, str] = {}
    for n, q in zip(cites, quotes, strict=True):
        seen.setdefault(n, q)
    return list(seen.values())


def _article(label: str) -> str:
    """An indefinite article for a bare disambiguator ("composer" → "a composer"); descriptions have theirs."""
    if re.match(r"(?:a|an|the)\s", label, re.I) or re.match(r"\d", label):
        return label
    vowel = label[:1].lower() in "aeiou" or (label[:2].isupper() and label[:1] in "FHLMNRSX")
    return ("an " if vowel else "a ") + label

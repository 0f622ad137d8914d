"""Whose sentence is it: a claim about the asked person must cite a source about that person.

A small model asked about a long-tail name answers from a passage about someone else:
"Christopher Butson is a Distinguished Professor of Computer Science [3]" cites a passage
about Christopher R. Johnson. Every content word is in that source and the name is in the
question, so the word check of :mod:`crag.generate.grounding` passes; the claim is still
about another man. The sentence gate (:mod:`crag.generate.gate`) asks this module, for a
sentence that opens with a name the question asks about, which sources are about someone
else; those cannot support it.

A source is about someone else when it does not name the person and its own subject is a
person of another name, even one of the same surname: the title ("Christopher R. Johnson"), or the
subject of its defining sentence ("James Webb (born 1948) is a South African artist").
A source that writes the name more or less fully ("Raymond Burton" for "Raymond S. Burton")
is left to :mod:`crag.correct.bearers`; a source about no person in particular is no
evidence against the claim.

>>> from crag.types import Strip
>>> names = question_names("What is Christopher Butson's occupation?")
>>> [n.text for n in names]
['Christopher Butson']
>>> opens_with("Christopher Butson is a professor of computing [1].", names).text
'Christopher Butson'
>>> other = Strip("He is a Distinguished Professor of Computer Science.", "w66", "web", "Christopher R. Johnson")
>>> own = Strip("Butson was the son of Bishop Christopher Butson.", "k67", "internal", "James Butson")
>>> about_another(names[0], other), about_another(names[0], own)
(True, False)
>>> [n.text for n in question_names("迈克尔·哈钦斯的职业是什么？")]
['迈克尔·哈钦斯']

A source about someone else that does name the asked person holds a claim about them only in
the sentences that name them (:func:`said_of`): a page about Terry O'Flaherty that names her
mother Bridie tells nothing of Bridie's election.

A sentence can also put another bearer of the surname in the asked person's place: asked
about Thomas Challis, a small model reads "John Challis was an American builder of
harpsichords" off John Challis's page. :func:`stand_in` names that other person unless a
source names both (a relative, an alias), which is what lets "Who was Marie Curie's
husband?" be answered "Pierre Curie was a physicist [1]".

>>> asked = question_names("What is Thomas Challis's occupation?")
>>> stand_in("John Challis was a harpsichord maker [1].", asked, [other])
'John Challis'
>>> wife = Strip("Pierre Curie married Marie Curie in 1895.", "k1", "internal", "Pierre Curie")
>>> stand_in("Pierre Curie was a physicist [1].", question_names("Who was Marie Curie's husband?"), [wife]) is None
True
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from crag.correct.names import CJK, DOTS, PARTICLES, Name, dotted_names, fold, personal, split_title, subject
from crag.text import split_sentences, zh_pos
from crag.types import Strip

__all__ = ["about_another", "opens_with", "question_names", "said_of", "stand_in"]

# Capitalised words in a row, with initials ("S.") and name particles between them.
_EN_RUN = re.compile(
    r"\b(?:[A-Z]\.|[A-Z][\w'’-]*)(?:\s+(?:[A-Z]\.|[A-Z][\w'’-]*|(?:de|da|di|del|della|van|von|der|den|la|le|bin)(?=\s+[A-Z])))+"
)
_OPENING = re.compile(r"[\s;:,]*([A-Z][\w'’-]+)\s+[a-z]")
_POSSESSIVE = re.compile(r"['’]s?$")
_QUESTION_WORDS = frozenset(
    "what who whom whose when where which why how is was are were did does do can could in on the a an".split()
)


# What a company or institution's name ends with: jieba tags 青岚 of 青岚科技 as a person's name.
_ORG_AFTER = re.compile(
    "科技|公司|集团|实验室|银行|电子|电器|数码|声学|智能|智造|出行|车业|环境|茶业|控股|股份|有限"
    "|研究|基金|证券|传媒|网络|软件|资本|地产|能源|汽车|航空|物流|酒店|工业|制造|药业|食品|影业|文化|教育"
)


def question_names(question: str) -> list[Name]:
    """The people's names ``question`` asks about (runs of capitalised words; 人名 and
    transliterated names with an interpunct in Chinese)."""
    found: list[Name] = []
    if CJK.search(question):
        tagged = zh_pos(question)
        written = dotted_names(question) + [
            w
            for i, (w, flag) in enumerate(tagged)
            if flag == "nr" and len(w) >= 2 and not _ORG_AFTER.match("".join(x for x, _ in tagged[i + 1 : i + 3]))
        ]
    else:
        written = []
        for m in _EN_RUN.finditer(question):
            tokens = m.group(0).split()
            while tokens and tokens[0].lower() in _QUESTION_WORDS:
                tokens = tokens[1:]
            if tokens:
                tokens[-1] = _POSSESSIVE.sub("", tokens[-1])
                written.append(" ".join(tokens))
    for text in written:
        name = Name.of(text)
        if name is not None and name not in found and not any(name.key[0] in n.key[0] for n in found if n.cjk):
            found.append(name)
    return found


def opens_with(sentence: str, names: Sequence[Name]) -> Name | None:
    """The name of ``names`` that ``sentence`` opens with (its subject), or None."""
    head = sentence.lstrip()
    for name in names:
        at = name.find(head)
        if at is not None and at[0] <= (0 if name.cjk else 4):  # "The ", nothing before a Chinese name
            return name
    return None


def stand_in(sentence: str, names: Sequence[Name], sources: Sequence[Strip]) -> str | None:
    """The other person ``sentence`` opens with in place of an asked name, or None.

    Another person is one whose name has the asked name's surname (its last part) but another
    given name (not an initial of it), and whom no source names together with the asked
    person: then nothing in the sources says the sentence's person is the one asked about, or
    is related to them.
    """
    head = _opening_name(sentence)
    if head is None or any(n.compatible(head) or n.find(head.text) is not None for n in names):
        return None
    for asked in names:
        given, other = _parts(asked)[0], _parts(head)[0]
        initial = min(len(given), len(other)) == 1 and given[0] == other[0]
        if _parts(asked)[-1] != _parts(head)[-1] or given == other or initial:
            continue  # another surname, the same given name, or an initial that may stand for it ("J.")
        texts = (f"{s.title} {s.text}" for s in sources)
        if not any(asked.find(t) is not None and head.find(t) is not None for t in texts):
            return head.text
    return None


def _opening_name(sentence: str) -> Name | None:
    """The person's name ``sentence`` opens with: a run of capitalised words, or a Chinese name
    written with an interpunct (only those: a two-character Chinese name shares its surname with
    millions)."""
    head = sentence.lstrip()
    if CJK.search(head[:1]):
        dotted = dotted_names(head[:20])
        return Name.of(dotted[0]) if dotted and head.startswith(dotted[0]) else None
    m = _EN_RUN.match(head)
    return Name.of(m.group(0)) if m else None


def _parts(name: Name) -> tuple[str, ...]:
    """A name's parts: its words, or a Chinese name's parts between interpuncts."""
    return tuple(DOTS.split(name.text)) if name.cjk else name.key


def about_another(name: Name, source: Strip) -> bool:
    """Whether ``source`` is about another person than ``name`` and never names them (see the
    module docstring): it holds no claim about ``name``."""
    return said_of(name, source) == ""


def said_of(name: Name, source: Strip) -> str | None:
    """What ``source`` says of ``name`` when its subject is another person: its sentences that
    name them ("" when none does). None when the source is about ``name``, or about no person
    in particular, and all of it counts.

    >>> terry = Strip("A daughter of a previous Mayor, Bridie Lynch, she was a guest. "
    ...               "She was elected in 1999.", "w1", "web", "Terry Lynch")
    >>> said_of(Name.of("Bridie Lynch"), terry)
    'A daughter of a previous Mayor, Bridie Lynch, she was a guest.'

    Once named, a person is called by surname ("Dinwiddie ordered…") where the page's own
    person has another one; a subject that writes the name with a title is the person itself
    ("Governor Robert Dinwiddie of Virginia was an investor…").
    """
    if name.find(source.title) is not None:
        return None
    other = subject(source.text) or _person_title(source)
    if other is None or name.compatible(other) or name.find(other.text) is not None:
        return None
    surname = _parts(name)[-1] if _parts(name)[-1] != _parts(other)[-1] else None
    return " ".join(s for s in split_sentences(source.text) if name.find(s) is not None or _names(s, surname))


def _names(sentence: str, surname: str | None) -> bool:
    """Whether ``sentence`` writes ``surname`` as a word (in Chinese: anywhere)."""
    if not surname:
        return False
    if CJK.search(surname):
        return surname in sentence
    return re.search(rf"\b{re.escape(surname)}\b", fold(sentence)) is not None


def _person_title(source: Strip) -> Name | None:
    """The source's title when it is a person's name: its text is about a person (a defining
    sentence, or a sentence whose subject is the title's first or last name: "Alexander acts as
    a producer" under "Alexander Mikhailovich Kozulin"), and a Latin title has every word
    capitalised but for name particles ("Christopher R. Johnson", "Cristiano da Silva", not "List
    of alumni")."""
    base = split_title(source.title)[0]
    title = Name.of(base)
    if title is None:
        return None
    if not CJK.search(base) and not all(w[:1].isupper() or w in PARTICLES for w in base.split()):
        return None
    if not personal(source.text, None) and not _called_by_part(source.text, base):
        return None
    return title


def _called_by_part(text: str, title: str) -> bool:
    """A sentence of ``text`` opens with the first or last word of the Latin name ``title``,
    followed by a lower-case word (its verb): the page calls its person by one name."""
    words = title.split()
    if len(words) < 2 or CJK.search(title):
        return False
    parts = {words[0], words[-1]}
    return any(
        (m := _OPENING.match(sentence)) is not None and m.group(1) in parts for sentence in split_sentences(text)
    )

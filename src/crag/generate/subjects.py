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
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from crag.correct.names import CJK, Name, dotted_names, personal, split_title, subject
from crag.text import split_sentences, zh_pos
from crag.types import Strip

__all__ = ["about_another", "opens_with", "question_names"]

# Capitalised words in a row, with initials ("S.") and name particles between them.
_EN_RUN = re.compile(
    r"\b(?:[A-Z]\.|[A-Z][\w'’-]*)(?:\s+(?:[A-Z]\.|[A-Z][\w'’-]*|(?:de|da|di|del|della|van|von|der|den|la|le|bin)(?=\s+[A-Z])))+"
)
_OPENING = re.compile(r"[\s;:,]*([A-Z][\w'’-]+)\s+[a-z]")
_POSSESSIVE = re.compile(r"['’]s?$")
_QUESTION_WORDS = frozenset(
    "what who whom whose when where which why how is was are were did does do can could in on the a an".split()
)


def question_names(question: str) -> list[Name]:
    """The people's names ``question`` asks about (runs of capitalised words; 人名 and
    transliterated names with an interpunct in Chinese)."""
    found: list[Name] = []
    if CJK.search(question):
        written = dotted_names(question) + [w for w, flag in zh_pos(question) if flag == "nr" and len(w) >= 2]
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


def about_another(name: Name, source: Strip) -> bool:
    """Whether ``source`` is about another person than ``name`` (see the module docstring)."""
    if name.find(f"{source.title} {source.text}") is not None:
        return False
    other = subject(source.text) or _person_title(source)
    return other is not None and not name.compatible(other)


def _person_title(source: Strip) -> Name | None:
    """The source's title when it is a person's name: its text is about a person (a defining
    sentence, or a sentence whose subject is the title's first or last name: "Alexander acts as
    a producer" under "Alexander Mikhailovich Kozulin"), and a Latin title has every word
    capitalised ("Christopher R. Johnson", not "List of alumni")."""
    base = split_title(source.title)[0]
    title = Name.of(base)
    if title is None:
        return None
    if not CJK.search(base) and not all(w[:1].isupper() for w in base.split()):
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

"""Names that several people share: which bearers of the asked name the sources describe.

Long-tail questions ask about a name ("What is Richard Harris's occupation?") that several
people bear, and retrieval returns passages about more than one of them. A small model then
picks one and answers confidently about a random bearer. This module finds, deterministically
and without a model, which distinct people the strips describe under the question's name:

1. **the name**: a strip's title without its disambiguator ("Richard Harris (composer)"), or the
   subject of its defining sentence ("Richard Harris (1930–2002) was an Irish actor"), written
   in the question (:class:`~crag.correct.names.Name`: middle names, accents and interpuncts
   do not matter);
2. **who each strip is about**: strips with the same title are one document; a strip without
   a title of the name joins the document (source and title) whose defining sentence is about it;
   each item of a list of people ("X (priest), Irish Anglican priest ;",
   :mod:`crag.correct.name_lists`) is a document of its own;
3. **distinct bearers**: two documents are two people when their titles differ by a
   disambiguator, their life years differ, or what they do shares no word ("a Welsh painter",
   "a Scottish civil engineer"); places and things of the same name are left out;
4. **singled out**: when the question qualifies the name ("the Welsh painter John Carter",
   "作曲家理查德·哈里斯"), the bearer whose disambiguator or description matches is ``chosen``;
   so is the one bearer written as fully as the question writes it ("Raymond S. Burton", when
   the other is "Raymond Burton").

>>> from crag.types import Query, Strip
>>> ctx = [Strip("John Carter (1884–1951) was a Welsh painter.", "a", "web", "John Carter (painter)", score=0.9),
...        Strip("John Carter (born 1902) was a Scottish civil engineer.", "b", "web", "John Carter (engineer)")]
>>> found = find_bearers(Query.of("What was John Carter's occupation?"), ctx)
>>> found.several, [(b.disambiguator, b.description, b.life, b.cites) for b in found.bearers]
(True, [('painter', 'a Welsh painter', '1884–1951', [1]), ('engineer', 'a Scottish civil engineer', 'born 1902', [2])])
>>> one = find_bearers(Query.of("When did the Scottish engineer John Carter die?"), ctx)
>>> one.several, one.asked, one.chosen.disambiguator
(False, 'Scottish engineer', 'engineer')
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from crag.correct.name_lists import listed, listed_names
from crag.correct.names import (
    Definition,
    Name,
    asks_who,
    define,
    descriptor,
    fold,
    personal,
    split_title,
    subject,
    words,
)
from crag.correct.posts import post_of, row_post
from crag.types import Bearer, Query, Strip

__all__ = ["MAX_BEARERS", "Bearers", "find_bearers", "namesakes_of"]

MAX_BEARERS = 4  # listed at most; the best supported first


@dataclass
class Bearers:
    """The ``bearers`` step's value: the people the context describes under the question's name.

    ``bearers`` holds every distinct person found (best supported first; fewer than two means
    the name is not shared here). ``asked`` is the question's own qualifier of the name, and
    ``chosen`` the bearer it singles out (None when it names none of them). ``asks_who``: the
    question asks only who the name is (an occupation): each bearer's description answers it.
    """

    name: str = ""
    bearers: list[Bearer] = field(default_factory=list)
    asked: str = ""
    chosen: Bearer | None = None
    asks_who: bool = False
    degradations: list[str] = field(default_factory=list)

    @property
    def several(self) -> bool:
        """The answer lists every bearer: the name is shared, and the question does not say which."""
        return len(self.bearers) >= 2 and not self.asked

    def listed(self) -> list[Bearer]:
        """The bearers an answer names: all of them, the chosen one, or none."""
        if self.several:
            return self.bearers
        return [self.chosen] if self.chosen is not None and len(self.bearers) >= 2 else []

    def others(self) -> set[int]:
        """Source numbers of bearers other than the chosen one (empty when none is chosen)."""
        if self.chosen is None:
            return set()
        return {n for b in self.bearers if b is not self.chosen for n in b.cites} - set(self.chosen.cites)


@dataclass
class _Doc:
    """The strips of one document about the name, and what they say of its subject."""

    title: str  # folded title of the name ("" for a document found by its defining sentence)
    disambiguator: str
    written: str  # the name as this document writes it
    indices: list[int]
    definition: Definition | None
    personal: bool
    score: float

    def occupations(self) -> frozenset[str]:
        return words(self.definition.description, occupations=True) if self.definition else frozenset()

    def same_person(self, other: _Doc) -> bool:
        mine = self.definition.years if self.definition else ()
        theirs = other.definition.years if other.definition else ()
        if mine and theirs and mine[0] != theirs[0]:
            return False
        if self.title and other.title and self.title != other.title:
            return bool(mine and theirs)  # two titles are two articles, unless the birth years agree
        a, b = self.occupations(), other.occupations()
        return not (a and b and not a & b)


def find_bearers(query: Query, strips: Sequence[Strip], *, limit: int = MAX_BEARERS) -> Bearers:
    """The distinct people ``strips`` describe under the name ``query`` asks about (see the module docstring).

    Source numbers in each :class:`~crag.types.Bearer`'s ``cites`` are positions in ``strips``, from 1.
    """
    name = _asked_name(query.text, strips)
    if name is None:
        return Bearers()
    docs = _documents(name, strips)
    people = [_bearer(group, strips) for group in _cluster(docs) if any(d.personal for d in group)]
    if len(people) < 2:
        return Bearers(name.text, people)
    people = people[:limit]
    at = name.find(query.text)
    if at is None:  # the name matched the question's words, not its text (never for a found name)
        return Bearers(name.text, people)
    asked = descriptor(query.text, at)
    chosen = _choose(asked, people) if asked else None
    if not asked:  # "Raymond S. Burton" singles out the one bearer of all three names
        asked, chosen = _fullest(query.text[at[0] : at[1]], people)
    return Bearers(name.text, people, asked, chosen, asks_who=asks_who(query.text, at))


def namesakes_of(query: Query, strips: Sequence[Strip]) -> dict[int, str]:
    """Strips about another bearer than the one the question singles out, with why (0-based).

    Grading uses it: "the Welsh painter John Carter" makes a strip about John Carter the
    engineer irrelevant however well its words match. Empty unless the question qualifies a
    shared name and the qualifier matches one bearer.
    """
    found = find_bearers(query, strips)
    if found.chosen is None:
        return _unlike_the_asked(query.text, strips, found)
    why = f"about another {found.name}, not the {found.asked} the question names"
    return {n - 1: why for n in sorted(found.others())}


def _unlike_the_asked(question: str, strips: Sequence[Strip], found: Bearers) -> dict[int, str]:
    """The one defined bearer's strips, when the question's qualifier fits another strip of the name.

    "青岚科技首席财务官陈静" asks about the CFO; when the only 陈静 defined is a test engineer
    (her description lacks 首席 and 财务) and another strip writes 陈静 with both words (a
    leadership page, no defining sentence), the engineer is a namesake, not the one asked about.
    """
    if len(found.bearers) != 1 or (name := Name.of(found.name)) is None or (at := name.find(question)) is None:
        return {}
    bearer = found.bearers[0]
    asked = descriptor(question, at)
    lacking = words(asked) - words(f"{bearer.disambiguator} {bearer.description}")
    if not lacking:
        return {}
    fits = [
        i
        for i, s in enumerate(strips, 1)
        if i not in bearer.cites and name.find(s.text) is not None and lacking <= words(f"{s.title} {s.text}")
    ]
    if not fits:
        return {}
    why = f"about another {found.name}, not the {asked} the question names"
    return {n - 1: why for n in bearer.cites}


def _asked_name(question: str, strips: Sequence[Strip]) -> Name | None:
    """The name in ``question`` that most strips are about (titles first, then defining sentences)."""
    counts: Counter[Name] = Counter()
    written: dict[Name, str] = {}
    for s in strips:
        row = row_post(s.text)
        for candidate in (Name.of(split_title(s.title)[0]), subject(s.text), *listed_names(s.text), row and row[0]):
            if candidate is not None and candidate.find(question) is not None:
                counts[candidate] += 1
                written.setdefault(candidate, candidate.text)
                break
    if not counts:
        return None
    best = max(counts, key=lambda n: (counts[n], len(n.text)))
    return replace(best, text=written[best])


def _documents(name: Name, strips: Sequence[Strip]) -> list[_Doc]:
    """The documents about ``name`` among ``strips``: by title of the name, else by defining sentence."""
    docs: dict[tuple[str, ...], _Doc] = {}
    owner: dict[tuple[str, str], tuple[str, ...]] = {}  # (source, title) → the document it belongs to
    pending: list[int] = []
    for i, s in enumerate(strips):
        base, disamb = split_title(s.title)
        row = row_post(s.text, name)
        defined = row[1] if row else define(s.text, name) or post_of(s.text, name)
        titled = Name.of(base)
        items = listed(s.text, name)
        # a title may write the name with fewer middle names than the question, never more;
        # a page listing two of its bearers ("张伟 (消歧义)") is a list whatever its title
        if titled is not None and name.compatible(titled) and len(titled.key) <= len(name.key) and len(items) < 2:
            key: tuple[str, ...] = ("title", fold(s.title))
            doc = docs.setdefault(key, _Doc(fold(s.title), disamb, base, [], None, False, 0.0))
        elif defined is not None and len(items) < 2:
            # each row of a table is its own entry; a prose page is one document
            key = ("row", s.source, s.text) if row else ("doc", s.source, s.title)
            doc = docs.setdefault(key, _Doc("", "", name.text, [], None, False, 0.0))
        else:
            if not items:
                pending.append(i)
            for entry, definition in items:  # a list of people: each item is one bearer
                title = fold(f"{name.text} ({entry})") if entry else ""
                key = ("title", title) if title else ("item", s.source, definition.sentence)
                doc = docs.setdefault(key, _Doc(title, entry, name.text, [], None, False, 0.0))
                _add(doc, i, Strip(definition.sentence, s.source, s.origin, s.title, score=s.score), definition)
            continue
        if not row:  # a row is whole: no other strip of its table is about its person
            owner[(s.source, s.title)] = key
        _add(doc, i, s, defined)
    for i in pending:  # a strip cut from a document about the name ("He studied in Paris.")
        s = strips[i]
        if (s.source, s.title) in owner and s.title:
            _add(docs[owner[(s.source, s.title)]], i, s, None)
    return list(docs.values())


def _add(doc: _Doc, i: int, strip: Strip, defined: Definition | None) -> None:
    doc.indices.append(i)
    doc.definition = doc.definition or defined
    doc.personal = doc.personal or personal(strip.text, defined or doc.definition)
    doc.score = max(doc.score, strip.score)


def _cluster(docs: list[_Doc]) -> list[list[_Doc]]:
    """Documents grouped by person, best supported first: a document joins the first group
    whose every document can be the same person, else starts its own."""
    groups: list[list[_Doc]] = []
    for doc in sorted(docs, key=lambda d: (-d.score, min(d.indices))):
        home = next((g for g in groups if all(doc.same_person(other) for other in g)), None)
        if home is None:
            groups.append([doc])
        else:
            home.append(doc)
    return groups


def _bearer(group: list[_Doc], strips: Sequence[Strip]) -> Bearer:
    lead = next((d for d in group if d.definition), group[0])
    defined = lead.definition
    cites = sorted({i + 1 for d in group for i in d.indices})
    return Bearer(
        name=group[0].written,
        disambiguator=next((d.disambiguator for d in group if d.disambiguator), ""),
        description=defined.description if defined else "",
        life=defined.life if defined else "",
        cites=cites,
        score=max(d.score for d in group),
        quote=defined.sentence if defined else "",
    )


def _fullest(written: str, people: Sequence[Bearer]) -> tuple[str, Bearer | None]:
    """``(written, bearer)`` when the question writes the name more fully than the sources write
    all but one of its bearers ("Raymond S. Burton"; another is "Raymond Burton"), else ``("", None)``."""
    asked = Name.of(written)
    if asked is None:
        return "", None
    full = [b for b in people if (n := Name.of(b.name)) is not None and n.key == asked.key]
    return (written, full[0]) if len(full) == 1 and len(people) > 1 else ("", None)


def _choose(asked: str, people: Sequence[Bearer]) -> Bearer | None:
    """The one bearer whose disambiguator or description shares most words with ``asked``."""
    wanted = words(asked)
    if not wanted:
        return None
    pick = _most(wanted, [words(b.disambiguator) | words(b.description) for b in people], people)
    if pick is None:
        # A tie on words the sources of every bearer share ("青岚科技首席财务官陈静": both 陈静 work
        # at 青岚科技) is decided by the other words, read in each defining sentence as well.
        known = [words(b.disambiguator) | words(b.description) | words(b.quote) for b in people]
        pick = _most(wanted - frozenset.intersection(*known), known, people)
    return pick


def _most(wanted: frozenset[str], known: Sequence[frozenset[str]], people: Sequence[Bearer]) -> Bearer | None:
    """The one bearer whose words share most with ``wanted`` (None on a tie or no overlap)."""
    overlap = [len(wanted & k) for k in known]
    best = max(overlap, default=0)
    return people[overlap.index(best)] if best and overlap.count(best) == 1 else None

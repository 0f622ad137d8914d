"""Lists of people: the bearers a surname or disambiguation page names, one per item.

Such pages define no one with "is"/"was" ("Christopher Butson, Church of Ireland bishop ;
Christopher Butson (priest), Irish Anglican priest ;", "张伟（1958年—），中国作家；"), yet
each item says who one bearer of the name is. :mod:`crag.correct.bearers` reads them with
:func:`listed`; :func:`listed_names` finds the names such a list holds.
"""

from __future__ import annotations

import html
import re

from crag.correct.names import CJK, YEAR, Definition, Name, en_description, life_years, same_name, zh_description

__all__ = ["listed", "listed_names"]

# One item of a list of people: "X (priest), Irish Anglican priest", "X (b. 1955), Cypriot minister".
_EN_ITEM = re.compile(
    r"^(?:[-*•]\s*)?(?P<subj>[A-Z][^(),;:]{2,60}?)\s*(?:\((?P<paren>[^()]{1,60})\))?\s*,\s*"
    r"(?P<desc>(?!(?:and|or|but|who|which|he|she|it|they)\b)[^;]{2,200})$"
)
_ZH_ITEM = re.compile(
    r"^(?:[-*•]\s*)?(?P<subj>[\u4e00-\u9fff·・]{2,12}?)\s*(?:[（(](?P<paren>[^（）()]{1,60})[）)])\s*[，,：:]?\s*"
    r"(?P<desc>[^；;。]{2,100})"
)


def listed(text: str, name: Name) -> list[tuple[str, Definition]]:
    """The entries of a list of people (``"X (priest), Irish Anglican priest ;"``,
    ``"李明（1950年—），中国画家；"``) that are about ``name``: ``(disambiguator, definition)`` each.

    Surname and given-name pages list the bearers of a name one per item, with no "is"/"was"
    to define them; each item is one bearer.

    >>> items = "Christopher Butson, Church of Ireland bishop ; Christopher Butson (priest), Irish Anglican priest ;"
    >>> [(d, x.description) for d, x in listed(items, Name.of("Christopher Butson"))]
    [('', 'Church of Ireland bishop'), ('priest', 'Irish Anglican priest')]
    >>> ghisleri = "Arcangelo Ghisleri (1855–1938), geographer who made maps ;"
    >>> [(d, x.life) for d, x in listed(ghisleri, Name.of("Arcangelo Ghisleri"))]
    [('', '1855–1938')]
    """
    out: list[tuple[str, Definition]] = []
    for item, m in _items(text, zh=name.cjk):
        if not same_name(name, m.group("subj")):
            continue
        paren = m.group("paren") or ""
        years = tuple(YEAR.findall(paren))
        desc = zh_description(m.group("desc")) if name.cjk else en_description(m.group("desc"))
        if desc:
            # "(priest)" tells bearers apart; "(b. 1955)" and "(那谷屋 正義)" (a native spelling) do not
            plain = paren.strip() and not years and not CJK.search(paren) and not re.search(r"\d|\bb\.", paren)
            disamb = paren.strip() if plain else ""
            out.append((disamb, Definition(years, desc, life_years(paren, years, zh=name.cjk), item)))
    return out


def listed_names(text: str) -> list[Name]:
    """The names a list of people holds, one per item (see :func:`listed`).

    >>> [n.text for n in listed_names("Alexander Gadolin, Finnish jurist ; Johan Gadolin, Finnish chemist")]
    ['Alexander Gadolin', 'Johan Gadolin']
    """
    found = (Name.of(m.group("subj")) for zh in (False, True) for _, m in _items(text, zh=zh))
    return [n for n in found if n is not None]


def _items(text: str, *, zh: bool) -> list[tuple[str, re.Match[str]]]:
    """The items of ``text`` written as a list of people, each with its match; none for prose."""
    text = html.unescape(text)
    if not re.search(r"[;；\n]", text):  # one sentence with a comma is no list
        return []
    out = []
    for item in re.split(r"\s*[;；]\s*|\n+", text):
        item = item.strip()
        m = (_ZH_ITEM if zh else _EN_ITEM).match(item) if len(item.split()) <= 30 else None
        if m is not None:
            out.append((item, m))
    return out

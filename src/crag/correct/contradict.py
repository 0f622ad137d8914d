"""Contradiction detection: flag strips that state different values for the same subject.

The article (3.2): for conflicting information, "保留多种观点并提示生成模型进行说明" — keep
every version and tell the generator to present them with their sources. This module
finds the pairs; :data:`CONFLICT_INSTRUCTION` is the text appended to the prompt.

Two strips conflict when they talk about the same subject (their content terms overlap)
and either give different years or different numbers for the same unit, or one negates
what the other states ("不是", "not", "never").

>>> a = "The Eiffel Tower was completed in 1889."
>>> b = "The Eiffel Tower was completed in 1887."
>>> detect_conflicts([a, b])
[Conflict(a_index=0, b_index=1, reason='different years: 1889 vs 1887')]
>>> print(conflict_instruction(detect_conflicts([a, b]), "en"))  # doctest: +ELLIPSIS
The sources disagree: [1] vs [2] (different years). ...

The instruction names the sources and the kind of disagreement, never the values: it goes
into the system prompt, where no document's words belong (a document could write its
"values" as instructions).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from crag.correct.diversity import jaccard, trigrams
from crag.text import EN_STOP, tokenize
from crag.types import Strip

CONFLICT_INSTRUCTION = {
    "en": (
        "The sources disagree: {pairs}. Do not silently choose one version: state each "
        "version with its source number, say that the sources conflict, and prefer none "
        "unless the context shows why one is more reliable."
    ),
    "zh": (
        "以下来源的说法相互矛盾：{pairs}。不要擅自只采用其中一种说法：请分别陈述每种说法并标注其来源编号，"
        "说明来源之间存在矛盾；除非上下文表明某一来源更可靠，否则不要偏向任何一方。"
    ),
}

SUBJECT_OVERLAP = 0.35  # content-term Jaccard above which two strips talk about the same thing
RESTATEMENT_OVERLAP = 0.5  # stricter: the same sentence with one value or a negation changed

_NEGATION = re.compile(
    r"不是|并非|并不|没有|未曾|从未|不曾|绝非|不再|不属于|无法"
    r"|\b(?:not|never|no longer|isn't|wasn't|aren't|weren't|doesn't|didn't|cannot|can't|neither|nor)\b",
    re.IGNORECASE,
)
_VALUE = re.compile(r"(?<![A-Za-z0-9.])(\d[\d,]*(?:\.\d+)?)\s*(%|[A-Za-z]+|[\u4e00-\u9fff])?")
_YEAR_UNITS = {"", "年", "年代", "ad", "bc", "bce", "ce"}


class Conflict(NamedTuple):
    """Strips ``a_index`` and ``b_index`` (positions in the list given) disagree, and why."""

    a_index: int
    b_index: int
    reason: str


class _Facts(NamedTuple):
    terms: set[str]
    years: set[str]
    values: dict[str, set[str]]  # unit -> values
    bare: set[str]  # numbers without a unit
    negated: bool
    grams: set[str]


def _facts(text: str) -> _Facts:
    terms = {t for t in tokenize(text, search_mode=False) if len(t) >= 2 and not t[0].isdigit()}
    years: set[str] = set()
    values: dict[str, set[str]] = {}
    bare: set[str] = set()
    for m in _VALUE.finditer(text):
        number = m.group(1).replace(",", "")
        unit = (m.group(2) or "").lower()
        if unit in EN_STOP:
            unit = ""  # "in 1889 and" — the next word is not a unit
        if re.fullmatch(r"1\d{3}|20\d{2}", number) and unit in _YEAR_UNITS:
            years.add(number)
        elif unit:
            values.setdefault(unit, set()).add(number)
        elif len(number.replace(".", "")) >= 2:  # single digits are too common to compare
            bare.add(number)
    return _Facts(terms, years, values, bare, bool(_NEGATION.search(text)), trigrams(_NEGATION.sub("", text)))


def _conflict(a: _Facts, b: _Facts) -> str:
    overlap = jaccard(a.terms, b.terms)
    # Two shared terms make a subject; a short Chinese strip may have only one (埃菲尔铁塔高330米).
    need = max(1, min(2, len(a.terms), len(b.terms)))
    if len(a.terms & b.terms) < need or overlap < SUBJECT_OVERLAP:
        return ""
    if a.years and b.years and not a.years & b.years:
        return f"different years: {'/'.join(sorted(a.years))} vs {'/'.join(sorted(b.years))}"
    for unit in sorted(a.values.keys() & b.values.keys()):
        va, vb = a.values[unit], b.values[unit]
        if not va & vb:
            return f"different values: {'/'.join(sorted(va))} {unit} vs {'/'.join(sorted(vb))} {unit}"
    restated = overlap >= RESTATEMENT_OVERLAP or jaccard(a.grams, b.grams) >= RESTATEMENT_OVERLAP
    if restated and a.bare and b.bare and not a.bare & b.bare:
        return f"different numbers: {'/'.join(sorted(a.bare))} vs {'/'.join(sorted(b.bare))}"
    if restated and a.negated != b.negated:
        return "one source negates what the other states"
    return ""


def detect_conflicts(strips: Sequence[Strip] | Sequence[str]) -> list[Conflict]:
    """Every pair of strips (or texts) that disagree, in index order.

    >>> detect_conflicts(["鲁迅不是浙江绍兴人。", "鲁迅是浙江绍兴人。"])
    [Conflict(a_index=0, b_index=1, reason='one source negates what the other states')]
    >>> detect_conflicts(["The tower is 330 m tall.", "Paris has 2 million people."])
    []
    """
    texts = [s.text if isinstance(s, Strip) else s for s in strips]
    facts = [_facts(t) for t in texts]
    out: list[Conflict] = []
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if texts[i].strip() == texts[j].strip():
                continue
            reason = _conflict(facts[i], facts[j])
            if reason:
                out.append(Conflict(i, j, reason))
    return out


def conflict_instruction(conflicts: Sequence[Conflict], lang: str) -> str:
    """The instruction for the generator prompt ("" when nothing conflicts).

    Indices become 1-based source numbers, matching the ``[n]`` the generator cites when
    the conflicts were detected on the final context list.
    """
    if not conflicts:
        return ""
    sep = "；" if lang == "zh" else "; "
    kinds = _KINDS.get(lang, {})
    pairs = sep.join(f"[{c.a_index + 1}] vs [{c.b_index + 1}] ({_kind(c.reason, kinds)})" for c in conflicts)
    return CONFLICT_INSTRUCTION.get(lang, CONFLICT_INSTRUCTION["en"]).format(pairs=pairs)


# The kinds of disagreement _conflict reports, the words before its colon (what follows
# the colon is the documents' own values).
_KINDS = {
    "zh": {
        "different years": "年份不同",
        "different values": "数值不同",
        "different numbers": "数字不同",
        "one source negates what the other states": "一方否定另一方的说法",
    },
}


def _kind(reason: str, names: dict[str, str]) -> str:
    kind = reason.split(":", 1)[0].strip()
    return names.get(kind, kind)

"""Is an answer backed by its sources? The evidence check behind a refusal.

An answer brings *new* content words: those not already in the question (the subject
it restates) and not the words every answer uses ("source", "according", 资料…). When a
model invents, they are absent from the sources: "The design life is 20 years" from
sources that give no figure, a birthplace no source names. Such an answer is not shown:
the engine refuses instead (:mod:`crag.generate.answer`).

The check is lexical on purpose: cheap, the same for every model, in both languages
(Chinese by substring over the sources, English by word with light stemming), and
every number must be in a source exactly, since a wrong figure is the costliest
hallucination. Hedges ("approximately", 大约) claim nothing and are not counted.

>>> src = ["Edward Corser (1852 – 1928) was an Australian politician."]
>>> grounded("Edward Corser was an Australian politician [1].", "What was Corser's job?", src)
True
>>> unsupported_terms("His wife was born in Brisbane [1].", "Where was Corser's wife born?", src)
['brisbane']
>>> grounded("设计寿命是20年。", "鑫诺一号的设计寿命是多少年？", ["鑫诺一号于1998年发射。"])
False
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from crag.generate.citations import CITE
from crag.text import EN_STOP, ZH_STOP, tokenize

MIN_SUPPORT = 0.5  # share of the answer's new content words the sources must contain

# Words any answer may use about its sources or as a reply; they carry no claim.
_META = frozenset(
    """source sources document documents text texts context passage passages according mention mentions
    mentioned state states stated say says said provided given information answer yes no true false
    资料 来源 根据 提到 提及 显示 表明 文中 所述 记载 答案 信息 是的 不是 没有 可以""".split()
)
# Hedges qualify a figure, they claim nothing: "approximately 260 km" is grounded by "roughly 260 km".
_HEDGES = frozenset(
    """approximately approx roughly around nearly almost exactly estimated circa least
    大约 大概 左右 将近 差不多 超过 至少 大致""".split()
)
_NO_CLAIM = _META | _HEDGES
# "source 2", "资料2": a reference to a source by its number, not a figure the answer claims.
_SOURCE_REF = re.compile(
    r"\b(?:sources?|documents?|passages?)\s*(?:number|no\.?|#)?\s*\d{1,3}(?!\d)"
    r"|(?:资料|来源|文档|段落)\s*(?:编号|第)?\s*\d{1,3}(?!\d)|第\s*\d{1,3}\s*(?:条|个|篇|段)?\s*(?:资料|来源)",
    re.I,
)
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# A unit in each language's forms: a Chinese source's 毫安时 holds an English claim's "mAh".
UNITS: dict[str, tuple[str, ...]] = {
    "mah": ("mah", "毫安时", "毫安", "milliamp"),
    "wh": ("wh", "瓦时"),
    "kg": ("kg", "公斤", "千克", "kilogram"),
    "g": ("g", "克", "gram"),
    "km": ("km", "公里", "千米", "kilometer", "kilometre"),
    "m": ("m", "米", "meter", "metre"),
    "cm": ("cm", "厘米", "centimeter", "centimetre"),
    "mm": ("mm", "毫米", "millimeter", "millimetre"),
    "gb": ("gb", "g"),
    "tb": ("tb", "t"),
    "w": ("w", "瓦", "watt"),
    "v": ("v", "伏", "volt"),
    "hz": ("hz", "赫兹"),
    "yuan": ("yuan", "元", "rmb", "cny", "¥", "￥"),
    "usd": ("usd", "$", "dollar", "美元"),
    "%": ("%", "percent", "百分之", "％"),
    "h": ("h", "小时", "hour"),
    "min": ("min", "分钟", "minute"),
    "°c": ("°c", "℃", "celsius", "摄氏度", "摄氏"),
    "°f": ("°f", "℉", "fahrenheit", "华氏度", "华氏"),
    "degree": ("degree", "°", "度"),
}
for _key, _forms in list(UNITS.items()):
    for _form in _forms:
        UNITS.setdefault(_form, _forms)
# Units a model spells out, read as their symbol: "5200 milliamp hours" claims "5200 mAh".
_SPELLED_UNITS = (
    (re.compile(r"\bmilli-?amp(?:ere)?s?[- ]?hours?\b", re.I), "mAh"),
    (re.compile(r"\bwatt[- ]?hours?\b", re.I), "Wh"),
)
_NUM_SEP = re.compile(r"(?<=\d)[,，](?=\d{3})")
_ACRONYM = re.compile(r"\b[A-Z]{2}\b")
_BRITISH_RE = re.compile(r"(?<=[a-z]{2})([tb])re(s?)$")  # centre(s), metre, fibre
_BRITISH_OUR = re.compile(r"(?<=[a-z]{3})our$")  # colour, harbour, labour
_BRITISH_IZE = re.compile(r"(?<=[a-z]{3})is(?=(?:e|ed|es|ing|ation|ations)$)")  # organise(d), realisation
_CODE = re.compile(r"^(?:[a-z]\d|\d[a-z])$")  # "L2", "F1", "3G": a two-character code is an answer too
# A figure: digits, with a decimal part ("14.2"); thousands separators are removed before.
_FIGURE = re.compile(r"\d+(?:\.\d+)?")
# Questions answered by choosing: yes/no, either-or (是否…, …吗, …还是…).
_CLOSED = re.compile(
    r"^\s*(?:is|are|was|were|do|does|did|can|could|will|would|has|have|had|should|shall|may|must)\b"
    r"|\bor\b|是否|还是|是不是|有没有|能否|可否|吗[？?]?\s*$",
    re.I,
)


class SourceTerms:
    """What one text (a source, or several joined) contains, for looking claim words up in it.

    >>> SourceTerms("Warsaw lies roughly 260 kilometres away.").has("kilometers"), SourceTerms("鑫诺一号").has("20")
    (True, False)
    """

    def __init__(self, text: str) -> None:
        self.corpus = _NUM_SEP.sub("", text).lower()
        self.words = {_stem(t) for t in tokenize(self.corpus, keep_stopwords=True)}

    def has(self, term: str) -> bool:
        return _found(term, self.corpus, self.words)


def new_terms(answer: str, question: str) -> list[str]:
    """The answer's content words the question does not already hold: what it claims."""
    return _new_terms(answer, question)


def is_closed(question: str) -> bool:
    """A yes/no or either-or question, answered in its own words."""
    return bool(_CLOSED.search(question))


def unsupported_terms(answer: str, question: str, sources: Sequence[str]) -> list[str]:
    """The answer's new content words that no source contains, in answer order."""
    found = SourceTerms(" ".join(sources))
    return [t for t in _new_terms(answer, question) if not found.has(t)]


def supports(terms: Sequence[str], found: SourceTerms, *, min_support: float = MIN_SUPPORT) -> bool:
    """True when ``found`` holds every figure among ``terms`` and at least ``min_support`` of them."""
    if not terms:
        return True
    missing = [t for t in terms if not found.has(t)]
    if any(_FIGURE.fullmatch(t) for t in missing):
        return False
    return 1.0 - len(missing) / len(terms) >= min_support


def grounded(answer: str, question: str, sources: Sequence[str], *, min_support: float = MIN_SUPPORT) -> bool:
    """True when at least ``min_support`` of the answer's new content words are in the sources
    and every new figure is: a wrong number is not excused by the words around it.

    An answer that adds nothing to the question (it only restates it) counts as grounded:
    there is nothing in it to check.

    >>> src = ["Warsaw lies roughly 260 kilometres from the Baltic Sea."]
    >>> grounded("About 260 kilometers [1].", "How far is Warsaw from the sea?", src)
    True
    >>> grounded("About 350 kilometers [1].", "How far is Warsaw from the sea?", src)
    False
    >>> grounded("沃夫424距离太阳大约14.2光年。", "沃夫424距离太阳多远？", ["它将接近太阳至1光年距离上。"])
    False
    """
    return supports(_new_terms(answer, question), SourceTerms(" ".join(sources)), min_support=min_support)


def adds_nothing(answer: str, question: str) -> bool:
    """True when the answer only restates an open question ("Who was X's enemy?" → "X's enemy was X").

    Yes/no and either-or questions are answered in their own words, so they never count.

    >>> adds_nothing("The Normans' main enemy in Italy was the Byzantine Empire.",
    ...              "Who was the Normans' main enemy in Italy, the Byzantine Empire?")
    True
    >>> adds_nothing("Two classes between L and P are NL and NC [2].", "What are two classes between L and P?")
    False
    >>> adds_nothing("Yes, it is [1].", "Is the tower taller than the bridge?")
    False
    >>> adds_nothing("上海轨道交通16号线的编号是L2。[1]", "上海轨道交通16号线的编号是多少？")
    False
    """
    return not _CLOSED.search(question) and not _new_terms(answer, question)


def _new_terms(answer: str, question: str) -> list[str]:
    asked = {_stem(t) for t in tokenize(_NUM_SEP.sub("", question), keep_stopwords=True)}
    asked_text = question.lower()
    text = _NUM_SEP.sub("", _SOURCE_REF.sub(" ", CITE.sub(" ", answer)))
    text = symbol_units(text)
    acronyms = {m.lower() for m in _ACRONYM.findall(text)}  # "NL", "NC": short but they are the answer
    out: list[str] = []
    for tok in tokenize(text, search_mode=False):
        t = tok.lower()
        if t in out or t in _NO_CLAIM or _stem(t) in asked:
            continue
        if (t in EN_STOP or t in ZH_STOP) and t not in acronyms:
            continue
        if _CJK.search(t) and (len(t) < 2 or t in asked_text):
            continue  # single characters are particles; a word the question used is not new
        if not _CJK.search(t) and len(t) < 3 and not t.isdigit() and t not in acronyms and not _CODE.match(t):
            continue
        out.append(t)
    return out


def symbol_units(text: str) -> str:
    """``text`` with spelled-out units as their symbol ("5200 milliamp hours" → "5200 mAh").

    >>> symbol_units("It holds 5200 milliampere-hours.")
    'It holds 5200 mAh.'
    """
    for spelled, symbol in _SPELLED_UNITS:
        text = spelled.sub(symbol, text)
    return text


def _found(term: str, corpus: str, words: set[str]) -> bool:
    if _CJK.search(term):
        return term in corpus or any(form in corpus for form in UNITS.get(term, ()))
    if term in UNITS and term not in ("m", "g", "h", "v", "w"):  # one letter is too common to stand for a unit
        return any(form in corpus for form in UNITS[term]) or _stem(term) in words
    if term.isdigit():  # "14" is found in "14.2" (rounded), not in "140"
        return re.search(rf"(?<!\d){term}(?!\d)", corpus) is not None
    if _FIGURE.fullmatch(term):  # "14.2" is not in "14.25" or "114.2"
        return re.search(rf"(?<![\d.]){re.escape(term)}(?!\d)", corpus) is not None
    return _stem(term) in words


def _stem(word: str) -> str:
    """Light English stemming, so "politicians" matches "politician" and "founded" "founding".

    British and American spellings meet too (a model writes "kilometers" for a source's
    "kilometres"): -tre/-bre as -ter/-ber, -our as -or, -ise as -ize.

    >>> [_stem(w) for w in ("kilometres", "kilometers", "colour", "organised", "organized")]
    ['kilometer', 'kilometer', 'color', 'organiz', 'organiz']
    """
    w = re.sub(r"['’]s$", "", word.lower())
    w = _BRITISH_RE.sub(r"\1er\2", _BRITISH_IZE.sub("iz", w))
    for suffix in ("ies", "es", "s", "ed", "ing", "ly"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            w = w[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return _BRITISH_OUR.sub("or", w)

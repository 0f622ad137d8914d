"""Relevance signals shared by evaluators and strip scoring: dense, keyword, coverage."""

from __future__ import annotations

import math
import re
from itertools import pairwise

from crag.synonyms import align
from crag.text import tokenize

_CJK_RUN = re.compile(r"[\u4e00-\u9fff]")


def coverage(query: str, passage: str) -> float:
    """Share of the query's content words found in the passage (IDF-free, length-weighted).

    Chinese words are matched as substrings too, because jieba may segment the same
    phrase differently in a question and in a passage.
    """
    q = [t for t in dict.fromkeys(tokenize(query)) if len(t) > 1 or t.isdigit()]
    if not q:
        return 0.0
    passage = align(q, passage)  # 创办 holds 成立, "established" holds "founded"
    p_tokens = set(tokenize(passage))
    low = passage.lower()
    hit = total = 0.0
    for t in q:
        w = min(len(t), 6) if _CJK_RUN.match(t) else min(len(t), 8) / 2
        total += w
        if t in p_tokens or (_CJK_RUN.match(t) and t in passage) or (len(t) > 3 and t in low):
            hit += w
    return hit / total if total else 0.0


def squash(x: float, center: float, scale: float) -> float:
    """Logistic map of a raw score onto (0, 1)."""
    return 1.0 / (1.0 + math.exp(-(x - center) / scale))


def bm25_norm(score: float | None, half: float = 4.0) -> float:
    """Saturating map of a raw BM25 score: ``half`` maps to 0.5."""
    if not score or score <= 0:
        return 0.0
    return score / (score + half)


# -- what a question asks for, and what it is about ------------------------------------------
_EN_WORD = re.compile(r"[A-Za-z0-9]+(?:['’-][A-Za-z0-9]+)*")
_CODE = re.compile(r"^(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9-]+$")  # S5, K2, E23P: a product's name
_EN_QUESTION = frozenset(
    "what which who whom whose when where why how is are was were do does did can could will would has have had "
    "should shall may must".split()
)
# Where a Chinese question's subject ends: its last 的, else the first verb or preposition after it.
_ZH_PREDICATE = frozenset("是 有 在 给 为 叫 属于 位于 由 被 把 对 向 从 能 会 可以 需要 提供 配 获得 享有".split())
_ZH_PARTICLE = frozenset(
    (
        "的 了 是 在 和 与 及 也 都 就 而 被 把 对 于 从 以 之 其 这 那 有 给 为 叫 吗 呢 吧 啊 个 等 中 上 下 里 第 "
        "所 辆 台 位 名"  # measure words: 哪所大学, 多少辆
    ).split()
)
_ZH_WH = frozenset(
    "谁 什么 哪 哪里 哪儿 哪个 哪些 哪位 哪一年 哪年 哪天 哪所 哪家 多少 几 几个 几天 几年 何时 何地 怎么 怎样 如何 "
    "为什么 为何 吗 呢 是否 时候 多久".split()
)


def question_focus(question: str) -> tuple[list[str], list[str]]:
    """The question's ``subject`` words (what it is about) and ``focus`` words (what it asks of it).

    A near miss is a passage about the subject that lacks the focus: "Who is the CEO of Kestrel
    Labs?" asks "CEO" of "Kestrel Labs", and the sales director's page covers only the subject.
    English: names (Title case, codes like S5) are the subject, the other content words the
    focus. Chinese: what comes before the last 的 is the subject ("云雀S5的电池容量"), else the
    words before the first verb or preposition ("新员工有几天年假").

    >>> question_focus("Who is the CEO of Kestrel Labs?")
    (['kestrel', 'labs'], ['ceo'])
    >>> question_focus("What is the Yunque S5 battery capacity?")
    (['yunque', 's5'], ['battery', 'capacity'])
    >>> question_focus("红隼实验室的首席执行官是谁？")
    (['红隼', '实验室'], ['首席', '执行官'])
    >>> question_focus("新员工有几天年假？"), question_focus("红隼实验室给员工配公司车吗？")[1]
    ((['新员工'], ['年假']), ['员工', '公司车'])
    """
    if _CJK_RUN.search(question):
        return _zh_focus(question)
    subject: list[str] = []
    focus: list[str] = []
    content = set(tokenize(question))
    after_how = False
    for i, m in enumerate(_EN_WORD.finditer(question)):
        word = m.group(0)
        low = word.lower()
        asked, after_how = after_how, low == "how"  # "how far", "how many": the question's own words
        if low in _EN_QUESTION or low not in content or asked:
            continue
        named = (word[0].isupper() and not word.isupper() and i > 0) or bool(_CODE.match(word))
        (subject if named else focus).append(re.sub(r"['’]s$", "", low))
    return list(dict.fromkeys(subject)), list(dict.fromkeys(focus))


# "what year was", "which modern language", "what types of organisms did": the words after
# what / which up to the verb (an auxiliary, a past form) or preposition; the last is the kind of thing asked for.
_EN_WH_PHRASE = re.compile(
    r"\b(?:what|which)\s+(?!(?:is|are|was|were|do|does|did|has|have|had|can|could|will|would|the|a|an|of)\b)"
    r"(?:(?:kinds?|types?|sorts?)\s+of\s+)?((?:[a-z][\w'-]*\s+){0,2}?[a-z][\w'-]*)"
    r"(?=\s+(?:is|are|was|were|do|does|did|has|have|had|can|could|will|would|should|may|might|of|in|on|at|for|"
    r"from|to|by|with|that|[a-z]+ed)\b|\s*[?？.]?\s*$)",
    re.I,
)
_ZH_WH_NOUN = frozenset("什么 哪个 哪家 哪所 哪位 哪种 哪些 哪一个 哪一种 何种".split())


def asked_kind(question: str) -> list[str]:
    """The noun naming the kind of thing a question asks for, which the answer fills rather
    than writes: "year" of "What year was X founded?", "organisms" of "In what types of
    organisms did…", 学校 of "到香港什么学校修读". Its modifiers stay asked ("modern" of
    "which modern language").

    >>> asked_kind("What year was the University of Warsaw established?"), asked_kind("意见领袖一词源自于什么理论？")
    (['year'], ['理论'])
    >>> asked_kind("Which modern language does it come from?"), asked_kind("What is the CEO's name?")
    (['language'], [])
    """
    if _CJK_RUN.search(question):
        from crag.text import zh_pos

        tagged = zh_pos(question)
        return [w.lower() for (wh, _), (w, tag) in pairwise(tagged) if wh in _ZH_WH_NOUN and tag.startswith("n")][:1]
    m = _EN_WH_PHRASE.search(question)
    head = m.group(1).split()[-1].lower() if m else ""
    return [head] if head and head not in _EN_QUESTION else []


def _zh_focus(question: str) -> tuple[list[str], list[str]]:
    from crag.text import zh_pos

    tagged = zh_pos(question)
    words = [w for w, _ in tagged]
    # The subject ends at the last 的 that a content word follows ("云雀S5的电池容量"); a 的
    # closing the question ("是哪一年启用的") ends nothing.
    cut = max((i for i, w in enumerate(words) if w == "的" and _content_after(words, i)), default=-1)
    if cut < 0:
        cut = next((i for i, w in enumerate(words) if i and w in _ZH_PREDICATE), len(words))
    subject = _zh_keep(words[:cut])
    focus = _zh_keep(words[cut + 1 :] if words[cut : cut + 1] == ["的"] else words[cut:])
    if not focus:  # "红隼实验室成都办公室是哪一年启用的": the predicate comes after the asked word
        subject, focus = _zh_by_name(subject, dict(tagged))
    return subject, focus


def _content_after(words: list[str], i: int) -> bool:
    return any(_CJK_RUN.match(w) and w not in _ZH_WH and w not in _ZH_PARTICLE for w in words[i + 1 :])


def _zh_keep(part: list[str]) -> list[str]:
    """Content words of ``part``, lower-cased, without question words and particles."""
    # jieba cuts rare words into characters (红 隼, 年 假): a run of them is one word again
    merged: list[str] = []
    run = ""
    glue = False  # the last word kept came right before: a lone character joins it (公司 车)
    for w in [*part, ""]:
        if len(w) == 1 and _CJK_RUN.match(w) and w not in _ZH_WH and w not in _ZH_PARTICLE | _ZH_PREDICATE:
            run += w
            continue
        if run and len(run) == 1 and glue and merged:
            merged[-1] += run  # 公司 + 车
        elif len(run) > 1:
            merged.append(run)
        elif run and len(w) > 1:
            w = run + w  # 新 + 员工
        run = ""
        glue = len(w) > 1 and w not in _ZH_WH and w not in _ZH_PREDICATE and bool(_CJK_RUN.match(w) or w.isalnum())
        if glue:
            merged.append(w.lower())
    return list(dict.fromkeys(merged))


_ZH_NAME_TAGS = frozenset({"nr", "ns", "nt", "nz", "nrt", "nrfg"})


def _zh_by_name(words: list[str], tags: dict[str, str]) -> tuple[list[str], list[str]]:
    """Split content words with no 的 to cut at: names (a tagged proper noun, an English name or
    code, characters jieba could not join) and the word right after each are the subject, the
    other words are what is asked: 红隼 实验室 | 启用, Larkspur | 召回 滑板车.

    >>> tags = {"实验室": "n", "成都": "ns", "办公室": "n", "启用": "v"}
    >>> _zh_by_name(["红隼", "实验室", "成都", "办公室", "启用"], tags)
    (['红隼', '实验室', '成都', '办公室'], ['启用'])
    """
    subject: list[str] = []
    focus: list[str] = []
    after_name = False  # only in the leading name phrase: 青岚 科技, 成都 办公室 (not 王磊 毕业)
    for w in words:
        tag = tags.get(w)
        named = tag in _ZH_NAME_TAGS or (tag is None and _CJK_RUN.match(w) is not None) or _en_name(w, tags)
        if named or (after_name and tag == "n"):
            subject.append(w)
            after_name = bool(named) and not focus
        else:
            focus.append(w)
            after_name = False
    return subject, focus


def _en_name(word: str, tags: dict[str, str]) -> bool:
    """A Latin word in a Chinese question is a name when written Title-case or as a code (S5)."""
    original = next((t for t in tags if t.lower() == word and t.isascii()), "")
    return bool(original) and ((original[0].isupper() and not original.isupper()) or bool(_CODE.match(original)))


def focus_coverage(focus: list[str], passage: str, sentences: list[str]) -> tuple[float, float]:
    """Share of ``focus`` words in the passage, and the most of them one sentence (with the one
    before it) holds; (1.0, 1.0) when the question has no focus words.

    >>> focus_coverage(["ceo"], "Wang Lei is the sales director.", ["Wang Lei is the sales director."])
    (0.0, 0.0)
    """
    if not focus:
        return 1.0, 1.0
    low = passage.lower()
    whole = sum(1 for t in focus if t in low) / len(focus)
    best = 0.0
    prev = ""
    for s in sentences[:80]:
        window = (prev + " " + s).lower()
        best = max(best, sum(1 for t in focus if t in window) / len(focus))
        prev = s
    return whole, best

"""Search-query rewriting for the correction step. The user's question is never replaced.

Without an LLM, queries come from a keyword extractor (jieba for Chinese): the
question's content words, and a second query aimed at the *information gap* — the
question's meaningful terms (entities, numbers, rare nouns) that the retrieved
documents do not contain. With an LLM (opt-in), the model reads the question and what
was retrieved and proposes queries for what is missing.

>>> from crag.types import Query
>>> keyword_queries(Query.of("Who designed the Eiffel Tower?"), ["The tower in Paris is 330 metres tall."])
['designed eiffel tower', 'eiffel tower']

The second query anchors the missing entity ("eiffel") on a term the documents do
share ("tower"), so it searches for what the first retrieval lacked. Generic words
("came", "year", "example") never make a gap query on their own. Words that carry the
relation the question asks about (after, first, largest, 之后, 第一 …), numbers and
quoted names are always kept, in the question's order: without them "What dynasty came
after the Yuan?" searches for the Yuan itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache

from crag.correct.names import dotted_names
from crag.errors import LLMReplyError
from crag.protocols import LLM
from crag.redact import clip
from crag.text import keywords, zh_pos
from crag.types import Query

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_REWRITE_PROMPT = {
    "en": (
        "You write web search queries. Question: {q}\n"
        "The documents found so far say:\n{docs}\n"
        "First decide what information the documents lack to answer the question, then write "
        "up to {n} short search queries (keywords, no full sentences) that would find exactly that. "
        "Keep the question's names and numbers. "
        'Reply as JSON: {{"queries": ["...", "..."]}}'
    ),
    "zh": (
        "你负责编写搜索查询。问题：{q}\n目前检索到的文档内容：\n{docs}\n"
        "先判断这些文档缺少回答该问题所需的哪些信息，再写出最多{n}个简短的搜索查询（关键词形式），"
        "专门查找这些缺失的信息。保留问题中的名称和数字。"
        '以JSON格式回复：{{"queries": ["...", "..."]}}'
    ),
}

# Words that shape a question but name nothing: searching for them adds noise.
_FILLER = frozenset(
    """哪一年 哪年 哪场 哪条 哪家 哪位 哪种 哪一 几个 几年 什么时候 时候 地方 本身 方面 东西 情况 有关 相关 主要
    曾经 真正 可能 导致 使用 用于 属于 具有 称为 作为 成为 进行
    name names type types kind kinds example examples called rather along according given
    used use using came come comes went go goes got get gets made make makes did does
    way ways thing things part parts one two three first many much""".split()
)
# Generic nouns that are valid keywords but too vague to carry a gap query alone.
_GENERIC = frozenset(
    """时间 地点 地方 时候 名字 名称 原因 作用 意思 问题 类型 种类 年份 后果 结果 方式 方法 内容 情况 地区 国家 公司
    year years time times place places people person reason result number amount area country city""".split()
)
_EN_WEAK_SUFFIX = ("ly", "ed", "ing")
# Words that carry the relation a question asks about. Stop-word lists drop most of them
# ("after", "first"), yet they are what separates the answer from the entity it is about.
_RELATION_EN = frozenset(
    """after before first last next previous preceded preceding succeeded succeeding successor
    predecessor following followed earliest latest oldest newest youngest largest biggest smallest
    highest lowest longest shortest most least second third fourth fifth final former later
    earlier until since""".split()
)
_RELATION_ZH = (
    "之后 以后 之前 以前 此前 后来 第一 第二 第三 首个 首位 首次 最早 最晚 最后 最大 最小 最高 最低 "
    "最长 最短 最多 最少 最新 继任 前任 接替 取代 下一 上一"
).split()
# A quoted name is one term: its words alone would match every text that uses them.
_QUOTED = re.compile(r'"([^"]{2,80})"|“([^”]{2,80})”|「([^」]{1,80})」|『([^』]{1,80})』|《([^》]{1,80})》')
# Full-width digits and letters (１８８７, ＩＢＭ) as ASCII, as the keyword tokenizer reads them: a
# number must not be searched twice. Full-width punctuation stays, so quoted titles are kept as written.
_HALF_WIDTH = {c: c - 0xFEE0 for r in ((0xFF10, 0xFF1A), (0xFF21, 0xFF3B), (0xFF41, 0xFF5B)) for c in range(*r)}
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# jieba POS tags of entity-like words: nouns (person, place, organisation, other proper),
# time words, Latin words and numerals.
_ZH_ENTITY_POS = ("n", "t", "eng", "m")
# One-character words that are never part of a name: pronouns, particles, prepositions,
# conjunctions, common adverbs, verbs of being, measure words, localisers, question words.
_ZH_FUNCTION_CHARS = frozenset(
    "的了着过地得之所其是有在从向往对于被把由和与及或跟同也都就又才还很最更这那哪谁他她它我你们该此各每某"
    "个只条座位名种次年月日号上下中里内外前后间吗呢吧啊么什怎几多何不没无未将会能要可让给为以等叫称做"
)


def keyword_queries(query: Query, docs: Sequence[str], *, max_queries: int = 2) -> list[str]:
    """Keyword rewrite plus an information-gap query (meaningful terms the documents lack).

    The first query is the question's content words without question filler; the
    second, only when it is narrower and meaningful, is the missing entity-like terms
    anchored on the most specific term the documents do contain.

    >>> keyword_queries(Query.of("What dynasty came after the Yuan?"), ["The Yuan dynasty was founded by Kublai Khan."])
    ['dynasty after yuan']
    >>> keyword_queries(Query.of('Who was the first editor of "The Economist"?'), [])
    ['first editor "The Economist"']
    """
    question = query.text.translate(_HALF_WIDTH)
    words = _with_names(question, keywords(question, limit=8), zh=query.language == "zh")
    content = [w for w in words if w.lower() not in _FILLER or w.lower() in _RELATION_EN]
    content = _with_anchors(question, content) or words or [question.strip()]
    queries = [" ".join(content)]
    if max_queries > 1 and docs:
        gap_query = _gap_query(question, content, docs)
        if gap_query:
            queries.append(gap_query)
    return _dedupe(queries)[:max_queries]


def _with_anchors(question: str, words: list[str]) -> list[str]:
    """``words`` plus the question's relation words, numbers and quoted names, in question order."""
    low = question.lower()
    terms: dict[str, int] = {}
    quoted = []
    for m in _QUOTED.finditer(question):
        inner = next(g for g in m.groups() if g)
        quoted.append(inner.lower())
        terms[m.group(0) if m.group(0)[0] in "《「『" else f'"{inner}"'] = m.start()
    for w in words:
        if not any(w.lower() in q for q in quoted):  # already inside a quoted name
            terms.setdefault(w, _position(low, w.lower()))
    for m in re.finditer(r"[a-z]+", low):
        if m.group(0) in _RELATION_EN:
            terms.setdefault(m.group(0), m.start())
    for rel in _RELATION_ZH:
        at = question.find(rel)
        if at >= 0 and not any(rel in t for t in terms):
            terms[rel] = at
    for m in _NUMBER.finditer(question):
        if not any(m.group(0) in t for t in terms):
            terms[m.group(0)] = m.start()
    return sorted(terms, key=lambda t: terms[t])


def _with_names(question: str, words: list[str], *, zh: bool) -> list[str]:
    """``words`` with the question's split names whole: 司马晏 for 司马, 祭遵 where nothing was kept,
    理查德·哈里斯 for 理查德 哈里斯出 (a word that runs into a name is dropped with it)."""
    dotted = dotted_names(question) if zh else []
    spans = [(at, at + len(n)) for n in dotted if (at := question.find(n)) >= 0]
    names = [n for n in _zh_names(question) if not _overlaps(question.find(n), len(n), spans)] if zh else []
    names += dotted
    if not names:
        return words
    kept = [w for w in words if not any(w in n for n in names) and not _overlaps(question.find(w), len(w), spans)]
    return sorted([*kept, *names], key=lambda t: _position(question.lower(), t.lower()))


def _overlaps(at: int, size: int, spans: Sequence[tuple[int, int]]) -> bool:
    return at >= 0 and any(at < end and at + size > start for start, end in spans)


def _zh_names(question: str) -> list[str]:
    """Names jieba cuts into single characters (祭遵 → 祭 遵, 朱祐杬 → 朱 祐 杬, 司马晏 → 司马 晏), joined.

    Keywords skip one-character words, so an unknown name vanished from the query
    ("祭遵小时候喜欢读什么书？" was searched as "小时候 喜欢"). A run of one-character words
    that are not function words is one term, and so is a person-name word with the
    characters that follow it. The function words are listed by character: jieba's tags
    for rare name characters are unreliable (繇 comes out as a preposition).
    """
    names: list[str] = []
    run: list[str] = []
    for word, flag in [*zh_pos(question), ("", "x")]:  # the empty word ends the last run
        if len(word) == 1 and "\u4e00" <= word <= "\u9fff" and word not in _ZH_FUNCTION_CHARS:
            run.append(word)
            continue
        # A run is a name once it holds a one-character piece: a name word alone is a keyword already.
        if any(len(w) == 1 for w in run) and len("".join(run)) >= 2:
            names.append("".join(run))
        # A surname word (司马) starts the next run.
        run = [word] if flag.startswith("nr") and len(word) > 1 and _is_chinese(word) else []
    return names


def _is_chinese(word: str) -> bool:
    """A word written in Chinese characters (its script, not the question's language)."""
    return bool(_HAN.search(word))


def _position(low: str, word: str) -> int:
    at = low.find(word)
    return at if at >= 0 else len(low)


def gap_terms(query: Query, docs: Sequence[str]) -> list[str]:
    """The question's meaningful terms (entities, numbers, rare nouns) missing from ``docs``.

    >>> gap_terms(Query.of("When did Newcomen build his engine?"), ["Watt improved the engine."])
    ['newcomen']
    """
    question = query.text.translate(_HALF_WIDTH)
    named = _with_names(question, keywords(question, limit=8), zh=query.language == "zh")
    words = [w for w in named if w.lower() not in _FILLER]
    joined = " ".join(docs).lower()
    return [w for w in words if w.lower() not in joined and _meaningful(w, question)]


def _gap_query(question: str, words: list[str], docs: Sequence[str]) -> str:
    joined = " ".join(docs).lower()
    missing = {w for w in words if w.lower() not in joined}
    gap = [w for w in words if w in missing and _meaningful(w, question)]
    known = [w for w in words if w not in missing]
    # Nothing meaningful is missing, or everything is: the first query already says it.
    if not gap or not known or len(gap) + 1 >= len(words):
        return ""
    # Anchor on the most specific shared term, so the gap terms are searched in context.
    anchor = max(known, key=lambda w: (_meaningful(w, question), len(w)))
    relation = [t for t in _with_anchors(question, []) if t not in (anchor, *gap)]
    return " ".join(sorted([anchor, *gap, *relation], key=lambda t: _position(question.lower(), t.lower())))


def _meaningful(word: str, question: str) -> bool:
    """Entity-like or rare: worth a search of its own (not a verb, filler or generic noun)."""
    low = word.lower()
    if low in _FILLER or low in _GENERIC:
        return False
    if any(c.isdigit() for c in word):
        return True
    if _is_chinese(word):
        flag = _zh_pos(question).get(word)
        if flag is None:
            # Not a word jieba's tagger produced on its own: a compound or unknown name, so specific.
            return len(word) >= 2
        return flag.startswith(_ZH_ENTITY_POS) and not flag.startswith("nv")
    if re.search(rf"\b{re.escape(word[:1].upper() + word[1:])}", question) and not _sentence_initial(word, question):
        return True  # capitalised mid-sentence: a name
    return len(low) >= 7 and not low.endswith(_EN_WEAK_SUFFIX)


def _sentence_initial(word: str, question: str) -> bool:
    first = re.match(r"\W*(\w+)", question)
    return first is not None and first.group(1).lower() == word.lower()


@lru_cache(maxsize=256)
def _zh_pos(question: str) -> dict[str, str]:
    return dict(zh_pos(question))


def llm_queries(query: Query, docs: Sequence[str], llm: LLM, *, max_queries: int = 2) -> list[str]:
    """Ask the LLM for gap-directed queries; raises ``LLMReplyError`` when the reply has none.

    The prompt (in the question's language) asks what the documents lack and for keyword
    queries that find it, as JSON ``{"queries": [...]}``.

    >>> from crag.testing.fakes import ScriptedLLM
    >>> llm_queries(Query.of("Who founded X?"), ["X is a company."], ScriptedLLM(['{"queries": ["X founder"]}']))
    ['X founder']
    """
    lang = "zh" if query.language == "zh" else "en"
    excerpt = "\n".join(f"- {d[:300]}" for d in docs[:3]) or "-"
    prompt = _REWRITE_PROMPT[lang].format(q=query.text, docs=excerpt, n=max_queries)
    out = llm.complete(
        [{"role": "user", "content": prompt}],
        max_tokens=96,
        json_schema={
            "type": "object",
            "properties": {"queries": {"type": "array", "items": {"type": "string"}}},
        },
    )
    queries = _parse_queries(out.text)
    if not queries:
        raise LLMReplyError(
            f"rewrite reply had no queries: {clip(out.text, 80)!r}", backend_id=llm.model_id, step="rewrite"
        )
    return _dedupe(queries)[:max_queries]


def _parse_queries(text: str) -> list[str]:
    m = re.search(r"\{.*\}", text, re.S)
    if m:
        try:
            data = json.loads(m.group(0))
            qs = data.get("queries") if isinstance(data, dict) else None
            if isinstance(qs, list):
                return [q.strip() for q in qs if isinstance(q, str) and q.strip()]
        except json.JSONDecodeError:
            pass
    return []


def _dedupe(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))

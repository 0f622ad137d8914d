"""Query types and per-type thresholds (the article's 3.2.3 dynamic thresholds).

"分类 → 选择阈值 → 评估 → 纠正": a question is classified as one of
``factoid`` (珠穆朗玛峰的高度), ``definition``, ``comparison``, ``reasoning`` or
``open-ended``, and the decision uses thresholds for that type: factoid questions have
one right answer, so Correct needs stronger evidence (higher upper); open discussion is
served by partially relevant material, so both thresholds are looser.

Classification is rule-based for Chinese and English (no model, microseconds);
:func:`classify_with_llm` asks an LLM and falls back to the rules on any failure.

>>> classify_query("什么是光合作用？")
'definition'
>>> classify_query("How many moons does Mars have?")
'factoid'
>>> classify_query("Python 和 Java 的区别是什么？")
'comparison'
>>> from crag.config import CragSettings
>>> thresholds_for("factoid", CragSettings(evaluator={"upper": 0.6, "lower": 0.35}))
(0.65, 0.35)
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING, NamedTuple

from crag.errors import ConfigError, CragError

if TYPE_CHECKING:
    from crag.config import CragSettings
    from crag.protocols import LLM
    from crag.types import Query

QUERY_TYPES: tuple[str, ...] = ("factoid", "definition", "comparison", "reasoning", "open-ended")

# Shifts of the configured (upper, lower) per type when evaluator.per_type has no entry.
DEFAULT_SHIFTS: dict[str, tuple[float, float]] = {
    "factoid": (0.05, 0.0),
    "definition": (0.0, 0.0),
    "comparison": (0.0, 0.0),
    "reasoning": (0.0, 0.0),
    "open-ended": (-0.1, -0.05),
}

_I = re.IGNORECASE
# Order matters: "what is the difference" is a comparison, "how many" a factoid, not reasoning.
_COMPARISON = re.compile(
    r"比较|对比|区别|不同|差异|异同|哪个更|哪一个更|哪种更|还是.{0,12}[?？]?$|优劣|优缺点"
    r"|\bvs\.?\b|\bversus\b|\bdifferences?\s+between\b|\bdiffer(?:ent)?\s+from\b|\bcompar(?:e|ed|ison)\b"
    r"|\b(?:better|worse|faster|slower|larger|smaller)\s+than\b|\bwhich\s+is\s+(?:better|more|less)\b",
    _I,
)
_FACTOID_HOW = re.compile(r"\bhow\s+(?:many|much|long|old|far|tall|big|high|often|large)\b", _I)
_DEFINITION = re.compile(
    r"^(?:请问)?什么是|^(?:请)?(?:解释|介绍)一?下?.{0,16}(?:的)?(?:概念|含义|定义)|定义|含义是|是什么意思|指的是什么"
    r"|^(?:请问)?[^的，,]{1,16}是什么[?？。]?$"
    r"|^(?:please\s+)?define\b|\bdefinition\s+of\b|\bmeaning\s+of\b|\bwhat\s+does\s+.{1,40}\s+mean\b"
    r"|^\s*what\s+(?:is|are)\s+(?:an?\s+|the\s+)?(?![^?]*\b(?:of|in|for|to|by|that|which|who|used)\b)[^?\s]+(?:\s+[^?\s]+){0,2}\s*\??\s*$",
    _I,
)
_REASONING = re.compile(
    r"(?<![称叫作成])为什么|为何|如何|怎样|怎么|原因是|\bwhy\b|\bhow\b|\bexplain\b",
    _I,
)
_FACTOID = re.compile(
    r"谁|哪|啥|何时|何地|何年|多少|几[个年次种位名岁月天号点十百千万条座本家所届]|什么时候|什么|多久|多大|多高|多长|第几"
    r"|\bwhen\b|\bwho(?:m|se)?\b|\bwhere\b|\bwhich\b|\bwhat\b|\bname\b|\bis\s+there\b",
    _I,
)
_OPEN = re.compile(
    r"谈谈|聊聊|怎么看|看法|建议|观点|介绍|\btell\s+me\s+about\b|\bthoughts?\b|\bopinion\b|\bdiscuss\b", _I
)


def classify_query(question: str) -> str:
    """The query type of ``question`` by Chinese/English rules (see ``QUERY_TYPES``).

    Beyond the article's cue words, a remaining "what"/"什么" question is a factoid
    (an attribute lookup like "What type of math was advanced during the Yuan?");
    open-ended is what has no question cue, or asks for views ("谈谈", "tell me about").
    """
    q = unicodedata.normalize("NFKC", question).strip()
    if _COMPARISON.search(q):
        return "comparison"
    if _FACTOID_HOW.search(q):
        return "factoid"
    if _DEFINITION.search(q):
        return "definition"
    if _REASONING.search(q):
        return "reasoning"
    if _OPEN.search(q):
        return "open-ended"
    if _FACTOID.search(q):
        return "factoid"
    return "open-ended"


_LLM_PROMPT = (
    "Classify the question into exactly one type:\n"
    "factoid (asks for a specific fact: who, when, where, how many), definition (what is X), "
    "comparison (X vs Y, differences), reasoning (why / how something works), "
    "open-ended (opinions, broad discussion).\n"
    "Reply with the type only.\n\nQuestion: {q}"
)
_ZH_NAMES = {
    "事实": "factoid",
    "定义": "definition",
    "比较": "comparison",
    "推理": "reasoning",
    "开放": "open-ended",
}


def classify_with_llm(question: str, llm: LLM) -> str:
    """Ask ``llm`` for the query type; any failure or unreadable reply falls back to the rules."""
    try:
        reply = llm.complete(
            [{"role": "user", "content": _LLM_PROMPT.format(q=question.strip())}],
            max_tokens=8,
            temperature=0.0,
            json_schema={"type": "string", "enum": list(QUERY_TYPES)},
        ).text
    except CragError:
        return classify_query(question)
    low = unicodedata.normalize("NFKC", reply).lower().replace("open ended", "open-ended")
    found = [(low.find(t), t) for t in QUERY_TYPES if t in low]
    found += [(low.find(k), v) for k, v in _ZH_NAMES.items() if k in low]
    return min(found)[1] if found else classify_query(question)


def thresholds_for(query_type: str, settings: CragSettings) -> tuple[float, float]:
    """``(upper, lower)`` for a query type: ``evaluator.per_type`` values, else shifted defaults.

    Raises ``ValueError`` for an unknown type and ``ConfigError`` when the result would
    not keep lower < upper.
    """
    if query_type not in QUERY_TYPES:
        raise ValueError(f"unknown query type {query_type!r}; use one of {', '.join(QUERY_TYPES)}")
    ev = settings.evaluator
    d_up, d_low = DEFAULT_SHIFTS[query_type]
    override: dict[str, float] = {k: v for t, th in ev.per_type.items() if t == query_type for k, v in th.items()}
    upper = override.get("upper", _clip(ev.upper + d_up))
    lower = override.get("lower", _clip(ev.lower + d_low))
    if not lower < upper:
        raise ConfigError(
            f"thresholds for {query_type} questions: lower {lower} must be below upper {upper}; "
            f"fix evaluator.per_type.{query_type} or evaluator.upper/lower"
        )
    return upper, lower


class QueryThresholds(NamedTuple):
    """The thresholds one question is decided with; ``query_type`` is '' when classification is off."""

    query_type: str
    upper: float
    lower: float


def query_for(
    question: str, settings: CragSettings, *, mode: str = "crag", filters: dict[str, tuple[str, ...]] | None = None
) -> Query:
    """The question as every step reads it: its language detected, and in CRAG mode its type
    and thresholds chosen, here and only here (the pipeline's ``make_query``, ``crag grade``).

    >>> from crag.config import CragSettings
    >>> q = query_for("珠穆朗玛峰有多高？", CragSettings(evaluator={"upper": 0.6, "lower": 0.35, "classify": True}))
    >>> q.language, q.query_type, q.upper, q.lower
    ('zh', 'factoid', 0.65, 0.35)
    """
    from crag.text import detect_language
    from crag.types import Query

    ev = settings.evaluator
    scope = dict(filters or {})
    if mode != "crag":
        return Query(question, detect_language(question), "", ev.upper, ev.lower, ev.rule, mode, scope)
    th = query_thresholds(question, settings)
    return Query(question, detect_language(question), th.query_type, th.upper, th.lower, ev.rule, mode, scope)


def query_thresholds(question: str, settings: CragSettings, llm: LLM | None = None) -> QueryThresholds:
    """Classify ``question`` (when ``evaluator.classify`` is on) and pick its thresholds.

    The single place the pipeline and the ensemble's agreement rule read thresholds
    from, so both decide with the same numbers.
    """
    ev = settings.evaluator
    if not ev.classify:
        return QueryThresholds("", ev.upper, ev.lower)
    qtype = classify_with_llm(question, llm) if llm is not None else classify_query(question)
    upper, lower = thresholds_for(qtype, settings)
    return QueryThresholds(qtype, upper, lower)


def _clip(x: float) -> float:
    return round(min(1.0, max(0.0, x)), 4)

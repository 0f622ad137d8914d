"""Query decomposition: split a compound question into sub-queries searched in parallel.

The article (3.2): "将复杂查询‘如何为我的初创公司制定股权激励计划’分解为‘初创公司股权分配比例’、
‘员工期权池设置’、‘股权激励法律协议模板’等多个子查询并行搜索". Rules handle the common
shapes without a model — comparisons ("A和B的区别", "difference between X and Y"),
enumerations ("北京、上海和广州的人口", "France, Germany and Italy"), several questions in
one ("…；…", "… and when …?") and bulleted lists; an LLM (optional) handles the rest,
and any LLM failure falls back to the rules.

>>> from crag.types import Query
>>> decompose(Query.of("TCP和UDP的区别是什么？")).subqueries
['TCP', 'UDP', 'TCP UDP 区别']
>>> decompose(Query.of("What is the population of France, Germany and Italy?")).subqueries
['What is the population of France?', 'What is the population of Germany?', 'What is the population of Italy?']
>>> decompose(Query.of("Who wrote Hamlet?"))
Decomposition(subqueries=['Who wrote Hamlet?'], degradations=[])
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from crag.deadline import Deadline
from crag.errors import CragError, LLMReplyError
from crag.protocols import LLM, WebSearch
from crag.redact import clip
from crag.text import zh_pos
from crag.types import Query, WebResult

MAX_WORKERS = 8  # sub-queries beyond this wait for a free thread; providers rate-limit anyway

_PROMPT = {
    "zh": (
        "把用户的问题分解为可以分别搜索的子查询。简单问题原样返回一个子查询。\n"
        "示例：问题“如何为我的初创公司制定股权激励计划？”→ "
        '{{"subqueries": ["初创公司股权分配比例", "员工期权池设置", "股权激励法律协议模板"]}}\n'
        "问题：{q}\n最多{n}个子查询，每个是简短的关键词查询。只回复JSON。"
    ),
    "en": (
        "Split the user's question into sub-queries that can be searched separately. "
        "Return a simple question as one sub-query.\n"
        'Example: "How do I design an equity incentive plan for my startup?" -> '
        '{{"subqueries": ["startup equity split ratios", "employee option pool size", '
        '"equity incentive legal agreement template"]}}\n'
        "Question: {q}\nAt most {n} short keyword sub-queries. Reply with JSON only."
    ),
}

_ZH_COMPARE = re.compile(
    r"^(?:请)?(?:比较|对比)?(?P<a>[^，,。？?；;和与跟同及]{1,20}?)(?:和|与|跟|同|及)(?P<b>[^，,。？?；;]{1,20}?)"
    r"(?:之间)?(?:的|有)?(?:什么|哪些|有何)?(?P<w>区别|差异|不同|异同|对比|比较|优劣|优缺点|关系|联系)"
)
_EN_COMPARE = re.compile(
    r"\b(?P<w>differences?|difference|compare|comparison|relationship|distinguish)\b.*?\b(?:between|of)?\s*"
    r"(?P<a>[\w .'-]{1,40}?)\s+(?:and|vs\.?|versus|with)\s+(?P<b>[\w .'-]{1,40}?)\s*[?.!]?$",
    re.IGNORECASE,
)
_EN_VS = re.compile(r"^(?P<a>[\w .'-]{1,40}?)\s+(?:vs\.?|versus)\s+(?P<b>[\w .'-]{1,40}?)\s*[?.!]?$", re.I)
_SEMICOLON = re.compile(r"[；;]\s*")
_EN_SECOND_Q = re.compile(r",?\s+and\s+(?=(?:what|who|when|where|why|how|which)\b)", re.IGNORECASE)
_ZH_SECOND_Q = re.compile(r"[，,]\s*(?:以及|并且|还有|另外)?(?=(?:什么|谁|哪|何时|如何|为什么|怎么|是否|多少))")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)、])\s*(.+?)\s*$")
_EN_NAME = r"[A-Z][\w'-]*(?: (?:of |the |de )?[A-Z][\w'-]*)*"
_EN_ITEM = rf"(?:the )?{_EN_NAME}"
_EN_ENUM = re.compile(rf"(?P<items>{_EN_NAME}(?:, {_EN_ITEM})*,? (?:and|or) {_EN_ITEM})")
_ZH_CONJ = {"和", "与", "及", "以及", "、", "跟"}


class Decomposition(NamedTuple):
    """The sub-queries of a question, and why the model's were not used (if so)."""

    subqueries: list[str]
    degradations: list[str]


def decompose(question: Query, llm: LLM | None = None, max_subqueries: int = 4) -> Decomposition:
    """Sub-queries for ``question``; ``[question.text]`` when it does not split.

    With ``llm``, the model decomposes (the article's equity-incentive prompt); a failed
    or unusable reply falls back to the rules, said in ``degradations``.

    >>> decompose(Query.of("气炉以什么为燃料；气炉什么时候商业化？")).subqueries
    ['气炉以什么为燃料', '气炉什么时候商业化？']
    """
    q = question.text.strip()
    if not q or max_subqueries < 1:
        return Decomposition([q] if q else [], [])
    lang = "zh" if question.language == "zh" else "en"
    degradations: list[str] = []
    if llm is not None:
        try:
            subs = _llm_decompose(q, llm, max_subqueries, lang)
            if subs:
                return Decomposition(subs, [])
        except CragError as exc:
            degradations.append(f"LLM decomposition failed ({exc}); used rules")
    return Decomposition(rule_decompose(question, max_subqueries=max_subqueries), degradations)


def rule_decompose(question: Query, *, max_subqueries: int = 4) -> list[str]:
    """The rule-based decomposition alone (no model)."""
    q = question.text.strip()
    zh = question.language == "zh"
    rules = (_bullets, _semicolons, _second_question, _long_enumeration, _comparison, _enumeration)
    for rule in rules:
        subs = _dedupe(rule(q, zh))
        if len(subs) > 1:
            return subs[:max_subqueries]
    return [q]


def _long_enumeration(q: str, zh: bool) -> list[str]:
    # "Compare France, Germany, Italy and Spain": three or more items are a list, even
    # after a comparison word, which would otherwise keep only the last pair.
    subs = _enumeration(q, zh)
    return subs if len(subs) >= 3 else []


def _bullets(q: str, zh: bool) -> list[str]:
    lines = [ln for ln in q.splitlines() if ln.strip()]
    items = [m.group(1) for ln in lines if (m := _BULLET.match(ln))]
    return items if len(items) >= 2 else []


def _semicolons(q: str, zh: bool) -> list[str]:
    parts = [p.strip() for p in _SEMICOLON.split(q) if len(p.strip()) >= 2]
    return parts if len(parts) >= 2 else []


def _second_question(q: str, zh: bool) -> list[str]:
    pat = _ZH_SECOND_Q if zh else _EN_SECOND_Q
    parts = [p.strip() for p in pat.split(q) if p.strip()]
    if len(parts) < 2:
        return []
    # "Who founded Tesla and when was it founded?": the second part needs the subject back.
    subject = _subject(parts[0], zh)
    out = [parts[0]]
    for p in parts[1:]:
        out.append(p if not subject or subject.lower() in p.lower() else f"{subject} {p}")
    return out


def _subject(text: str, zh: bool) -> str:
    if zh:
        for word, flag in zh_pos(text):
            if flag.startswith(("nr", "ns", "nt", "nz", "eng")) or (flag == "n" and len(word) >= 2):
                return word
        return ""
    names = re.findall(_EN_NAME, text)
    names = [n for n in names if n.split()[0].lower() not in {"what", "who", "when", "where", "why", "how", "which"}]
    return names[0] if names else ""


def _comparison(q: str, zh: bool) -> list[str]:
    if zh:
        m = _ZH_COMPARE.search(q)
    else:
        m = _EN_COMPARE.search(q) or _EN_VS.search(q)
    if not m:
        return []
    a, b = _trim(m.group("a")), _trim(m.group("b"))
    if not a or not b:
        return []
    word = m.groupdict().get("w") or "vs"
    return [a, b, f"{a} {b} {word}"]


def _trim(s: str) -> str:
    s = re.sub(r"^(?:the|a|an|between)\s+", "", s.strip(), flags=re.IGNORECASE)
    return s.strip(" ,.?？的")


def _enumeration(q: str, zh: bool) -> list[str]:
    if zh:
        return _zh_enumeration(q)
    m = _EN_ENUM.search(q)
    if not m:
        return []
    items = [i.strip() for i in re.split(r",\s*(?:and |or )?|\s+(?:and|or)\s+", m.group("items")) if i.strip()]
    if len(items) < 2:
        return []
    head, tail = q[: m.start()], q[m.end() :]
    return [f"{head}{item}{tail}" for item in items]


def _zh_enumeration(q: str) -> list[str]:
    # Items are the noun runs joined by 和/与/、…; the words around them are shared context.
    tokens = zh_pos(q)
    conj = [i for i, (w, _) in enumerate(tokens) if w in _ZH_CONJ]
    if not conj:
        return []

    def nounish(i: int) -> bool:
        return 0 <= i < len(tokens) and tokens[i][1].startswith(("n", "eng", "nr", "ns", "nt", "nz", "j"))

    first, last = conj[0], conj[-1]
    if not all(nounish(i - 1) and nounish(i + 1) for i in conj):
        return []
    # Every token between the first and last conjunction must be an item or a conjunction.
    if any(not nounish(i) and tokens[i][0] not in _ZH_CONJ for i in range(first, last + 1)):
        return []
    start, end = first - 1, last + 1
    items = [tokens[i][0] for i in range(start, end + 1) if tokens[i][0] not in _ZH_CONJ]
    head = "".join(w for w, _ in tokens[:start])
    tail = "".join(w for w, _ in tokens[end + 1 :])
    return [f"{head}{item}{tail}" for item in items]


def _llm_decompose(q: str, llm: LLM, n: int, lang: str) -> list[str]:
    prompt = _PROMPT["zh" if lang == "zh" else "en"].format(q=q, n=n)
    out = llm.complete(
        [{"role": "user", "content": prompt}],
        max_tokens=128,
        json_schema={
            "type": "object",
            "properties": {"subqueries": {"type": "array", "items": {"type": "string"}}},
        },
    )
    m = re.search(r"\{.*\}", out.text, re.S)
    try:
        data = json.loads(m.group(0)) if m else None
    except json.JSONDecodeError:
        data = None
    if data is None:
        raise LLMReplyError(
            f"decomposition reply was not JSON: {clip(out.text, 80)!r}", backend_id=llm.model_id, step="decompose"
        )
    subs = data.get("subqueries") if isinstance(data, dict) else None
    if not isinstance(subs, list):
        raise LLMReplyError("decomposition reply had no 'subqueries' list", backend_id=llm.model_id, step="decompose")
    clean = _dedupe(s.strip() for s in subs if isinstance(s, str) and s.strip())
    return clean[:n]


def _dedupe(items: Any) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


class Found(NamedTuple):
    """``(query, result)`` pairs of a parallel search, and the queries that failed or timed out."""

    results: list[tuple[str, WebResult]]
    degradations: list[str]


def search_parallel(
    queries: Sequence[str],
    search: WebSearch,
    k: int,
    timeout: float | None,
    *,
    deadline: Deadline | None = None,
) -> Found:
    """Run every query at once; return ``(query, result)`` pairs, deduplicated, in query order.

    Each query runs in its own daemon thread. A query that fails (``CragError``) or is
    still running when ``timeout`` (or the request ``deadline``) passes contributes
    nothing and is said in ``degradations``; the call itself never raises for them. Four
    sub-queries therefore cost about one.

    >>> from crag.testing.fakes import StaticWebSearch
    >>> web = StaticWebSearch([WebResult("t", "https://e.org/a", "text")])
    >>> [(q, r.url) for q, r in search_parallel(["a", "b"], web, k=3, timeout=2.0).results]
    [('a', 'https://e.org/a')]
    """
    if not queries:
        return Found([], [])
    limit = Deadline(timeout) if timeout is not None else Deadline(None)
    runs = _Searches(search, k, [None] * len(queries), [None] * len(queries))
    threads = [runs.start(i, q) for i, q in enumerate(queries)]
    # A query given up on is reported once, as timed out; whatever its thread does later
    # (fail on its own HTTP timeout, or finish) is ignored, as the answer is built by then.
    abandoned: set[int] = set()
    degradations: list[str] = []
    for i, t in enumerate(threads):
        wait = min(limit.remaining(), deadline.remaining() if deadline else float("inf"))
        t.join(None if wait == float("inf") else wait)
        if t.is_alive():
            abandoned.add(i)
            degradations.append(f"search for {queries[i]!r} timed out after {_elapsed(limit, deadline):g}s; skipped")
        elif (failure := runs.failures[i]) is not None:
            degradations.append(failure)
    kept = [(q, runs.slots[i] or []) for i, q in enumerate(queries) if i not in abandoned]
    return Found(_distinct(kept), degradations)


@dataclass
class _Searches:
    """The queries' threads write here: each query's results, or why it failed."""

    search: WebSearch
    k: int
    slots: list[list[WebResult] | None]
    failures: list[str | None]
    gate: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(MAX_WORKERS))

    def start(self, i: int, q: str) -> threading.Thread:
        """Run query ``i`` on its own daemon thread (at most ``MAX_WORKERS`` at a time)."""
        t = threading.Thread(target=self._one, args=(i, q), name=f"crag-search-{i}", daemon=True)
        t.start()
        return t

    def _one(self, i: int, q: str) -> None:
        with self.gate:
            try:
                self.slots[i] = self.search.search(q, k=self.k)
            except CragError as exc:
                self.failures[i] = f"search for {q!r} failed: {exc}"
                self.slots[i] = []


def _distinct(found: list[tuple[str, list[WebResult]]]) -> list[tuple[str, WebResult]]:
    """``(query, result)`` pairs in query order, each page (URL and opening) once."""
    seen: set[str] = set()
    out: list[tuple[str, WebResult]] = []
    for q, results in found:
        for r in results:
            key = r.url + "\x00" + r.content[:200]
            if key not in seen:
                seen.add(key)
                out.append((q, r))
    return out


def _elapsed(limit: Deadline, deadline: Deadline | None) -> float:
    budgets = [d.seconds for d in (limit, deadline) if d is not None and d.seconds is not None]
    return round(min(budgets), 3) if budgets else 0.0

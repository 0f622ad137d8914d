"""Search-query rewriting for the correction step. The user's question is never replaced.

Without an LLM, queries come from a keyword extractor (jieba for Chinese): the
question's content words, and a second query aimed at the *gap* — the question's
terms that the retrieved documents do not contain. With an LLM (opt-in), the model
reads the question and what was retrieved and proposes queries for what is missing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from crag.protocols import LLM
from crag.text import detect_language, keywords

_REWRITE_PROMPT = {
    "en": (
        "You write web search queries. Question: {q}\n"
        "The documents found so far say:\n{docs}\n"
        "Write up to {n} short search queries (keywords, no full sentences) that would find "
        "the information the documents lack to answer the question. "
        'Reply as JSON: {{"queries": ["...", "..."]}}'
    ),
    "zh": (
        "你负责编写搜索查询。问题：{q}\n目前检索到的文档内容：\n{docs}\n"
        "请写出最多{n}个简短的搜索查询（关键词形式），用于查找回答该问题所缺少的信息。"
        '以JSON格式回复：{{"queries": ["...", "..."]}}'
    ),
}


def keyword_queries(question: str, docs: Sequence[str], *, max_queries: int = 2) -> list[str]:
    """Keyword rewrite plus an information-gap query (terms the documents lack)."""
    lang = detect_language(question)
    sep = " "
    words = keywords(question, limit=8) or [question.strip()]
    queries = [sep.join(words)]
    joined = " ".join(docs).lower()
    gap = [w for w in words if w.lower() not in joined]
    # Only worth a second search when the gap query is narrower than the first one.
    if gap and len(gap) < len(words) - 1 and max_queries > 1:
        # Anchor the gap terms with the first (usually the subject) known term.
        anchor = [w for w in words if w not in gap][:1]
        queries.append(sep.join(anchor + gap))
    del lang
    return _dedupe(queries)[:max_queries]


def llm_queries(question: str, docs: Sequence[str], llm: LLM, *, max_queries: int = 2) -> list[str]:
    """Ask the LLM for gap-directed queries; falls back to keywords on any parse problem."""
    lang = detect_language(question)
    excerpt = "\n".join(f"- {d[:300]}" for d in docs[:3]) or "-"
    prompt = _REWRITE_PROMPT[lang].format(q=question, docs=excerpt, n=max_queries)
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
        raise ValueError(f"rewrite reply had no queries: {out.text[:80]!r}")
    return _dedupe(queries)[:max_queries]


def _parse_queries(text: str) -> list[str]:
    m = re.search(r"\{.*\}", text, re.S)
    if m:
        try:
            data = json.loads(m.group(0))
            qs = data.get("queries") if isinstance(data, dict) else None
            if isinstance(qs, list):
                return [q.strip() for q in qs if isinstance(q, str) and q.strip()]
        except ValueError:
            pass
    return []


def _dedupe(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))

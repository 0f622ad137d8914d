"""Relevance signals shared by evaluators and strip scoring: dense, keyword, coverage."""

from __future__ import annotations

import math
import re

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

"""Maximal marginal relevance: pick strips that are relevant *and* say different things.

The article (3.2, 多源知识融合) clusters ``D ∪ D_web`` and keeps one representative per
cluster; MMR gets the same effect greedily without choosing a cluster count: each next
strip maximises ``λ·relevance − (1−λ)·max similarity to what is already chosen``.

With vectors (L2-normalised, e.g. from the embedder) similarity is cosine; without
them it falls back to character-trigram Jaccard, which works for Chinese and English.

>>> from crag.types import Strip
>>> strips = [Strip("Paris is the capital of France.", "a", "web", score=0.9),
...           Strip("Paris is the capital city of France.", "b", "web", score=0.85),
...           Strip("France uses the euro.", "c", "web", score=0.6)]
>>> mmr(strips, None, None, lambda_=0.5, k=2)
[0, 2]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from crag.types import Strip


def trigrams(text: str) -> set[str]:
    """Lower-cased character trigrams with whitespace collapsed."""
    t = re.sub(r"\s+", " ", text.lower()).strip()
    return {t[i : i + 3] for i in range(max(1, len(t) - 2))} if t else set()


def jaccard(a: set[str], b: set[str]) -> float:
    """``|a ∩ b| / |a ∪ b|`` (0 for two empty sets)."""
    return len(a & b) / len(a | b) if a and b else 0.0


def similarity_matrix(texts: Sequence[str], vectors: Any = None) -> np.ndarray:
    """Pairwise similarity: cosine of ``vectors`` when given, else trigram Jaccard of ``texts``."""
    n = len(texts)
    if vectors is not None and n:
        m: np.ndarray = np.asarray(vectors, dtype=np.float32).reshape(n, -1)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        unit: np.ndarray = m / np.where(norms == 0, 1.0, norms)  # tolerate vectors that are not normalised
        out: np.ndarray = np.clip(unit @ unit.T, -1.0, 1.0)
        return out
    grams = [trigrams(t) for t in texts]
    sim = np.eye(n, dtype=np.float32)
    for i in range(n):
        for j in range(i + 1, n):
            sim[i, j] = sim[j, i] = jaccard(grams[i], grams[j])
    return sim


def mmr(
    strips: Sequence[Strip],
    vectors: Any,
    query_vector: Any,
    lambda_: float = 0.7,
    k: int | None = None,
    *,
    relevance: Sequence[float] | None = None,
) -> list[int]:
    """Indices of up to ``k`` strips in MMR selection order (all of them when ``k`` is None).

    Relevance is, in order of preference: ``relevance`` (e.g. evaluator scores boosted by
    cross-source support), the cosine of ``query_vector`` with each row of ``vectors``,
    or each strip's ``score``. ``lambda_`` = 1 is pure relevance ranking; 0 is pure novelty.

    >>> from crag.types import Strip
    >>> mmr([Strip("a", "s", "web", score=0.2), Strip("b", "s", "web", score=0.9)], None, None, 1.0)
    [1, 0]
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError("lambda_ must be within [0, 1]")
    n = len(strips)
    k = n if k is None else min(k, n)
    if k <= 0:
        return []
    rel: np.ndarray
    if relevance is not None:
        rel = np.asarray(relevance, dtype=np.float32)
    elif vectors is not None and query_vector is not None:
        m = np.asarray(vectors, dtype=np.float32).reshape(n, -1)
        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        denom = np.linalg.norm(m, axis=1) * (np.linalg.norm(q) or 1.0)
        rel = (m @ q) / np.where(denom == 0, 1.0, denom)
    else:
        rel = np.asarray([s.score for s in strips], dtype=np.float32)
    sim = similarity_matrix([s.text for s in strips], vectors)
    chosen: list[int] = []
    max_sim = np.full(n, -np.inf, dtype=np.float32)
    remaining = set(range(n))
    while remaining and len(chosen) < k:
        redundancy = np.where(np.isfinite(max_sim), max_sim, 0.0)
        gain = lambda_ * rel - (1.0 - lambda_) * redundancy
        # Ties go to the earlier (higher-ranked) strip, so the order is deterministic.
        best = min(remaining, key=lambda i: (-float(gain[i]), i))
        chosen.append(best)
        remaining.discard(best)
        max_sim = np.maximum(max_sim, sim[best])
    return chosen

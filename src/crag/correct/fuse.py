"""Fusion of internal and external knowledge: dedupe, rank, budget, source tags.

:func:`fuse` is the first version (near-duplicates out, rank by grade, character budget).
:func:`fuse_ranked` is the full step of the article's 多源知识融合 (3.2):

1. exact and near-duplicates out (character trigrams; cosine too when vectors are given),
   the higher-graded copy surviving;
2. cross-source support: a fact stated by several independent sources
   (:func:`crag.search.trust.support_counts`) ranks above a single site's claim;
3. selection by score *and* diversity (MMR) to a token budget;
4. contradictions between the chosen strips, for the generator to present both.

>>> from crag.types import Strip
>>> a = Strip("The Eiffel Tower is 330 metres tall.", "https://en.wikipedia.org/x", "web", score=0.8)
>>> b = Strip("The Eiffel Tower is 330 metres tall!", "https://copy.example/x", "web", score=0.7)
>>> c = Strip("The Eiffel Tower is 324 metres tall.", "https://old.example/y", "web", score=0.6)
>>> r = fuse_ranked([[a, b, c]], max_tokens=200)
>>> [s.source for s in r.context], r.duplicates, r.conflicts[0].reason
(['https://en.wikipedia.org/x', 'https://old.example/y'], 1, 'different values: 330 metres vs 324 metres')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from crag.correct.contradict import Conflict, detect_conflicts
from crag.correct.fit import fit_budget
from crag.search.trust import domain_of, support_counts
from crag.types import Strip

SUPPORT_BONUS = 0.05  # score added per extra independent source (capped below)
MAX_SUPPORT_BONUS = 0.15  # so support reorders close grades but never lifts an irrelevant strip
DUPLICATE_COSINE = 0.95
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _shingles(text: str, n: int = 3) -> set[str]:
    t = re.sub(r"\s+", " ", text.lower()).strip()
    return {t[i : i + n] for i in range(max(1, len(t) - n + 1))}


def near_duplicate(a: str, b: str, threshold: float = 0.8) -> bool:
    """Character-trigram Jaccard similarity ≥ threshold (language independent)."""
    sa, sb = _shingles(a), _shingles(b)
    if not sa or not sb:
        return a.strip() == b.strip()
    return len(sa & sb) / len(sa | sb) >= threshold


def fuse(groups: Sequence[Sequence[Strip]], *, max_chars: int) -> tuple[list[Strip], int]:
    """Merge strip lists: drop near-duplicates (the higher score survives), rank by score,
    fit ``max_chars``. Returns (context, duplicates removed)."""
    pool = sorted((s for g in groups for s in g), key=lambda s: -s.score)
    kept: list[Strip] = []
    dupes = 0
    for s in pool:
        if any(near_duplicate(s.text, k.text) or s.text in k.text for k in kept):
            dupes += 1
            continue
        kept.append(s)
    out: list[Strip] = []
    used = 0
    for s in kept:
        if used + len(s.text) > max_chars and out:
            continue  # a smaller strip further down may still fit
        out.append(s)
        used += len(s.text)
    return out, dupes


def dedupe(
    strips: Sequence[Strip],
    *,
    vectors: Any = None,
    threshold: float = 0.8,
    cosine: float = DUPLICATE_COSINE,
) -> tuple[list[int], int]:
    """Indices of the strips to keep (best score first) and how many duplicates were dropped.

    A strip is a duplicate of a kept one when its text is contained in it, their trigram
    Jaccard is ≥ ``threshold``, or (with ``vectors``, one row per strip) their cosine is
    ≥ ``cosine`` — paraphrases that share few characters — and both state the same
    numbers (otherwise they may contradict each other, which fusion must keep visible).

    >>> dedupe([Strip("a b c d e f", "x", "web", score=0.2), Strip("a b c d e f", "y", "web", score=0.9)])
    ([1], 1)
    """
    order = sorted(range(len(strips)), key=lambda i: (-strips[i].score, i))
    unit = None
    if vectors is not None and len(strips):
        m = np.asarray(vectors, dtype=np.float32).reshape(len(strips), -1)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        unit = m / np.where(norms == 0, 1.0, norms)
    numbers = [frozenset(_NUMBER.findall(s.text)) for s in strips]
    kept: list[int] = []
    dupes = 0
    for i in order:
        text = strips[i].text
        # Same words with a different number is a contradiction to show, not a copy to drop.
        alike = [j for j in kept if numbers[j] == numbers[i]]
        dup = any(text.strip() in strips[j].text or near_duplicate(text, strips[j].text, threshold) for j in alike)
        if not dup and unit is not None and alike:
            dup = bool(float(np.max(unit[alike] @ unit[i])) >= cosine)
        if dup:
            dupes += 1
        else:
            kept.append(i)
    return kept, dupes


class FuseResult(NamedTuple):
    """The fused context and what the trace should show about it.

    ``support[i]`` and ``scores[i]`` belong to ``context[i]``; ``conflicts`` index into
    ``context`` (``Conflict.a_index + 1`` is the ``[n]`` the generator sees).
    """

    context: list[Strip]
    duplicates: int
    support: list[int]
    scores: list[float]
    conflicts: list[Conflict]


def fuse_ranked(
    groups: Sequence[Sequence[Strip]],
    *,
    max_tokens: int,
    vectors: Any = None,
    query_vector: Any = None,
    diversity: bool = True,
    mmr_lambda: float = 0.7,
    detect_contradictions: bool = True,
) -> FuseResult:
    """Dedupe, rank by grade plus cross-source support, select by MMR to ``max_tokens``.

    ``vectors`` (optional) has one row per strip of the flattened ``groups``, in order;
    with them, duplicates include close paraphrases and MMR uses cosine similarity.
    Strip objects are returned as they are (``Strip`` has no support field, so support
    counts come back in the parallel ``FuseResult.support`` list).
    """
    pool = [s for g in groups for s in g]
    if not pool:
        return FuseResult([], 0, [], [], [])
    keep, dupes = dedupe(pool, vectors=vectors)
    strips = [pool[i] for i in keep]
    kept_vectors = None
    if vectors is not None:
        kept_vectors = np.asarray(vectors, dtype=np.float32).reshape(len(pool), -1)[keep]
    # Internal strips have no domain: their source file stands in, so two chunks of one
    # file do not count as two independent sources.
    support = support_counts([(s.text, domain_of(s.url) or s.source) for s in strips])
    ranked = [s.score + min(MAX_SUPPORT_BONUS, SUPPORT_BONUS * (n - 1)) for s, n in zip(strips, support, strict=True)]
    chosen = fit_budget(
        strips,
        ranked,
        max_tokens,
        diversity,
        vectors=kept_vectors,
        query_vector=query_vector,
        lambda_=mmr_lambda,
    )
    index = {id(s): i for i, s in enumerate(strips)}
    picked = [index[id(s)] for s in chosen]
    context = [strips[i] for i in picked]
    conflicts = detect_conflicts(context) if detect_contradictions else []
    return FuseResult(context, dupes, [support[i] for i in picked], [ranked[i] for i in picked], conflicts)

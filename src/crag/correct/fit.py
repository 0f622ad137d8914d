"""Context fitting: which strips fit the prompt's token budget.

:func:`fit_budget` picks strips by score and diversity (MMR) until a token budget is
full — the article's 上下文管理: "精选出最相关、最不冗余的部分".

>>> from crag.types import Strip
>>> strips = [Strip("A long strip " * 20, "a", "web", score=0.9), Strip("Short.", "b", "web", score=0.5)]
>>> [s.source for s in fit_budget(strips, [s.score for s in strips], max_tokens=10)]
['a']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crag.correct.diversity import mmr
from crag.text import approx_tokens
from crag.types import Strip


def fit_budget(
    strips: Sequence[Strip],
    scores: Sequence[float],
    max_tokens: int,
    diversity: bool = True,
    *,
    vectors: Any = None,
    query_vector: Any = None,
    lambda_: float = 0.7,
) -> list[Strip]:
    """Strips in selection order whose ``approx_tokens`` sum fits ``max_tokens``.

    Selection order is MMR over ``scores`` when ``diversity`` (so a near-copy of a chosen
    strip waits behind a strip saying something new), else plain score order. A strip
    that does not fit is skipped and smaller ones further down may still fit; the best
    strip is always kept, even alone over budget, so the generator never gets nothing.
    """
    if len(scores) != len(strips):
        raise ValueError("scores must have one value per strip")
    if max_tokens <= 0:
        raise ValueError("max_tokens must be > 0")
    if not strips:
        return []
    if diversity:
        order = mmr(strips, vectors, query_vector, lambda_, relevance=scores)
    else:
        order = sorted(range(len(strips)), key=lambda i: (-scores[i], i))
    out: list[Strip] = []
    used = 0
    for i in order:
        cost = approx_tokens(strips[i].text)
        if used + cost > max_tokens and out:
            continue
        out.append(strips[i])
        used += cost
    return out

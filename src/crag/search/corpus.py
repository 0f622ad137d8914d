"""The ``corpus`` provider: a larger local knowledge base standing in for web search.

The corpus (a folder or a JSONL file) is indexed the same way as the knowledge base —
chunked, embedded, Chroma + BM25 — into ``<kb>/corpora/<name>-<hash>``, once; later runs
reuse the index (unchanged files are skipped by content hash).

>>> search = CorpusSearch("data/sample/external", index_root="kb/corpora", embedder=emb)  # doctest: +SKIP
>>> [r.title for r in search.search("Normandy", k=3)]                                     # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from crag.config import ChunkSettings, RetrievalSettings
from crag.errors import ConfigError, SearchError
from crag.protocols import Embedder
from crag.registry import SEARCHES
from crag.types import WebResult


class CorpusSearch:
    """Hybrid search over a local corpus, returning normalised ``WebResult`` objects."""

    name = "corpus"

    def __init__(
        self,
        corpus: str | Path,
        *,
        index_root: str | Path,
        embedder: Embedder,
        chunking: ChunkSettings | None = None,
    ) -> None:
        self.corpus = Path(corpus).resolve()
        if not self.corpus.exists():
            raise ConfigError(
                f"search corpus {corpus} not found; pass an existing folder or .jsonl with --search-corpus"
            )
        digest = hashlib.sha256(str(self.corpus).encode()).hexdigest()[:10]
        self.index_path = Path(index_root) / f"{self.corpus.stem}-{digest}"
        self.embedder = embedder
        self.chunking = chunking or ChunkSettings()
        self._kb: Any = None
        self._lock = threading.Lock()

    def warm_up(self, progress: Any = None) -> None:
        """Index the corpus if needed (fast when nothing changed)."""
        with self._lock:
            if self._kb is not None:
                return
            from crag.kb import KnowledgeBase

            kb = KnowledgeBase(
                self.index_path,
                self.embedder,
                chunking=self.chunking,
                retrieval=RetrievalSettings(top_k=10, candidates=30),
            )
            kb.ingest([self.corpus], prune=True, progress=progress)
            self._kb = kb

    def search(self, query: str, *, k: int) -> list[WebResult]:
        self.warm_up()
        try:
            hits = self._kb.search(query, k=k)
        except Exception as exc:
            raise SearchError(f"corpus search failed: {exc}", backend_id="corpus", step="search") from None
        return [
            WebResult(
                title=h.chunk.title,
                url=h.chunk.url or f"file://{h.chunk.source}",
                content=h.chunk.text,
                snippet=h.chunk.text[:300],
                published=str(h.chunk.metadata.get("published", "")),
                score=h.dense if h.dense is not None else h.score,
                provider="corpus",
            )
            for h in hits
        ]


@SEARCHES.register("corpus")
def _make(settings: Any, *, embedder: Embedder, **_: Any) -> CorpusSearch:
    path = settings.search.corpus_path
    if path is None:
        raise ConfigError(
            "the corpus search provider needs a corpus: set search.corpus_path or pass --search-corpus PATH"
        )
    return CorpusSearch(path, index_root=settings.kb.path / "corpora", embedder=embedder, chunking=settings.chunking)

